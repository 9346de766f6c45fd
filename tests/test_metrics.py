"""Metrics: the yes/no evaluator, exact match, its_directionality, mcq, mixed sets, families and datasets."""

from __future__ import annotations

import pytest

from skillbank.errors import InputError
from skillbank.evaluation.metrics import check_ground_truths, compute_metrics, evaluation_report, metric_value, score_results


def test_binary_confusion_and_ratios():
    gts = ["yes", "yes", "yes", "no", "no", "no"]
    rs = ["Yes.", "no", "???", "no", "yes", "No"]
    m = compute_metrics(gts, rs)
    # yes: TP, FN, FN (unparseable) ; no: TN, FP, TN
    assert m["evaluator"] == "yes_no"
    assert (m["tp"], m["fn"], m["tn"], m["fp"]) == (1, 2, 2, 1)
    assert m["total"] == 6 and m["unparseable"] == 1 and m["correct"] == 3
    assert m["accuracy"] == pytest.approx(3 / 6)
    assert m["precision"] == pytest.approx(1 / 2)
    assert m["recall"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert m["balanced_accuracy"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_yes_no_answers_naming_both_are_unparseable_and_wrong():
    """Issue 14 item 3: "yes or no" was read as yes (its first word); now it is unparseable and wrong."""
    m = compute_metrics(["yes", "no", "yes"], ["Yes, there is a collision.", "yes or no", "no, yes"])
    assert (m["tp"], m["fp"], m["fn"], m["unparseable"]) == (1, 1, 1, 2)


def test_binary_zero_denominators_are_zero():
    m = compute_metrics(["no", "no"], ["no", "no"])
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["f1"] == 0.0
    assert m["accuracy"] == 1.0 and m["balanced_accuracy"] == 1.0  # only the class present counts


def test_general_evaluator_picks_yes_no_or_exact_match():
    assert compute_metrics(["yes", "No"], ["yes", "no"])["evaluator"] == "yes_no"
    m = compute_metrics(["red", "Blue", "green"], ["Red.", "blue", ""])
    assert m["evaluator"] == "exact_match"
    assert (m["correct"], m["total"], m["unparseable"]) == (2, 3, 1)
    assert m["accuracy"] == pytest.approx(2 / 3)


def test_reasoning_answers_are_extracted_before_scoring():
    gts = ["yes", "no", "yes"]
    rs = ["<think>\nred, so\n</think>\n\n<answer>\nYes\n</answer>", "<think>hm</think>\n\nNo.", "<think>out of tokens"]
    m = compute_metrics(gts, rs, answer_type="reasoning")
    assert (m["tp"], m["tn"], m["fn"], m["unparseable"]) == (1, 1, 1, 1)
    assert compute_metrics(gts, rs, answer_type="short")["unparseable"] == 3  # the whole response is no yes/no answer


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


def test_mcq_accuracy_confusion_and_unparseable():
    q = "Which cup?\nA) red\nB) blue\nC) green"
    gts = ["A", "B", "blue", "C", "C"]
    rs = ["(A)", "Answer: B", "The answer is C", "green", "I cannot tell"]
    m = compute_metrics(gts, rs, "mcq", questions=[q] * 5)
    assert m["evaluator"] == "mcq"
    assert (m["correct"], m["total"], m["unparseable"]) == (3, 5, 1)
    assert m["confusion_matrix"]["B"] == {"A": 0, "B": 1, "C": 1, "unparseable": 0}
    assert m["confusion_matrix"]["C"] == {"A": 0, "B": 0, "C": 1, "unparseable": 1}
    assert m["per_class"]["C"]["precision"] == pytest.approx(1 / 2)


def test_ground_truth_checks_name_the_record():
    with pytest.raises(InputError, match="record 1"):
        compute_metrics(["left", "up"], ["left", "up"], "its_directionality")
    with pytest.raises(InputError, match="record 1") as err:
        check_ground_truths(["A", "purple"], "mcq", ["Pick: A) red B) blue", "Pick: A) red B) blue"])
    assert "option" in err.value.message
    with pytest.raises(InputError, match="unknown task type"):
        check_ground_truths(["x"], "vqa")
    check_ground_truths(["A", "blue"], "mcq", ["Pick: A) red B) blue"] * 2)


def test_mixed_families_score_each_family_by_its_own_rule():
    """Issue 12 item 8: a yes/no family in a mixed set is scored yes/no (FP/FN), the rest exact match."""
    rows = [
        {"gt": "yes", "response": "Yes, it is.", "family": "yes_no"},
        {"gt": "no", "response": "yes", "family": "yes_no"},
        {"gt": "red", "response": "red", "family": "colour"},
    ]
    scored, report = score_results(rows)
    assert report["evaluator"] == "mixed" and report["kinds"] == {"exact_match": 1, "yes_no": 2}
    assert report["accuracy"] == pytest.approx(2 / 3)
    assert report["families"]["yes_no"]["evaluator"] == "yes_no"
    assert report["families"]["yes_no"]["fp"] == 1
    assert report["families"]["colour"]["accuracy"] == 1.0
    assert [(r["answer"], r["correct"]) for r in scored] == [("yes", True), ("yes", False), ("red", True)]
    assert scored[0]["response"] == "Yes, it is."  # the raw response stays beside the answer
    assert metric_value(report, "f1") == ("accuracy", pytest.approx(2 / 3))
    assert metric_value(report["families"]["yes_no"], "f1")[0] == "f1"


def test_datasets_map_and_answer_type():
    rows = [
        {"gt": "yes", "response": "<answer>yes</answer>", "dataset": "av"},
        {"gt": "no", "response": "<answer>yes</answer>", "dataset": "av"},
        {"gt": "pick up", "response": "<think>x</think>pick up", "dataset": "robovqa"},
    ]
    report = evaluation_report(rows, "", "reasoning")
    assert report["answer_type"] == "reasoning"
    assert set(report["datasets"]) == {"av", "robovqa"} and "families" not in report
    assert report["datasets"]["av"]["fp"] == 1 and report["datasets"]["robovqa"]["accuracy"] == 1.0
    assert "datasets" not in evaluation_report([{"gt": "a", "response": "a"}])


def test_empty_rows():
    scored, report = score_results([])
    assert scored == [] and report["total"] == 0 and report["accuracy"] == 0.0


def test_unparseable_diagnosis_says_why():
    """Issue 28 item 2: more than half unparseable gets a reason when the replies show one."""
    from skillbank.evaluation.unparseable import diagnose, facts

    assert diagnose(10, 5, "short", facts(["x"] * 5)) == []  # half is not more than half
    short_asked_to_reason = diagnose(4, 4, "reasoning", facts(["yes", "no", "yes", "left"]), trained_answer_type="short")
    assert "trained for short answers" in short_asked_to_reason[0] and "neither </think> nor <answer>" in short_asked_to_reason[1]
    traces = diagnose(3, 3, "short", facts(["<think>a red ball</think> yes"] * 3))
    assert len(traces) == 1 and "<think> trace" in traces[0]
    cut = diagnose(2, 2, "reasoning", facts(["<think>long", "<think>longer"], token_counts=[1024, 1024], max_tokens=1024))
    assert any("stopped at max_tokens 1024" in w for w in cut)
    blank = diagnose(2, 2, "short", facts(["", " "], token_counts=[4, 4], max_tokens=4))
    assert blank == ["2 of 2 answers are unparseable: 2 of 2 unparseable replies are empty or only whitespace; 2 ran to max_tokens 4 "
                     "writing only blanks: the model wrote no answer (an untrained model, or a prompt unlike the one it was trained with?)"]
    other = diagnose(2, 2, "short", facts(["maybe", "perhaps"]))
    assert other[0].endswith("(e.g. 'maybe'; 'perhaps'): check the prompt asks for the answer format of the references")


def test_the_diagnosis_block_names_its_cause_and_reaches_the_summary_line():
    """metrics.json `diagnosis` (a field, not only warnings) and the stdout summary line carry it."""
    from skillbank.evaluation.metrics import compute_metrics, summary_line
    from skillbank.evaluation.unparseable import diagnosis, facts

    assert diagnosis(10, 5, "short", facts(["x"] * 5)) is None
    block = diagnosis(3, 3, "reasoning", facts(["yes", "no", "yes"]))  # a short-answer model asked to reason, no recipe
    assert [c["code"] for c in block["causes"]] == ["no_reasoning_format"] and (block["unparseable"], block["total"]) == (3, 3)
    assert block["message"].startswith("3 of 3 answers are unparseable: 3 of 3 unparseable replies hold neither </think> nor <answer>")
    report = compute_metrics(["yes", "no", "yes"], ["yes", "no", "yes"], answer_type="reasoning")
    report["diagnosis"] = block
    line = summary_line(report, "accuracy", 0.0)
    assert "3 unparseable (diagnosis: the replies hold no reasoning format (a short-answer model asked to reason?): " in line
    assert "evaluation.answer_type = 'short'; metrics.json diagnosis)" in line
