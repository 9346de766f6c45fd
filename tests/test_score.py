"""`skillbank score`: metrics.json from any engine's results.json, without a model."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, json_out, skillbank
from skillbank.evaluation.metrics import score_results
from skillbank.evaluation.results import score_file

THINK = "<think>\nThe robot reaches for the cup on the left and lifts it.\n</think>\n\n"
ROWS = [  # as cosmos-rl's evaluator or a seed script would write them: no answer / correct fields
    {"video_id": "av-1", "question": "Is there a collision? Answer yes or no.", "gt": "yes", "response": THINK + "<answer>\nYes, there is.\n</answer>", "dataset": "av"},
    {"video_id": "av-2", "question": "Is there a collision? Answer yes or no.", "gt": "no", "response": THINK + "<answer>\nYes\n</answer>", "dataset": "av"},
    {"video_id": "av-3", "question": "Is there a collision? Answer yes or no.", "gt": "no", "response": THINK + "No.", "dataset": "av"},
    {"video_id": "rv-1", "question": "What does the robot do next?", "gt": "pick up the cup", "response": THINK + "<answer>Pick up the cup.", "dataset": "robovqa"},
    {"video_id": "rv-2", "question": "What does the robot do next?", "gt": "put down the cup", "response": "<think>\nno answer before the token limit", "dataset": "robovqa"},
]


def _results(tmp_path, rows=ROWS, metrics=None):
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(rows, indent=2))
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_score_reasoning_results_per_dataset_without_torch(tmp_path):
    folder = _results(tmp_path)
    probe = (
        "import sys\nfrom skillbank.cli import main\n"
        f"rc = main(['score', '--results-dir', {str(folder)!r}, '--answer-format', 'reasoning', '--json'])\n"
        "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'pandas') if m in sys.modules), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr
    doc = json_out(proc)
    assert doc["ok"] and doc["metrics_json"] == str(folder / "metrics.json")
    assert (doc["total"], doc["correct"], doc["unparseable"]) == (5, 3, 1)
    assert doc["evaluator"] == "mixed" and doc["answer_type"] == "reasoning" and doc["task_type"] == ""
    assert doc["datasets"]["av"]["evaluator"] == "yes_no" and doc["datasets"]["av"]["fp"] == 1
    assert doc["datasets"]["robovqa"] == {"evaluator": "exact_match", "total": 2, "correct": 1, "accuracy": 0.5, "unparseable": 1,
                                          "ci95": {"accuracy": [0.094529, 0.905471]}}
    on_disk = json.loads((folder / "metrics.json").read_text())
    assert on_disk["accuracy"] == doc["accuracy"] and on_disk["scored_by"] == "skillbank score"


def test_score_matches_evaluate_scoring(tmp_path):
    """The file path (one DuckDB query over results.json) and evaluate's in-memory path give one report."""
    folder = _results(tmp_path)
    for task, answer_type in (("", "reasoning"), ("", "short")):
        assert score_file(str(folder / "results.json"), task, answer_type) == score_results(ROWS, task, answer_type)[1]


def test_defaults_come_from_metrics_json_and_provenance_is_kept(tmp_path):
    q = "Which cup? A) red B) blue"
    rows = [{"video_id": "1", "question": q, "gt": "B", "response": "<think>x</think><answer>(B)</answer>"},
            {"video_id": "2", "question": q, "gt": "A", "response": "<think>x</think><answer>B</answer>"}]
    folder = _results(tmp_path, rows, {"task_type": "mcq", "answer_type": "reasoning", "model": "step_40", "accuracy": 0.0})
    proc = skillbank("score", "--results-dir", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert "accuracy 0.5000 on 2 results (task 'mcq': metrics.json; answer format reasoning; 0 unparseable)" in proc.stdout
    assert f"wrote {folder / 'metrics.score.json'} ({folder / 'metrics.json'} exists: kept;" in proc.stdout
    assert json.loads((folder / "metrics.json").read_text())["accuracy"] == 0.0  # evaluate's metrics.json is never replaced unasked
    doc = json.loads((folder / "metrics.score.json").read_text())
    assert doc["model"] == "step_40" and doc["evaluator"] == "mcq"
    assert doc["confusion_matrix"]["A"] == {"A": 0, "B": 1, "unparseable": 0}


def test_bad_inputs_exit_2_with_one_json_document(tmp_path):
    folder = _results(tmp_path)
    proc = skillbank("score", "--results-dir", str(folder), "--task", "mcq", "--json")
    assert proc.returncode == 2
    doc = json_out(proc)
    assert doc["ok"] is False and "record 0" in json.dumps(doc)
    (folder / "results.json").write_text('{"video_id": "x"}')
    proc = skillbank("score", "--results-dir", str(folder), "--json")
    assert proc.returncode == 2 and "array" in json.dumps(json_out(proc))
    proc = skillbank("score", "--results-dir", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "results dir not found" in proc.stderr


def test_cli_does_not_import_duckdb():
    probe = ("import sys, contextlib, io\nfrom skillbank import cli\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        cli.main(['score', '--help'])\n    except SystemExit:\n        pass\n"
             "print(sorted(m for m in ('duckdb', 'pyarrow', 'fsspec') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_per_sample_verdicts_and_out_replaces_only_when_named(tmp_path):
    folder = _results(tmp_path, metrics={"task_type": "", "answer_type": "reasoning", "accuracy": 0.25})
    per_sample = tmp_path / "verdicts.jsonl"
    doc = json_out(skillbank("score", "--results-dir", str(folder), "--per-sample", str(per_sample), "--json"))
    assert doc["metrics_json"] == str(folder / "metrics.score.json") and doc["kept"] == str(folder / "metrics.json")
    lines = [json.loads(line) for line in per_sample.read_text().splitlines()]
    assert [(x["id"], x["reference"], x["answer"], x["correct"]) for x in lines] == [
        ("av-1", "yes", "yes", True), ("av-2", "no", "yes", False), ("av-3", "no", "no", True),
        ("rv-1", "pick up the cup", "Pick up the cup.", True), ("rv-2", "put down the cup", None, False)]
    assert set(lines[0]) == {"id", "question", "family", "dataset", "reference", "response", "answer", "correct"}
    assert sum(x["correct"] for x in lines) == doc["correct"]
    # the raw text under response, what was scored under answer: the names and values of evaluate's results.json rows
    assert [x["response"] for x in lines] == [r["response"] for r in ROWS]
    evaluated, _ = score_results(ROWS, "", "reasoning")
    assert [(x["response"], x["answer"], x["correct"]) for x in lines] == [(r["response"], r["answer"], r["correct"]) for r in evaluated]
    as_parquet = tmp_path / "verdicts.parquet"  # the same verdicts as parquet, by the name's extension
    json_out(skillbank("score", "--results-dir", str(folder), "--per-sample", str(as_parquet), "--json"))
    import pyarrow.parquet as pq

    assert pq.read_table(as_parquet).to_pylist() == lines
    # --out naming metrics.json replaces it, as asked
    doc = json_out(skillbank("score", "--results-dir", str(folder), "--out", str(folder / "metrics.json"), "--json"))
    assert doc["kept"] is None and json.loads((folder / "metrics.json").read_text())["scored_by"] == "skillbank score"


def test_multiple_choice_is_detected_and_said(tmp_path):
    q = "Which cup? A) red B) blue C) green"
    rows = [{"video_id": "1", "question": q, "gt": "B", "response": "B"}, {"video_id": "2", "question": q, "gt": "A", "response": "(C)"},
            {"video_id": "3", "question": q, "gt": "green", "response": "C) green"}]
    folder = _results(tmp_path, rows)
    proc = skillbank("score", "--results-dir", str(folder), "--out", str(tmp_path / "m.json"))
    assert "(task 'mcq': mcq, detected from options A) B) ... in every question;" in proc.stdout
    doc = json_out(skillbank("score", "--results-dir", str(folder), "--out", str(tmp_path / "m.json"), "--json"))
    assert doc["task_type"] == "mcq" and "options A) B)" in doc["task_from"] and doc["evaluator"] == "mcq"
    assert (doc["correct"], doc["total"]) == (2, 3)
    # a choices field (as other engines write multiple choice): its options are read like the question's
    other = tmp_path / "other"
    other.mkdir()
    rows = [{"video_id": "1", "question": "Which cup?", "choices": ["red", "blue"], "gt": "B", "response": "blue"},
            {"video_id": "2", "question": "Which cup?", "choices": ["red", "blue"], "gt": "A", "response": "B"}]
    (other / "preds.json").write_text(json.dumps(rows))
    doc = json_out(skillbank("score", "--results-dir", str(other / "preds.json"), "--out", str(tmp_path / "c.json"), "--json"))
    assert doc["task_type"] == "mcq" and "choices" in doc["task_from"] and (doc["correct"], doc["total"]) == (1, 2)
    # a set whose questions list no options stays general
    (other / "open.json").write_text(json.dumps(ROWS))
    doc = json_out(skillbank("score", "--results-dir", str(other / "open.json"), "--out", str(tmp_path / "o.json"), "--json"))
    assert doc["task_type"] == "" and doc["task_from"] == "general"


def test_a_mostly_unparseable_run_says_why(tmp_path):
    rows = [{"video_id": str(i), "question": "Red? Answer yes or no.", "gt": "yes", "response": "yes"} for i in range(4)]
    folder = _results(tmp_path, rows, {"task_type": "", "answer_type": "reasoning"})  # short answers read as reasoning
    proc = skillbank("score", "--results-dir", str(folder))
    assert proc.returncode == 0
    assert "4 of 4 answers are unparseable: 4 of 4 replies hold neither </think> nor <answer>" in proc.stderr
