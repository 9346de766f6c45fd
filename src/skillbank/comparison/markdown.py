"""The comparison document as a markdown table a person pastes into a report (and `skillbank report`
shows beside its pictures): one row per family and one for all paired items, each accuracy with its
95% interval, the paired difference with its two intervals (Newcombe's and the exact one), the
discordant pairs, the p-values and the items 80% power needs; the same table without the items a model
trained on; then what the numbers rest on (methods, items only on one side, training overlap). p-values
are exact in --json; only this text writes a tiny one as <0.0001."""

from __future__ import annotations

from typing import Any

NAMED = 10  # items only on one side named before "..."


def _acc(value: float, interval: list[float]) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _diff(row: dict[str, Any], key: str = "diff_ci95") -> str:
    low, high = row[key]
    return f"{row['diff']:+.3f} [{low:+.3f}, {high:+.3f}]"


def _p(value: float | None) -> str:
    if value is None:
        return "—"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _power(row: dict[str, Any]) -> str:
    n = row.get("n_for_power_0_8")
    return "—" if n is None else f"{n:,}"


HEAD = ("| {group} | n | A accuracy [95% CI] | B accuracy [95% CI] | A − B [Newcombe 95% CI] | A − B [exact 95% CI] | A only | B only "
        "| p | p (Holm) | n for 80% power |")
RULE = "| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"


def _row(name: str, r: dict[str, Any], adjusted: float | None) -> str:
    return (f"| {name} | {r['n']} | {_acc(r['a_accuracy'], r['a_ci95'])} | {_acc(r['b_accuracy'], r['b_ci95'])} | {_diff(r)} | "
            f"{_diff(r, 'diff_ci95_exact')} | {r['a_only']} | {r['b_only']} | {_p(r['p_value'])} | {_p(adjusted)} | {_power(r)} |")


def _table(doc: dict[str, Any], families: dict[str, Any], overall: dict[str, Any]) -> list[str]:
    lines = [HEAD.format(group=doc["group_by"] or "items"), RULE]
    lines += [_row(name, row, row.get("p_adjusted")) for name, row in families.items()]
    return lines + [_row("**all**", overall, None)]


def _disagreements(families: dict[str, Any], overall: dict[str, Any], prefix: str = "") -> list[str]:
    return [f"- {prefix}{name}: {row['disagreement']}" for name, row in [*families.items(), ("all", overall)] if row.get("disagreement")]


def _items(block: dict[str, Any]) -> str:
    items = block["items"][:NAMED]
    shown = ", ".join(f"`{i['video_id']}`" for i in items)
    return shown + (", ..." if block["count"] > NAMED else "")


def _overlap(label: str, block: dict[str, Any]) -> str:
    if not block.get("checked"):
        return f"- {label}: not checked ({block.get('reason')})"
    return (f"- {label}: {block.get('count', 0)} evaluated item(s) share content with its training data `{block.get('training_data')}` "
            f"({block.get('by_video', 0)} by clip bytes, {block.get('by_question_answer', 0)} by question and answer); "
            f"{block.get('paired_items', 0)} of them are paired here")


def to_markdown(doc: dict[str, Any]) -> str:
    """The markdown of a `compare_dirs` document."""
    a, b = doc["a"], doc["b"]
    overall = doc["overall"]
    lines = [
        f"## A vs B on {doc['paired']} paired items",
        "",
        f"- A: `{a['path']}` ({a['items']} items, {a['format']} results, task {a['task_type']!r}, {a['answer_type']} answers)",
        f"- B: `{b['path']}` ({b['items']} items, {b['format']} results, task {b['task_type']!r}, {b['answer_type']} answers)",
        "",
        *_table(doc, doc["families"], overall),
        "",
        f"A only / B only: items one model got right and the other wrong. p: exact McNemar test, two-sided "
        f"(one-sided, A better than B: {_p(overall['p_value_one_sided'])} overall); p (Holm): adjusted across the "
        f"{len(doc['families'])} {doc['group_by'] or 'group'} rows. Accuracy intervals: Wilson. A − B: Newcombe's paired "
        "interval (1998, method 10), and the exact conditional interval (Clopper-Pearson on the discordant pairs), which "
        "excludes 0 exactly when p < 0.05. n for 80% power: paired items a two-sided McNemar test at 0.05 needs to detect "
        "this difference 4 times in 5 (Connor 1987), at the discordant shares seen.",
    ]
    disagree = _disagreements(doc["families"], overall)
    if disagree:
        lines += ["", "Where the intervals disagree:", *disagree]
    clean = doc.get("clean")
    if clean:
        lines.append("")
        if clean.get("n"):
            lines += [f"### Without the {clean['excluded']} paired item(s) either model trained on ({clean['n']} left)", "",
                      *_table(doc, clean.get("families") or {}, clean)]
            disagree = _disagreements(clean.get("families") or {}, clean, "clean ")
            if disagree:
                lines += ["", *disagree]
        else:
            lines.append(f"Every paired item is in a model's training data ({clean['excluded']}): no clean comparison is left.")
    for key, label in (("only_in_a", "Only in A"), ("only_in_b", "Only in B")):
        if doc[key]["count"]:
            lines += ["", f"{label}: {doc[key]['count']} item(s), not compared: {_items(doc[key])}"]
    lines += ["", "Training overlap:", _overlap("A", doc["training_overlap"]["a"]), _overlap("B", doc["training_overlap"]["b"])]
    for warning in doc.get("warnings") or []:
        lines.append(f"\n> warning: {warning}")
    return "\n".join(lines) + "\n"
