"""Metrics: answer normalisation, the yes/no evaluator, exact match, its_directionality, families."""

from __future__ import annotations

import pytest

from skillbank.errors import InputError
from skillbank.evaluation.metrics import (
    binary_metrics,
    compute_metrics,
    evaluation_report,
    is_yes_no,
    metric_value,
    normalize_answer,
    parse_label,
)


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("Yes.", "yes"),
        ("  YES!  ", "yes"),
        ("no", "no"),
        ("No,", "no"),
        ("**yes**", "yes"),
        ('"left"', "left"),
        ("Turn\n  Left", "turn left"),
        ("3.5", "3.5"),
        ("3.", "3"),
        (None, ""),
        (7, "7"),
        ("", ""),
    ],
)
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_parse_label_takes_the_whole_answer_or_its_first_word():
    assert parse_label("Yes, the ball is red.", ("yes", "no")) == "yes"
    assert parse_label("NO.", ("yes", "no")) == "no"
    assert parse_label("maybe", ("yes", "no")) is None
    assert parse_label("yesterday", ("yes", "no")) is None
    assert parse_label(None, ("yes", "no")) is None


def test_yes_no_detection():
    assert is_yes_no(["Yes", "no."])
    assert not is_yes_no(["yes", "red"])
    assert not is_yes_no([])


def test_binary_confusion_and_ratios():
    gts = ["yes", "yes", "yes", "no", "no", "no"]
    rs = ["Yes.", "no", "???", "no", "yes", "No"]
    m = binary_metrics(gts, rs)
    # yes: TP, FN, FN (unparseable) ; no: TN, FP, TN
    assert (m["tp"], m["fn"], m["tn"], m["fp"]) == (1, 2, 2, 1)
    assert m["total"] == 6 and m["unparseable"] == 1
    assert m["accuracy"] == pytest.approx(3 / 6)
    assert m["precision"] == pytest.approx(1 / 2)
    assert m["recall"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert m["balanced_accuracy"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_binary_zero_denominators_are_zero():
    m = binary_metrics(["no", "no"], ["no", "no"])
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["f1"] == 0.0
    assert m["accuracy"] == 1.0 and m["balanced_accuracy"] == 1.0  # only the class present counts


def test_general_evaluator_picks_yes_no_or_exact_match():
    assert compute_metrics(["yes", "No"], ["yes", "no"])["evaluator"] == "yes_no"
    m = compute_metrics(["red", "Blue", "green"], ["Red.", "blue", "yellow"])
    assert m["evaluator"] == "exact_match"
    assert (m["correct"], m["total"]) == (2, 3)
    assert m["accuracy"] == pytest.approx(2 / 3)


def test_directionality_per_class_and_confusion():
    gts = ["left", "left", "right", "right", "straight", "straight"]
    rs = ["Left.", "right", "right", "Right, clearly", "straight", "up"]
    m = compute_metrics(gts, rs, "its_directionality")
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["confusion_matrix"]["left"] == {"left": 1, "right": 1, "straight": 0, "unparseable": 0}
    assert m["confusion_matrix"]["straight"]["unparseable"] == 1
    assert m["per_class"]["right"]["precision"] == pytest.approx(2 / 3)
    assert m["per_class"]["right"]["recall"] == 1.0
    assert m["per_class"]["left"]["f1"] == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert m["f1"] == m["macro_f1"]
    assert m["unparseable"] == 1


def test_directionality_rejects_other_ground_truths():
    with pytest.raises(InputError, match="record 1"):
        compute_metrics(["left", "up"], ["left", "up"], "its_directionality")


def test_report_adds_families_and_metric_value_falls_back():
    rows = [
        {"gt": "yes", "response": "yes"},
        {"gt": "no", "response": "yes"},
        {"gt": "red", "response": "red"},
    ]
    report = evaluation_report(rows, "", ["yes_no", "yes_no", "colour"])
    assert report["evaluator"] == "exact_match"
    assert report["families"]["yes_no"]["evaluator"] == "yes_no"
    assert report["families"]["yes_no"]["fp"] == 1
    assert report["families"]["colour"]["accuracy"] == 1.0
    assert "families" not in evaluation_report(rows, "", [None, None, None])
    assert metric_value(report, "f1") == ("accuracy", pytest.approx(2 / 3))
    assert metric_value(report["families"]["yes_no"], "f1")[0] == "f1"
