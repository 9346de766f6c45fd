"""evaluate on multi-turn records: every assistant turn with a reference is asked with the conversation
so far (the earlier reference answers as the history, the chat training builds) and scored, one
results.json row per turn; --turns first asks the first answer only; a warning whenever turns are left
out. The tiny Qwen2.5-VL answers "yes" (test_evaluate.force_answer) on three demo val clips."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from skillbank.cli import main
from skillbank.data import chat
from skillbank.evaluation.evaluate import turn_items
from test_evaluate import force_answer, run_cli, write_toml


def _turns(*pairs: str) -> list[dict[str, str]]:
    return [{"from": "human" if i % 2 == 0 else "gpt", "value": ("<video>\n" if i == 0 else "") + text} for i, text in enumerate(pairs)]


def records_of(val: list[dict]) -> list[dict]:
    """Three records on the demo clips: three turns (the same question twice), two turns whose second answer
    is empty followed by an unanswered question, and one single-turn record."""
    three = {**val[0], "id": "m3", "family": "yes_no",
             "conversations": _turns("Is the ball yellow? Answer yes or no.", "yes", "Is it moving? Answer yes or no.", "no",
                                     "Is it moving? Answer yes or no.", "yes")}
    gaps = {**val[3], "id": "m2", "family": "yes_no",
            "conversations": [*_turns("Is the ball red? Answer yes or no.", "no", "And now?", ""),
                              {"from": "human", "value": "Anything else?"}]}
    single = {**val[6], "id": "s1", "family": "yes_no"}
    return [three, gaps, single]


@pytest.fixture(scope="module")
def data(demo_dataset_dir, tmp_path_factory) -> Path:
    val = demo_dataset_dir / "val"
    folder = tmp_path_factory.mktemp("turns")
    records = records_of(json.loads((val / "annotations.json").read_text()))
    (folder / "annotations.json").write_text(json.dumps(records))
    (folder / "videos").symlink_to(val / "videos")
    return folder


def test_turns_and_the_history_each_is_asked_with(data):
    records = json.loads((data / "annotations.json").read_text())
    asked = turn_items(records, "all")
    assert asked.turn == [0, 1, 2, 0, 0] and asked.unanswered == 2 and asked.later == 0 and asked.multi_turn == 2
    assert [chat.prompt_and_answer(r, -1) for r in asked.items[:3]] == [
        ("Is the ball yellow? Answer yes or no.", "yes"), ("Is it moving? Answer yes or no.", "no"), ("Is it moving? Answer yes or no.", "yes")]
    first = turn_items(records, "first")
    assert first.turn == [0, 0, 0] and first.later == 2 and first.unanswered == 2  # m2's empty answer: no reference, counted once
    assert "evaluation.turns first: 2 later answer(s) of 2 multi-turn record(s)" in first.warnings()[0]
    assert "2 question(s) have no reference answer" in asked.warnings()[0] and "m2" in asked.warnings()[0]
    # turn k's prompt is the training chat up to answer k: the earlier reference answers as the history
    full = chat.build_messages(records[0], system_prompt="S", fps=2.0)
    for k in range(3):
        prompt = chat.build_messages(asked.items[k], system_prompt="S", fps=2.0, with_answer=False, turn=-1)
        assert prompt == full[: 2 + 2 * k]  # system, then (user, assistant) pairs, ending with turn k's question
    assert chat.build_messages(records[0], system_prompt="S", fps=2.0, with_answer=False) == full[:2]  # turn 0 (GRPO's prompt)


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_prompt_tokens_are_the_training_tokens_before_the_answer(data, family, tiny_model_dir, tiny_qwen3_model_dir):
    """The evaluation prompt of turn k (PromptBuilder, turn -1 on the cut record) is token for token the
    training example's input_ids up to answer k, vision tokens included."""
    from transformers import AutoProcessor

    from skillbank.data.examples import ExampleBuilder, VisionSettings
    from skillbank.data.prompts import PromptBuilder

    model = tiny_model_dir if family == "qwen2_5_vl" else tiny_qwen3_model_dir
    processor = AutoProcessor.from_pretrained(model)
    vision = VisionSettings(fps=2.0)
    record = json.loads((data / "annotations.json").read_text())[0]
    trained = ExampleBuilder(processor, model_path="", vision=vision, system_prompt="S", media_path=data, cache_root=None,
                             memory=False).model_inputs(record)["input_ids"][0].tolist()
    builder = PromptBuilder(processor, vision=vision, system_prompt="S", media_path=data, turn=-1)
    lengths = []
    for k in range(3):
        ids = builder(chat.through_turn(record, k))["input_ids"].tolist()
        assert ids == trained[: len(ids)]
        lengths.append(len(ids))
    assert lengths == sorted(lengths) and len(set(lengths)) == 3


def test_evaluate_scores_every_turn(data, tiny_model_dir, tmp_path, capsys):
    model = force_answer(tiny_model_dir, tmp_path / "yes_model", "yes")
    config = {"results_dir": str(tmp_path / "all"), "num_gpus": 0, "model": {"model_name": str(model)},
              "dataset": {"annotation_path": str(data / "annotations.json")}, "evaluation": {"batch_size": 8},
              "vision": {"fps": 2.0}, "generation": {"max_tokens": 4}}
    toml = write_toml(tmp_path / "eval.toml", **config)
    code, doc = run_cli(capsys, "evaluate", "--config", str(toml), "--quiet")
    assert code == 0 and doc["num_samples"] == 5
    results = json.loads((tmp_path / "all" / "results.json").read_text())
    assert [(r["video_id"], r["turn"], r["gt"], r["correct"]) for r in results] == [
        ("m3", 0, "yes", True), ("m3", 1, "no", False), ("m3", 2, "yes", True), ("m2", 0, "no", False), ("s1", 0, "yes", True)]
    assert doc["families"]["yes_no"]["tp"] + doc["families"]["yes_no"]["fp"] == 5  # the family table counts every turn
    assert {k: (t["n"], t["correct"], t["accuracy"]) for k, t in doc["turns"]["per_turn"].items()} == {
        "0": (3, 2, 0.6667), "1": (1, 0, 0.0), "2": (1, 1, 1.0)}
    assert doc["turns"]["per_turn"]["1"]["ci95"] == [0.0, pytest.approx(0.793, abs=1e-3)]  # Wilson, 0 of 1
    assert doc["turns"]["left_out"] == {"later_turns": 0, "no_reference": 2}
    assert any("have no reference answer" in w for w in doc["warnings"])
    parquet = pq.read_table(tmp_path / "all" / "results.parquet")
    assert parquet["turn"].to_pylist() == ["0", "1", "2", "0", "0"]

    # the text output: a line per turn; --turns first asks one answer per record and says what it left out
    assert main(["evaluate", "--config", str(toml), "--quiet", "--turns", "first"]) == 0
    captured = capsys.readouterr()
    assert "turn 0:" not in captured.out and "evaluation.turns first: 2 later answer(s) of 2 multi-turn record(s)" in captured.err
    first = json.loads((tmp_path / "all" / "results.json").read_text())
    assert [(r["video_id"], r["turn"]) for r in first] == [("m3", 0), ("m2", 0), ("s1", 0)]

    # consumers: gaps keeps the turn of each failure; compare pairs (video_id, question, turn), the repeated question included
    config["results_dir"] = str(tmp_path / "again")
    assert main(["evaluate", "--config", str(write_toml(tmp_path / "again.toml", **config)), "--quiet"]) == 0
    assert "turn 1: accuracy 0.0000 [0.0000, 0.7935] (0/1)" in capsys.readouterr().out
    code, gaps = run_cli(capsys, "gaps", "--results-dir", str(tmp_path / "again"), "--out", str(tmp_path / "gaps.parquet"))
    assert code == 0 and gaps["failures"] == 2
    assert pq.read_table(tmp_path / "gaps.parquet").select(["video_id", "turn"]).to_pylist() == [
        {"video_id": "m3", "turn": "1"}, {"video_id": "m2", "turn": "0"}]
    code, compared = run_cli(capsys, "compare", str(tmp_path / "again"), str(tmp_path / "all"))
    assert code == 0 and compared["overall"]["n"] == 3 and compared["only_in_a"]["count"] == 2
