"""The run's report, rewritten after every round: report.json (the data), report.md and report.html
(self-contained: the metric plot is an embedded PNG). What a person reads to judge the loop."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from skillbank import atomic


def report_data(state: Any) -> dict[str, Any]:
    d = state.data
    rounds = []
    for x in d["rounds"]:
        rounds.append({
            "round": x["round"], "model": x["model"], "adopted": x["adopted"],
            "proxy": x["proxy"]["value"], "benchmark": x["benchmark"]["value"], "metric": x["benchmark"]["metric"],
            "benchmark_families": {k: v.get("accuracy") for k, v in x["benchmark"].get("families", {}).items()},
            "proxy_families": {k: v.get("accuracy") for k, v in x["proxy"].get("families", {}).items()},
            "gaps": (x.get("gaps") or {}).get("gaps"), "unparseable": (x.get("gaps") or {}).get("unparseable"),
            "gap_families": (x.get("gaps") or {}).get("families"),
            "mined": (x.get("mined") or {}).get("selected"), "mined_families": (x.get("mined") or {}).get("families"),
            "mined_examples": (x.get("mined") or {}).get("examples", []),
            "added": (x.get("curated") or {}).get("added"), "train_records": (x.get("curated") or {}).get("train_records"),
        })
    stop = d["config"].get("stop") or {}
    decides = (f"family {stop['adopt_on']}'s benchmark accuracy (any other family may fall at most {stop.get('max_family_drop')})"
               if stop.get("adopt_on") else "the benchmark metric")
    return {"status": d["status"], "stop": d.get("stop"), "best": d.get("best"), "rounds": rounds, "decides": decides,
            "best_label": f"benchmark {stop['adopt_on']}" if stop.get("adopt_on") else "benchmark",
            "strategy": d["config"]["mining"]["strategy"], "output_dir": str(state.folder)}


def _plot(rounds: list[dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["round"] for r in rounds]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    ax.plot(xs, [r["benchmark"] for r in rounds], "o-", label="benchmark (decides)")
    ax.plot(xs, [r["proxy"] for r in rounds], "s--", label="proxy (gaps, checkpoint pick)")
    for r in rounds:
        if not r["adopted"]:
            ax.annotate("not adopted", (r["round"], r["benchmark"]), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7)
    ax.set_xlabel("round")
    ax.set_ylabel(rounds[0]["metric"] if rounds else "metric")
    ax.set_xticks(xs)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_xlim(min(xs) - 0.4, max(xs) + 0.4)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * float(v):.1f}%"


def _tables(data: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    rounds = data["rounds"]
    fams = sorted({f for r in rounds for f in r["benchmark_families"]})
    mined_fams = sorted({f for r in rounds for f in (r["mined_families"] or {})})
    return [
        ("Rounds", ["round", "benchmark", "proxy", "adopted", "gaps (unparseable)", "mined", "added", "train records"],
         [[str(r["round"]), _pct(r["benchmark"]), _pct(r["proxy"]), "yes" if r["adopted"] else "no",
           "-" if r["gaps"] is None else f"{r['gaps']} ({r['unparseable']})", str(r["mined"] if r["mined"] is not None else "-"),
           str(r["added"] if r["added"] is not None else "-"), str(r["train_records"] or "-")] for r in rounds]),
        ("Benchmark accuracy per family", ["round", *fams], [[str(r["round"]), *(_pct(r["benchmark_families"].get(f)) for f in fams)] for r in rounds]),
        ("Mined records per family", ["round", *mined_fams],
         [[str(r["round"]), *(str((r["mined_families"] or {}).get(f, 0)) for f in mined_fams)] for r in rounds if r["round"] > 0]),
    ]


def _examples(data: dict[str, Any]) -> list[list[str]]:
    return [[str(r["round"]), e["id"], str(e.get("family")), e["question"], e["answer"], str(e.get("for_gap"))]
            for r in data["rounds"] for e in r["mined_examples"][:3]]


def _md(data: dict[str, Any]) -> str:
    best, stop = data["best"] or {}, data["stop"] or {}
    why = f" ({stop['why']})" if stop.get("why") else ""
    lines = ["# DEFT run", "", f"- status: {data['status']}; stop reason: {stop.get('reason', '-')}{why}",
             f"- best model: round {best.get('round')}, `{best.get('model')}` ({data['best_label']} {_pct(best.get('benchmark'))})",
             f"- mining: {data['strategy']}; a round is adopted on {data['decides']}", ""]
    for title, head, rows in _tables(data):
        lines += [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    lines += ["## Mined examples", "", "| round | id | family | question | answer | for gap |", "|" + " --- |" * 6]
    lines += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in _examples(data)]
    return "\n".join(lines) + "\n"


def _html(data: dict[str, Any]) -> str:
    best, stop = data["best"] or {}, data["stop"] or {}
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>DEFT run</title><style>",
             "body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}</style></head><body>",
             "<h1>DEFT run</h1>",
             f"<p>Status <b>{e(data['status'])}</b>; stop reason <b>{e(str(stop.get('reason', '-')))}</b>"
             + (f" ({e(stop['why'])})" if stop.get("why") else "") + f"; mining {e(data['strategy'])}; "
             f"a round is adopted on {e(data['decides'])}.</p>",
             f"<p>Best model: round {best.get('round')}, <code>{e(str(best.get('model')))}</code> ({data['best_label']} {_pct(best.get('benchmark'))}).</p>"]
    if data["rounds"]:
        parts.append(f"<img alt='benchmark and proxy metric per round' src='data:image/png;base64,{_plot(data['rounds'])}'>")
    for title, head, rows in [*_tables(data), ("Mined examples", ["round", "id", "family", "question", "answer", "for gap"], _examples(data))]:
        parts.append(f"<h2>{e(title)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
        parts.append("</table>")
    parts.append(f"<p>State: <code>{e(data['output_dir'])}/state.json</code>; log: <code>{e(data['output_dir'])}/log.jsonl</code>.</p></body></html>")
    return "\n".join(parts) + "\n"


def write_report(state: Any, out: Path) -> dict[str, Path]:
    data = report_data(state)
    paths = {"json": out / "report.json", "markdown": out / "report.md", "html": out / "report.html"}
    atomic.write_json(paths["json"], data)
    atomic.write_text(paths["markdown"], _md(data))
    atomic.write_text(paths["html"], _html(data))
    return paths
