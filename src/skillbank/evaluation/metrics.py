"""Metrics of a video-QA evaluation, from the answer rules' counts (skillbank.scoring.answers scores
every row; this module only does the arithmetic, so evaluate, `skillbank score` and `skillbank gaps`
report the same numbers).

Every row has a kind (answers.py): "yes_no", "exact_match", "its_directionality" or "mcq". An
unparseable answer (not extractable, empty, or naming no label of the task) is counted in
`unparseable` and as wrong: a yes/no FN when the truth is yes, FP when it is no; the "unparseable"
column of a confusion matrix otherwise. So TP + FP + TN + FN = total and accuracy = correct / total.

Metrics of a set of rows of one kind:
- yes_no ("yes" positive): tp, fp, tn, fn, accuracy, precision, recall, f1, balanced_accuracy
  (mean recall of the classes present), correct, total, unparseable.
- exact_match: accuracy, correct, total, unparseable.
- its_directionality / mcq: accuracy, per_class precision / recall / f1 / support, macro f1 (also
  under "f1"), balanced_accuracy (mean per-class recall of the classes present) and
  confusion_matrix[truth][prediction] (predictions include "unparseable"); labels left / right /
  straight, or the option letters seen.
A set of rows of several kinds (a mixed set, e.g. the demo's families): evaluator "mixed" with
accuracy, correct, total, unparseable and "kinds" (rows per kind). A ratio with a zero denominator is 0.0.

A report holds the metrics of all rows at the top level, plus "families" / "datasets" maps (metrics
per `family` / `dataset` value; "(none)" for rows without one) when rows carry those fields, "ci95"
(95% Wilson score intervals [low, high] of accuracy and, for yes/no, precision and recall; at the top
and in every family / dataset block), "small_samples" (the set, families and classes with fewer than
MIN_CLASS_SAMPLES samples, with the n their accuracy would need for a lower bound of 0.9) and
"warnings" (one line per small_samples entry: its numbers are not yet telling). The statistics
themselves live in skillbank.scoring.stats.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillbank.errors import InputError
from skillbank.scoring import answers
from skillbank.scoring.answers import DIRECTIONS, NO, TASK_TYPES, UNPARSEABLE, YES
from skillbank.scoring.stats import n_for_lower_bound, wilson

MIN_CLASS_SAMPLES = 30  # fewer samples in a set, family or class than this is a warning in the report
LOWER_BOUND_TARGET = 0.9  # small-sample warnings say the n at which the observed accuracy would have this lower bound
NONE_KEY = "(none)"  # families / datasets key of rows without the field
_MAPS = {"family": "families", "dataset": "datasets"}


@dataclass(frozen=True)
class Tally:
    """n rows of one kind with the same truth and prediction (pred None: unparseable)."""

    dataset: str | None
    family: str | None
    kind: str
    truth: str | None
    pred: str | None
    correct: bool
    n: int


def tallies(counts: Iterable[answers.Count], task_type: str) -> list[Tally]:
    """The answer rules' counts (answers.counts_sql rows) resolved to kinds: in task "" a group whose
    every ground truth is yes / no is scored by its yes/no label, any other by exact match."""
    counts = list(counts)
    yes_no = answers.yes_no_groups(counts) if task_type == "" else set()
    out = []
    for dataset, family, _truth_yes_no, truth, label, text_correct, text_missing, n in counts:
        if task_type == "" and (dataset, family) not in yes_no:
            out.append(Tally(dataset, family, "exact_match", None, None if text_missing else "text", bool(text_correct), n))
        else:
            kind = task_type or "yes_no"
            out.append(Tally(dataset, family, kind, truth, label, label is not None and label == truth, n))
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(precision: float, recall: float) -> float:
    return _ratio(2 * precision * recall, precision + recall)


def binary_metrics(rows: Sequence[Tally]) -> dict[str, Any]:
    """Yes/no metrics, "yes" positive; an unparseable answer is wrong (FN on yes, FP on no)."""
    tp = sum(t.n for t in rows if t.truth == YES and t.pred == YES)
    fn = sum(t.n for t in rows if t.truth == YES and t.pred != YES)
    tn = sum(t.n for t in rows if t.truth == NO and t.pred == NO)
    fp = sum(t.n for t in rows if t.truth == NO and t.pred != NO)
    total = tp + fp + tn + fn
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    recalls = [r for r, n in ((recall, tp + fn), (_ratio(tn, tn + fp), tn + fp)) if n]
    return {
        "evaluator": "yes_no",
        "total": total,
        "correct": tp + tn,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "accuracy": _ratio(tp + tn, total),
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "balanced_accuracy": _ratio(sum(recalls), len(recalls)),
        "unparseable": sum(t.n for t in rows if t.pred is None),
    }


def exact_match_metrics(rows: Sequence[Tally]) -> dict[str, Any]:
    total, correct = sum(t.n for t in rows), sum(t.n for t in rows if t.correct)
    return {"evaluator": "exact_match", "total": total, "correct": correct, "accuracy": _ratio(correct, total),
            "unparseable": sum(t.n for t in rows if t.pred is None)}


def multiclass_metrics(rows: Sequence[Tally], kind: str) -> dict[str, Any]:
    """Accuracy, per-class precision / recall / f1, macro f1, confusion_matrix[truth][pred] (directions, mcq)."""
    labels = list(DIRECTIONS) if kind == "its_directionality" else sorted({t.truth for t in rows} | {t.pred for t in rows if t.pred})
    confusion: dict[str, Counter[str]] = {label: Counter() for label in labels}
    for t in rows:
        confusion[t.truth or UNPARSEABLE][t.pred or UNPARSEABLE] += t.n
    total = sum(t.n for t in rows)
    per_class: dict[str, dict[str, float | int]] = {}
    for label in labels:
        tp = confusion[label][label]
        predicted = sum(confusion[t][label] for t in labels)
        support = sum(confusion[label].values())
        precision, recall = _ratio(tp, predicted), _ratio(tp, support)
        per_class[label] = {"precision": precision, "recall": recall, "f1": _f1(precision, recall), "support": support}
    present = [label for label in labels if per_class[label]["support"]]
    correct = sum(confusion[label][label] for label in labels)
    macro_f1 = _ratio(sum(per_class[c]["f1"] for c in present), len(present))
    return {
        "evaluator": kind,
        "total": total,
        "correct": correct,
        "accuracy": _ratio(correct, total),
        "f1": macro_f1,
        "macro_f1": macro_f1,
        "balanced_accuracy": _ratio(sum(per_class[c]["recall"] for c in present), len(present)),
        "per_class": per_class,
        "confusion_matrix": {t: {p: confusion[t][p] for p in (*labels, UNPARSEABLE)} for t in labels},
        "unparseable": sum(t.n for t in rows if t.pred is None),
    }


def _interval(k: int, n: int) -> list[float]:
    return [round(x, 6) for x in wilson(k, n)]


def accuracy_interval(correct: int, total: int) -> list[float]:
    """The rounded 95% Wilson interval [low, high] of an accuracy (gaps' summary states its families with it)."""
    return _interval(int(correct), int(total))


def intervals(m: Mapping[str, Any]) -> dict[str, list[float]]:
    """ci95 of one metrics block: accuracy, and for yes/no precision (tp of tp+fp) and recall (tp of tp+fn)."""
    out = {"accuracy": _interval(int(m.get("correct", 0)), int(m.get("total", 0)))}
    if m.get("evaluator") == "yes_no":
        out["precision"] = _interval(m["tp"], m["tp"] + m["fp"])
        out["recall"] = _interval(m["tp"], m["tp"] + m["fn"])
    return out


def class_counts(m: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """(right, samples) per class of one metrics block: yes / no, or each label of directions / mcq
    (right = the class's recall numerator); {} for exact match and mixed blocks."""
    if m.get("evaluator") == "yes_no":
        return {YES: (m["tp"], m["tp"] + m["fn"]), NO: (m["tn"], m["tn"] + m["fp"])}
    if "per_class" in m:
        matrix = m.get("confusion_matrix") or {}
        return {label: (int(matrix.get(label, {}).get(label, 0)), int(c["support"]))
                for label, c in m["per_class"].items() if c["support"]}
    return {}


def _small(scope: str, name: str | None, cls: str | None, right: int, n: int) -> dict[str, Any]:
    accuracy = right / n if n else 0.0
    return {"scope": scope, "name": name, "class": cls, "n": n, "accuracy": round(accuracy, 6), "ci95": _interval(right, n),
            "n_for_lower_bound_0_9": n_for_lower_bound(accuracy, LOWER_BOUND_TARGET)}


def small_samples(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every group with fewer than MIN_CLASS_SAMPLES samples: the whole set, each family (or, without
    families, each dataset), and each class of a family (of the set when it has no families) that
    has enough samples itself. Each entry: scope (set / family / dataset / class), name, class, n,
    accuracy, ci95, n_for_lower_bound_0_9 (the smallest n at which this accuracy would have a Wilson
    lower bound of 0.9; None when the accuracy is 0.9 or less: no n makes it evidence of 0.9)."""
    out: list[dict[str, Any]] = []
    if not report.get("total"):
        return out
    groups_key = "families" if report.get("families") else "datasets" if report.get("datasets") else None
    scope = {"families": "family", "datasets": "dataset"}.get(groups_key or "", "set")
    blocks = list((report.get(groups_key) or {}).items()) if groups_key else [(None, report)]
    if groups_key and report["total"] < MIN_CLASS_SAMPLES:
        out.append(_small("set", None, None, int(report.get("correct", 0)), int(report["total"])))
    for name, m in blocks:
        total = int(m.get("total", 0))
        if total and total < MIN_CLASS_SAMPLES:
            out.append(_small(scope, name, None, int(m.get("correct", 0)), total))
        elif total:
            out += [_small("class", name, cls, right, n) for cls, (right, n) in class_counts(m).items() if n < MIN_CLASS_SAMPLES]
    return out


def _needs(entry: Mapping[str, Any]) -> str:
    needed = entry["n_for_lower_bound_0_9"]
    if needed is None:
        return f"no sample size gives a 95% lower bound of {LOWER_BOUND_TARGET} at accuracy {entry['accuracy']:.3f}"
    return f"a 95% lower bound of {LOWER_BOUND_TARGET} at this accuracy needs n >= {needed}"


def _what(entry: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """How a warning names a small_samples entry ("family yes_no (yes 2, no 1)", "family x class no")."""
    scope, name = entry["scope"], entry["name"]
    if scope == "class":
        return f"family {name} class {entry['class']}" if name is not None else f"class {entry['class']}"
    if scope == "set":
        grouped = bool(report.get("families") or report.get("datasets"))
        what, classes = "the whole set", {} if grouped else class_counts(report)
    else:
        what, classes = f"{scope} {name}", class_counts((report.get(_MAPS[scope]) or {}).get(name) or {})
    return what + (" (" + ", ".join(f"{c} {n}" for c, (_, n) in classes.items()) + ")" if classes else "")


def sample_warnings(entries: Sequence[Mapping[str, Any]], report: Mapping[str, Any]) -> list[str]:
    """One warning per small_samples entry: what it is, its n, accuracy (a class: recall), interval, the n it needs."""
    lines = []
    for e in entries:
        low, high = e["ci95"]
        measured = "recall" if e["scope"] == "class" else "accuracy"
        lines.append(f"{_what(e, report)}: {e['n']} samples, fewer than {MIN_CLASS_SAMPLES}: {measured} {e['accuracy']:.3f}, "
                     f"95% CI [{low:.3f}, {high:.3f}]; {_needs(e)}")
    return lines


def _yes_no_counts(m: Mapping[str, Any]) -> str:
    """"; TP 50 FP 4 TN 50 FN 1; precision 0.9259 [0.8246, 0.9708], recall ..." of a yes/no block ("" otherwise)."""
    if m.get("evaluator") != "yes_no":
        return ""
    ci = m.get("ci95") or intervals(m)
    return (f"; TP {m['tp']} FP {m['fp']} TN {m['tn']} FN {m['fn']}; precision {m['precision']:.4f} [{ci['precision'][0]:.4f}, "
            f"{ci['precision'][1]:.4f}], recall {m['recall']:.4f} [{ci['recall'][0]:.4f}, {ci['recall'][1]:.4f}]")


def family_lines(report: Mapping[str, Any]) -> list[str]:
    """"family NAME: accuracy A [low, high] (correct/total[, U unparseable])" per family (else per
    dataset), a yes/no one with its counts and precision / recall intervals: what evaluate's and score's
    summaries print under their one-line result."""
    key = "families" if report.get("families") else "datasets"
    lines = []
    for name, m in (report.get(key) or {}).items():
        low, high = (m.get("ci95") or intervals(m))["accuracy"]
        extra = f", {m['unparseable']} unparseable" if m.get("unparseable") else ""
        lines.append(f"{key[:-1] if key == 'datasets' else 'family'} {name}: accuracy {m.get('accuracy', 0.0):.4f} "
                     f"[{low:.4f}, {high:.4f}] ({m.get('correct', 0)}/{m.get('total', 0)}{extra}){_yes_no_counts(m)}")
    return lines


def metrics_of(rows: Sequence[Tally]) -> dict[str, Any]:
    """Metrics of a set of rows: its kind's when it has one, else the "mixed" summary."""
    kinds = Counter()
    for t in rows:
        kinds[t.kind] += t.n
    if len(kinds) == 1:
        (kind,) = kinds
        if kind == "yes_no":
            return binary_metrics(rows)
        if kind == "exact_match":
            return exact_match_metrics(rows)
        return multiclass_metrics(rows, kind)
    total, correct = sum(kinds.values()), sum(t.n for t in rows if t.correct)
    return {"evaluator": "mixed" if kinds else "exact_match", "total": total, "correct": correct, "accuracy": _ratio(correct, total),
            "unparseable": sum(t.n for t in rows if t.pred is None), **({"kinds": dict(sorted(kinds.items()))} if kinds else {})}


def report_of(rows: Sequence[Tally], answer_type: str) -> dict[str, Any]:
    """All rows' metrics, plus "families" / "datasets" maps when any row carries that field."""
    report = {**metrics_of(rows), "answer_type": answer_type}
    report["ci95"] = intervals(report)
    for field in ("family", "dataset"):
        if any(getattr(t, field) is not None for t in rows):
            groups: dict[str, list[Tally]] = defaultdict(list)
            for t in rows:
                value = getattr(t, field)
                groups[NONE_KEY if value is None else value].append(t)
            report[_MAPS[field]] = {k: _with_interval(metrics_of(g)) for k, g in sorted(groups.items())}
    report["small_samples"] = small_samples(report)
    report["warnings"] = sample_warnings(report["small_samples"], report)
    return report


def _with_interval(m: dict[str, Any]) -> dict[str, Any]:
    m["ci95"] = intervals(m)
    return m


# ---- checks and entry points --------------------------------------------------------------------

_LABEL_RULE = {
    "its_directionality": f"its_directionality needs every ground truth in {'/'.join(DIRECTIONS)}",
    "mcq": "mcq needs every ground truth to name an option of its question (a letter or the option's text; "
           "options written A) ..., (A) ... or A. ..., from A in order)",
}
_LABEL_FIX = {
    "its_directionality": 'use task.type = "" (general evaluator) for other answers',
    "mcq": 'list the options in each question ("A) red  B) blue"), or use task.type = "" for open answers',
}


def check_task_type(task_type: str) -> None:
    if task_type not in TASK_TYPES:
        raise InputError(f"unknown task type {task_type!r}", where="task.type", fix=f"one of {TASK_TYPES}")


def raise_bad_truths(bad: Sequence[tuple[int, Any]], task_type: str, where: str = "") -> None:
    """InputError naming the first record whose ground truth names no label of the task."""
    if bad:
        idx, gt = bad[0]
        raise InputError(f"{_LABEL_RULE[task_type]}; record {idx} has {gt!r}", where=f"{where} record {idx}".strip(),
                         fix=_LABEL_FIX[task_type])


def check_ground_truths(ground_truths: Sequence[Any], task_type: str, questions: Sequence[Any] | None = None) -> None:
    """Raise InputError before any generation when the answers cannot be scored as `task_type`."""
    check_task_type(task_type)
    if task_type == "" or not ground_truths:
        return
    questions = questions if questions is not None else [""] * len(ground_truths)
    rows = [{"question": q, "gt": g} for q, g in zip(questions, ground_truths, strict=True)]
    scored = answers.score_rows(rows, task_type)
    raise_bad_truths([(i, g) for i, (s, g) in enumerate(zip(scored, ground_truths)) if s.truth is None], task_type)


def score_results(rows: Sequence[Mapping[str, Any]], task_type: str = "", answer_type: str = "short") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score results rows ({question, gt, response} [+ family, dataset]): the rows with `answer` and
    `correct` added (answer None when unparseable), and the report."""
    check_task_type(task_type)
    if not rows:
        return [], report_of([], answer_type)
    scored, source = answers.score_rows_with_counts([dict(r) for r in rows], task_type, answer_type)
    raise_bad_truths(source.bad_truths, task_type)
    out = [{**row, "answer": s.answer, "correct": s.correct} for row, s in zip(rows, scored, strict=True)]
    return out, report_of(tallies(source.counts, task_type), answer_type)


def evaluation_report(rows: Sequence[Mapping[str, Any]], task_type: str = "", answer_type: str = "short") -> dict[str, Any]:
    """The report of results rows (see score_results)."""
    return score_results(rows, task_type, answer_type)[1]


def compute_metrics(ground_truths: Sequence[Any], responses: Sequence[Any], task_type: str = "", answer_type: str = "short",
                    questions: Sequence[Any] | None = None) -> dict[str, Any]:
    """Metrics of one task type over aligned ground truths and responses (and questions, for mcq)."""
    if len(ground_truths) != len(responses):
        raise ValueError(f"{len(ground_truths)} ground truths but {len(responses)} responses")
    questions = questions if questions is not None else [""] * len(ground_truths)
    rows = [{"question": q, "gt": g, "response": r} for q, g, r in zip(questions, ground_truths, responses, strict=True)]
    return evaluation_report(rows, task_type, answer_type)


def summary_line(m: Mapping[str, Any], name: str, value: float) -> str:
    """The one-line result: the primary metric on N samples, how many answers could not be read (and, when
    most could not, metrics.json's diagnosis in a few words) and, for yes/no, TP / FP / TN / FN with
    precision and recall and their 95% intervals ("accuracy 0.5000 on 4 samples, 1 unparseable; TP 1 FP 1
    TN 1 FN 1; precision 0.5000 [0.0945, 0.9055], recall 0.5000 [0.0945, 0.9055]")."""
    line = f"{name} {value:.4f} on {m.get('total', 0)} samples"
    if m.get("unparseable"):
        line += f", {m['unparseable']} unparseable"
        diagnosis = m.get("diagnosis")
        if isinstance(diagnosis, Mapping) and diagnosis.get("summary"):
            line += f" (diagnosis: {diagnosis['summary']}; metrics.json diagnosis)"
    return line + _yes_no_counts(m)


def metric_value(metrics: Mapping[str, Any], name: str) -> tuple[str, float]:
    """(name, value) of the metric that ranks checkpoints; accuracy when `name` is not reported."""
    value = metrics.get(name)
    if isinstance(value, (int, float)):
        return name, float(value)
    return "accuracy", float(metrics.get("accuracy", 0.0))
