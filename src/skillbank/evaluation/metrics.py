"""Metrics of a video-QA evaluation, from ground truths and responses (pure Python, no torch).

Answer normalisation (`normalize_answer`), applied to ground truth and response alike:
  1. None -> ""; anything else -> str
  2. lower case
  3. whitespace runs (spaces, tabs, newlines) -> one space; leading / trailing whitespace dropped
  4. leading / trailing punctuation `. , ! ? ; : ' " `` ` `` *` dropped (repeatedly, with whitespace)
So "Yes." / " YES! " / "**yes**" -> "yes"; "3.5" stays "3.5"; "turn left" stays "turn left".

Task types (the evaluate spec's task.type):
- "" (general): when every normalised ground truth is yes / no, a binary task with "yes" positive.
  A response's label is its normalised text when that is yes / no, else its first word when that
  is yes / no ("Yes, it is red." -> yes); otherwise it is unparseable and scored as wrong: FN when
  the truth is yes, FP when it is no. So TP + FP + TN + FN = total and accuracy is exact.
  Reports tp, fp, tn, fn, accuracy, precision, recall, f1, balanced_accuracy, unparseable.
  Otherwise: exact match of the normalised strings (accuracy, correct, total).
- "its_directionality": labels left / right / straight (parsed as above; anything else is
  "unparseable", a wrong answer). Reports accuracy, per-class precision / recall / f1, macro f1
  (also under "f1"), balanced_accuracy (mean per-class recall) and the confusion matrix
  confusion_matrix[truth][prediction].
A ratio with a zero denominator is 0.0.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillbank.errors import InputError
from skillbank.spec.evaluate import TASK_TYPES

YES, NO = "yes", "no"
DIRECTIONS = ("left", "right", "straight")
UNPARSEABLE = "unparseable"
_PUNCT = ".,!?;:'\"`*"
_STRIP = _PUNCT + " "


def normalize_answer(text: Any) -> str:
    """Normalise an answer for comparison (see the module docstring)."""
    if text is None:
        return ""
    return " ".join(str(text).lower().split()).strip(_STRIP)


def parse_label(response: Any, labels: Sequence[str]) -> str | None:
    """The label a response names: its whole normalised text, else its first word; None if neither."""
    norm = normalize_answer(response)
    if norm in labels:
        return norm
    first = norm.split(" ", 1)[0].strip(_STRIP) if norm else ""
    return first if first in labels else None


def is_yes_no(ground_truths: Iterable[Any]) -> bool:
    """True when there is at least one ground truth and every one is yes / no after normalisation."""
    seen = False
    for gt in ground_truths:
        if normalize_answer(gt) not in (YES, NO):
            return False
        seen = True
    return seen


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(precision: float, recall: float) -> float:
    return _ratio(2 * precision * recall, precision + recall)


def binary_metrics(ground_truths: Sequence[Any], responses: Sequence[Any]) -> dict[str, Any]:
    """Yes/no metrics, "yes" positive; an unparseable response is wrong (FN on yes, FP on no)."""
    tp = fp = tn = fn = unparseable = 0
    for gt, response in zip(ground_truths, responses, strict=True):
        truth = normalize_answer(gt)
        pred = parse_label(response, (YES, NO))
        if pred is None:
            unparseable += 1
            pred = NO if truth == YES else YES
        if truth == YES:
            tp, fn = (tp + 1, fn) if pred == YES else (tp, fn + 1)
        else:
            tn, fp = (tn + 1, fp) if pred == NO else (tn, fp + 1)
    total = tp + fp + tn + fn
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    specificity = _ratio(tn, tn + fp)
    recalls = [r for r, n in ((recall, tp + fn), (specificity, tn + fp)) if n]
    return {
        "evaluator": "yes_no",
        "total": total,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "accuracy": _ratio(tp + tn, total),
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "balanced_accuracy": _ratio(sum(recalls), len(recalls)),
        "unparseable": unparseable,
    }


def exact_match_metrics(ground_truths: Sequence[Any], responses: Sequence[Any]) -> dict[str, Any]:
    correct = sum(normalize_answer(g) == normalize_answer(r) for g, r in zip(ground_truths, responses, strict=True))
    total = len(ground_truths)
    return {"evaluator": "exact_match", "total": total, "correct": correct, "accuracy": _ratio(correct, total)}


def check_ground_truths(ground_truths: Sequence[Any], task_type: str) -> None:
    """Raise InputError before any generation when the answers cannot be scored as `task_type`."""
    if task_type not in TASK_TYPES:
        raise InputError(f"unknown task type {task_type!r}", where="task.type", fix=f"one of {TASK_TYPES}")
    if task_type == "its_directionality":
        for i, gt in enumerate(ground_truths):
            if normalize_answer(gt) not in DIRECTIONS:
                raise InputError(
                    f"its_directionality needs every ground truth in {'/'.join(DIRECTIONS)}; record {i} has {gt!r}",
                    where=f"record {i}",
                    fix='use task.type = "" (general evaluator) for other answers',
                )


def directionality_metrics(ground_truths: Sequence[Any], responses: Sequence[Any]) -> dict[str, Any]:
    """left / right / straight: accuracy, per-class precision / recall / f1, confusion_matrix[truth][pred]."""
    check_ground_truths(ground_truths, "its_directionality")
    confusion: dict[str, Counter[str]] = {label: Counter() for label in DIRECTIONS}
    for gt, response in zip(ground_truths, responses, strict=True):
        confusion[normalize_answer(gt)][parse_label(response, DIRECTIONS) or UNPARSEABLE] += 1
    total = sum(sum(row.values()) for row in confusion.values())
    per_class: dict[str, dict[str, float | int]] = {}
    for label in DIRECTIONS:
        tp = confusion[label][label]
        predicted = sum(confusion[t][label] for t in DIRECTIONS)
        support = sum(confusion[label].values())
        precision, recall = _ratio(tp, predicted), _ratio(tp, support)
        per_class[label] = {"precision": precision, "recall": recall, "f1": _f1(precision, recall), "support": support}
    present = [label for label in DIRECTIONS if per_class[label]["support"]]
    correct = sum(confusion[label][label] for label in DIRECTIONS)
    macro_f1 = _ratio(sum(per_class[c]["f1"] for c in present), len(present))
    return {
        "evaluator": "its_directionality",
        "total": total,
        "correct": correct,
        "accuracy": _ratio(correct, total),
        "f1": macro_f1,
        "macro_f1": macro_f1,
        "balanced_accuracy": _ratio(sum(per_class[c]["recall"] for c in present), len(present)),
        "per_class": per_class,
        "confusion_matrix": {t: {p: confusion[t][p] for p in (*DIRECTIONS, UNPARSEABLE)} for t in DIRECTIONS},
        "unparseable": sum(confusion[t][UNPARSEABLE] for t in DIRECTIONS),
    }


def compute_metrics(ground_truths: Sequence[Any], responses: Sequence[Any], task_type: str = "") -> dict[str, Any]:
    """Metrics of one task type over aligned ground truths and responses."""
    if len(ground_truths) != len(responses):
        raise ValueError(f"{len(ground_truths)} ground truths but {len(responses)} responses")
    check_ground_truths(ground_truths, task_type)
    if task_type == "its_directionality":
        return directionality_metrics(ground_truths, responses)
    if is_yes_no(ground_truths):
        return binary_metrics(ground_truths, responses)
    return exact_match_metrics(ground_truths, responses)


def evaluation_report(rows: Sequence[Mapping[str, Any]], task_type: str = "", families: Sequence[str | None] | None = None) -> dict[str, Any]:
    """Overall metrics of results rows ({gt, response}), plus a "families" map when any row has one."""
    report = compute_metrics([r.get("gt") for r in rows], [r.get("response") for r in rows], task_type)
    if families is not None and any(f is not None for f in families):
        groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for row, family in zip(rows, families, strict=True):
            groups[str(family) if family is not None else "(none)"].append(row)
        report["families"] = {
            name: compute_metrics([r.get("gt") for r in group], [r.get("response") for r in group], task_type)
            for name, group in sorted(groups.items())
        }
    return report


def metric_value(metrics: Mapping[str, Any], name: str) -> tuple[str, float]:
    """(name, value) of the metric that ranks checkpoints; accuracy when `name` is not reported."""
    value = metrics.get(name)
    if isinstance(value, (int, float)):
        return name, float(value)
    return "accuracy", float(metrics.get("accuracy", 0.0))
