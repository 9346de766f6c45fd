"""`skillbank score` reads other engines' results as they are: Cosmos-Reason1's and cosmos-rl's per-sample
files, JSONL, any field set through --field; metrics.json never lands in the other engine's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import json_out, skillbank
from skillbank.errors import InputError
from skillbank.evaluation import engines

MCQ = "Which way does the car go?\nA) left\nB) right\nC) straight"
THINK = "<think>\nThe car slows and turns.\n</think>\n"


def reason1_row(i: int, gt: str, said: str) -> dict:
    """As Cosmos-Reason1's examples/benchmark evaluate.py writes one sample (a list of one object per file)."""
    return {"datasource": "av", "video_id": f"clip{i}.mp4", "prompt": MCQ, "correct_answer": gt, "reasoning": "...",
            "answer": said, "full_response": f"{THINK}<answer>\n{said}\n</answer>", "is_correct": gt == said}


def cosmos_rl_row(i: int, gt: str, said: str) -> dict:
    """As cosmos-rl's (ITS) evaluator writes one sample: no prompt."""
    return {"datasource": "eval_set_name", "video_id": f"v{i}.mp4", "correct_answer": gt, "answer": said, "reasoning": "",
            "full_response": f"{THINK}<answer>{said}</answer>", "is_correct": gt.lower() == said.lower()}


def _engine_folder(root: Path, rows: list[dict], *, as_list: bool = True) -> Path:
    folder = root / "engine"
    for i, row in enumerate(rows):
        path = folder / row["datasource"] / f"sample{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([row] if as_list else row, indent=2))
    (folder / "directionality_score.json").write_text(json.dumps({"overall": {"accuracy": 1.0}}))  # theirs, not a sample
    return folder


def test_cosmos_reason1_per_sample_files(tmp_path: Path) -> None:
    rows = [reason1_row(0, "A", "A"), reason1_row(1, "B", "A"), reason1_row(2, "C", "C"), reason1_row(3, "B", "B")]
    folder = _engine_folder(tmp_path, rows)
    work = tmp_path / "work"
    work.mkdir()
    proc = skillbank("score", "--results-dir", str(folder), "--task", "mcq", "--json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    assert doc["source"] == {"format": "cosmos-reason1", "layout": "per-sample folder", "files": 4,
                             "their_verdict": {"field": "is_correct", "correct": 3, "total": 4, "accuracy": 0.75}}
    assert (doc["total"], doc["correct"], doc["answer_type"]) == (4, 3, "reasoning")  # <answer> blocks: reasoning
    assert doc["datasets"]["av"]["total"] == 4
    assert doc["metrics_json"] == str(work / "metrics.json") and (work / "metrics.json").is_file()
    assert not list(folder.rglob("metrics.json"))  # never into the other engine's folder


def test_cosmos_rl_evaluator_files_one_object_each(tmp_path: Path) -> None:
    rows = [cosmos_rl_row(0, "left", "left"), cosmos_rl_row(1, "straight", "right"), cosmos_rl_row(2, "right", "Right.")]
    folder = _engine_folder(tmp_path, rows, as_list=False)
    out = tmp_path / "m.json"
    doc = json_out(skillbank("score", "--results-dir", str(folder), "--task", "its_directionality", "--out", str(out), "--json", cwd=tmp_path))
    assert doc["source"]["format"] == "cosmos-rl" and doc["source"]["files"] == 3
    assert (doc["total"], doc["correct"]) == (3, 2) and json.loads(out.read_text())["accuracy"] == doc["accuracy"]
    assert doc["source"]["their_verdict"]["correct"] == 1  # their exact compare missed "Right."; our rules read it
    mcq = skillbank("score", "--results-dir", str(folder), "--task", "mcq", "--json", cwd=tmp_path)
    assert mcq.returncode == 2  # no question, so no options to read: the ground truths name none


def test_jsonl_and_a_json_file_of_our_fields_score_into_the_current_folder(tmp_path: Path) -> None:
    rows = [{"video_id": "a", "question": "Red?", "gt": "yes", "response": "Yes."}, {"video_id": "b", "question": "Red?", "gt": "no", "response": "yes"}]
    engine = tmp_path / "engine"
    engine.mkdir()
    (engine / "preds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (engine / "preds.json").write_text(json.dumps(rows))
    for name, layout, written in (("preds.jsonl", "jsonl file", "metrics.json"), ("preds.json", "json file", "metrics.score.json")):
        doc = json_out(skillbank("score", "--results-dir", str(engine / name), "--json", cwd=tmp_path))
        assert doc["source"]["format"] == "skillbank" and doc["source"]["layout"] == layout and doc["source"]["their_verdict"] is None
        assert (doc["total"], doc["correct"], doc["evaluator"]) == (2, 1, "yes_no") and doc["answer_type"] == "short"
        assert doc["metrics_json"] == str(tmp_path / written)  # the second keeps the first's metrics.json
    assert not (engine / "metrics.json").exists()
    inside = skillbank("score", "--results-dir", str(engine / "preds.jsonl"), cwd=engine)
    assert inside.returncode == 2 and "--out" in inside.stderr and not (engine / "metrics.json").exists()


def test_our_results_json_still_gets_metrics_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "eval"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps([{"video_id": "a", "question": "Red?", "gt": "yes", "response": "yes"}]))
    doc = json_out(skillbank("score", "--results-dir", str(folder), "--json", cwd=tmp_path))
    assert doc["metrics_json"] == str(folder / "metrics.json") and doc["source"]["format"] == "skillbank" and doc["source"]["layout"] == "results.json"


def test_unknown_fields_name_what_was_found_and_the_mapping(tmp_path: Path) -> None:
    rows = [{"uid": 1, "label": "yes", "prediction": "yes", "extra": [1]}, {"uid": 2, "label": "no", "prediction": "yes"}]
    path = tmp_path / "engine" / "preds.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = skillbank("score", "--results-dir", str(path), "--json", cwd=tmp_path)
    assert proc.returncode == 2
    error = json_out(proc)["error"]
    assert "extra, label, prediction, uid" in error["message"] and "--field gt=label --field response=prediction" in error["fix"]
    mapped = json_out(skillbank("score", "--results-dir", str(path), "--field", "gt=label", "--field", "response=prediction", "--field", "video_id=uid", "--json", cwd=tmp_path))
    assert mapped["source"]["format"] == "custom" and (mapped["total"], mapped["correct"]) == (2, 1)
    wrong = skillbank("score", "--results-dir", str(path), "--field", "gt=nope", "--field", "response=prediction", cwd=tmp_path)
    assert wrong.returncode == 2 and "nope" in wrong.stderr


@pytest.mark.parametrize(
    ("reader", "row", "expected"),
    [
        (engines.SKILLBANK, {"video_id": "v", "question": "q", "gt": "g", "response": "r", "family": "f", "dataset": "d", "answer": "x", "turn": 2},
         ("v", "q", "g", "r", "f", "d", "2")),
        (engines.COSMOS_REASON1, reason1_row(0, "A", "B"), ("clip0.mp4", MCQ, "A", f"{THINK}<answer>\nB\n</answer>", None, "av", None)),
        (engines.COSMOS_RL, cosmos_rl_row(0, "left", "left"), ("v0.mp4", None, "left", f"{THINK}<answer>left</answer>", None, "eval_set_name", None)),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_each_reader_maps_its_fields_into_one_shape(tmp_path: Path, reader, row, expected) -> None:
    import duckdb

    path = tmp_path / "r.json"
    path.write_text(json.dumps([row]))
    source = engines.Source(str(path), str(path), "auto", "json file", [str(path)])
    con = duckdb.connect()
    assert engines.detect(set(engines.read_fields(con, source)), str(path)) is reader
    source.reader = reader
    assert con.execute(source.query()).fetchall() == [expected]


def test_field_flags_are_checked() -> None:
    assert engines.parse_fields(["gt=label", "response = out"]) == {"gt": "label", "response": "out"}
    with pytest.raises(InputError):
        engines.parse_fields(["truth=label"])
    with pytest.raises(InputError, match="no field for response"):
        engines.custom({"gt": "label"}, {"label", "out"}, "x")
