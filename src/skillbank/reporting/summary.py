"""The report's summary, at the top of the page: what improved and whether it is significant (from
`skillbank compare`'s documents the comparison section already holds), what the run did (steps and
epochs run, not the caps), and the caveats a reader must weigh before trusting the figures: evaluated
items that overlap the training data, groups too small to tell, an evaluated set that is the run's own
validation split, answers a run could mostly not read. Each line reads what the inputs hold; none
computes a statistic.
"""

from __future__ import annotations

import os
from typing import Any

from skillbank.reporting.inputs import EvalInputs, RunInputs, progress
from skillbank.reporting.sections import ALL, Bullets, Section, family_values, pct

ALPHA = 0.05


def _p(value: float) -> str:
    return "p < 0.0001" if value < 1e-4 else f"p = {value:.4f}"


def _points(diff: float) -> str:
    return f"{100 * diff:+.1f} points"


def _verdict(row: dict[str, Any], p: float) -> str:
    if p >= ALPHA:
        return "not significant at 0.05"
    return "significantly better" if row["diff"] > 0 else "significantly worse"


def comparison_lines(a: str, b: str, doc: dict[str, Any]) -> list[str]:
    """What improved, overall and per family, with the exact McNemar test (families: Holm-adjusted p)."""
    o = doc["overall"]
    low, high = o["diff_ci95_exact"]
    head = f"**{a} vs {b}** on {o['n']} paired items: accuracy {pct(o['a_accuracy'])} vs {pct(o['b_accuracy'])}"
    if not o["a_only"] and not o["b_only"]:
        line = head + ": the two models are right and wrong on the same items (no discordant pair): no difference to test."
    else:
        line = (head + f", {_points(o['diff'])} (exact 95% interval {100 * low:+.1f} to {100 * high:+.1f}), exact McNemar "
                f"{_p(o['p_value'])}: {_verdict(o, o['p_value'])}.")
    if o["p_value"] >= ALPHA and o.get("n_for_power_0_8"):
        line += f" Detecting a difference this size 4 times in 5 needs about {o['n_for_power_0_8']:,} paired items (Connor 1987)."
    lines = [line]
    if doc["families"]:
        groups: dict[str, list[str]] = {"significantly better": [], "significantly worse": [], "not significant at 0.05": []}
        for name, row in doc["families"].items():
            groups[_verdict(row, row["p_adjusted"])].append(f"{name} {_points(row['diff'])} ({_p(row['p_adjusted'])})")
        said = [f"{what}: {', '.join(items)}" for what, items in groups.items() if items]
        lines.append(f"Per {doc['group_by']} (Holm-adjusted): " + "; ".join(said) + ".")
    if o.get("disagreement"):
        lines.append(f"Newcombe's interval and the exact test disagree overall: {o['disagreement']}")
    return lines


def accuracy_lines(ev: EvalInputs) -> list[str]:
    """One evaluation on its own: accuracy with its interval, per family."""
    values, _ = family_values(ev.metrics)
    acc, low, high, n, k = values[ALL]
    families = [f"{f} {pct(v[0])} ({v[4]}/{v[3]})" for f, v in values.items() if f != ALL]
    return [f"**{ev.label}**: accuracy {pct(acc)} [{pct(low)}, {pct(high)}] ({k}/{n})" + (f"; {', '.join(families)}." if families else ".")]


def training_line(run: RunInputs) -> str:
    ran = progress(run)
    line = f"Training: {ran.line()}"
    losses = [r["loss"] for r in run.rows if isinstance(r.get("loss"), (int, float))]
    vals = [r["val_loss"] for r in run.rows if isinstance(r.get("val_loss"), (int, float))]
    if losses:
        line += f"; training loss {losses[0]:.4g} -> {losses[-1]:.4g}"
    if vals:
        line += f"; validation loss {vals[0]:.4g} -> {vals[-1]:.4g} ({len(vals)} measurement(s))"
    return line + "."


def _same_file(a: Any, b: Any) -> bool:
    if not a or not b:
        return False
    real = [os.path.realpath(os.path.expanduser(str(p))) for p in (a, b)]
    return real[0] == real[1]


def val_split(run: RunInputs | None, ev: EvalInputs) -> str | None:
    """The caveat when the evaluated annotation file is the run's validation set (custom.val_dataset)."""
    if run is None or not run.spec:
        return None
    val = ((run.spec.get("custom") or {}).get("val_dataset") or {}).get("annotation_path")
    if not _same_file(val, ev.metrics.get("annotation_path")):
        return None
    return (f"{ev.label} evaluated `{ev.metrics.get('annotation_path')}`, the run's own validation split (custom.val_dataset of its spec): "
            "the run measured its validation loss there and `evaluate --run` picks its best step there, so it is not an "
            "independent test set; evaluate held-out data for a final figure.")


def overlap_caveat(ev: EvalInputs) -> str | None:
    block = ev.metrics.get("training_overlap")
    if not isinstance(block, dict):
        return f"{ev.label}: training overlap not recorded (an evaluation older than the check): `skillbank compare` computes it."
    if block.get("checked") is False:
        return f"{ev.label}: training overlap not checked ({block.get('reason') or 'no reason recorded'})." if block.get("training_data") else None
    count = int(block.get("count") or 0)
    if not count:
        return None
    left = " (left out of its scores)" if block.get("excluded") else ""
    return (f"{ev.label}: {count} evaluated item(s) share content with the training data{left}: on them accuracy measures memory; "
            "the comparison's clean table leaves them out.")


def small_caveat(ev: EvalInputs) -> str | None:
    small = ev.metrics.get("small_samples") or []
    if not small:
        return None
    names = []
    for e in small:
        what = {"set": "the whole set", "class": f"{e.get('name') + ' ' if e.get('name') else ''}class {e.get('class')}"}.get(
            e.get("scope"), f"{e.get('scope')} {e.get('name')}")
        names.append(f"{what} ({e.get('n')})")
    return (f"{ev.label}: {len(small)} group(s) under 30 samples, whose accuracy a few answers move a lot: {', '.join(names)} "
            "(their intervals are in the accuracy table).")


def diagnosis_caveat(ev: EvalInputs) -> str | None:
    diagnosis = ev.metrics.get("diagnosis")
    if isinstance(diagnosis, dict) and diagnosis.get("message"):
        return f"{ev.label}: {diagnosis['message']}"
    return None


def caveats(run: RunInputs | None, evals: list[EvalInputs], base: EvalInputs | None) -> list[str]:
    out = []
    for ev in evals:
        out += [c for c in (val_split(run, ev), overlap_caveat(ev), small_caveat(ev), diagnosis_caveat(ev)) if c]
    if base is not None:  # the model before training: only what would bias the comparison
        block = base.metrics.get("training_overlap")
        if isinstance(block, dict) and block.get("count"):
            out.append(overlap_caveat(base) or "")
        out += [c for c in (small_caveat(base), diagnosis_caveat(base)) if c]
    return [c for c in out if c]


def summary(run: RunInputs | None, evals: list[EvalInputs], base: EvalInputs | None,
            documents: list[tuple[str, str, dict[str, Any]]]) -> Section:
    """The summary section: findings, then caveats (or what was checked and found clean)."""
    s = Section("summary", "Summary", "any of --run, --eval, --base")
    found: list[str] = []
    for a, b, doc in documents:
        found += comparison_lines(a, b, doc)
    if not documents:
        found += [line for ev in evals for line in accuracy_lines(ev)]
        if evals:
            found.append("No --base (the model before training) and no second --eval: no paired test of an improvement.")
    if run is not None and run.rows:
        found.append(training_line(run))
    s.parts.append(Bullets(found))
    warned = caveats(run, evals, base)
    s.facts = {"findings": found, "caveats": warned}
    if warned:
        s.parts += [f"Caveats ({len(warned)}):", Bullets(warned)]
    elif evals:
        s.parts.append("Caveats: none found (training overlap, groups under 30 samples, the run's validation split and unreadable "
                       "answers were checked).")
    return s
