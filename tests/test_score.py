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
    assert "accuracy 0.5000 on 2 results (task 'mcq', answer format reasoning; 0 unparseable)" in proc.stdout
    doc = json.loads((folder / "metrics.json").read_text())
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
