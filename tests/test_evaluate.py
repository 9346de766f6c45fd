"""evaluate / inference on the tiny offline Qwen2.5-VL / Qwen3-VL and the demo val clips (conftest).

A random-init model answers nothing useful, so checkpoints are made to answer one fixed word with
a generation_config `sequence_bias` (a real generate-time mechanism): "yes" scores 2/9 on the set
below, "left" 1/9, the untouched model 0, which lets `--run` show it picks the best step, not the last.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest

from helpers import ROOT
from skillbank.cli import main


@pytest.fixture(scope="module")
def setup(tiny_model_dir, demo_dataset_dir):
    """conftest's tiny Qwen2.5-VL and the demo val split (9 clips written with PyAV, 3 per family)."""
    data = demo_dataset_dir / "val"
    records = json.loads((data / "annotations.json").read_text())
    assert [r["conversations"][1]["value"] for r in records] == ["yes", "left", "red", "no", "right", "green", "yes", "straight", "blue"]
    return {"model": Path(tiny_model_dir), "data": data, "records": records}


def force_answer(model_dir: Path, target: Path, word: str) -> Path:
    """A copy of the model whose greedy answer is always `word`."""
    from transformers import AutoTokenizer

    shutil.copytree(model_dir, target)
    tok = AutoTokenizer.from_pretrained(target)
    ids = tok.encode(word, add_special_tokens=False)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    bias = [[ids[: k + 1], 100.0] for k in range(len(ids))] + [[[*ids, eos], 200.0]]
    path = target / "generation_config.json"
    config = json.loads(path.read_text())
    config["sequence_bias"] = bias
    path.write_text(json.dumps(config))
    return target


def write_toml(path: Path, **sections) -> Path:
    import tomli_w

    path.write_text(tomli_w.dumps(sections))
    return path


def config_for(setup, results_dir: Path, model_name: Path | str, **extra) -> dict:
    data = setup["data"]
    base = {
        "results_dir": str(results_dir),
        "num_gpus": 0,
        "dataset": {"annotation_path": str(data / "annotations.json"), "media_dir": str(data)},
        "model": {"model_name": str(model_name)},
        "evaluation": {"batch_size": 4},
        "vision": {"fps": 4.0},
        "generation": {"max_tokens": 4},
    }
    for key, value in extra.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return base


def run_cli(capsys, *args: str) -> tuple[int, dict | None]:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else None)


def test_evaluate_writes_results_and_metrics(setup, tmp_path, capsys):
    model = force_answer(setup["model"], tmp_path / "yes_model", "yes")
    toml = write_toml(tmp_path / "eval.toml", **config_for(setup, tmp_path / "out", model))
    code, doc = run_cli(capsys, "evaluate", "--config", str(toml), "--quiet")
    assert code == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(results) == 9
    assert set(results[0]) == {"video_id", "turn", "question", "gt", "response", "answer", "correct", "family"}
    assert results[0] == {"video_id": "val_00000", "turn": 0, "question": setup["records"][0]["conversations"][0]["value"].split("\n", 1)[1],
                          "gt": "yes", "response": "yes", "answer": "yes", "correct": True, "family": "yes_no"}
    assert {r["response"] for r in results} == {"yes"}
    schema = json.loads((ROOT / "schemas" / "results.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(results, schema, cls=jsonschema.Draft202012Validator)
    for example in schema["examples"]:
        jsonschema.validate(example, schema, cls=jsonschema.Draft202012Validator)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["evaluator"] == "mixed" and metrics["accuracy"] == pytest.approx(2 / 9)  # each family by its own rule
    assert metrics["answer_type"] == "short" and sum(r["correct"] for r in results) == 2
    assert metrics["primary_metric"] == {"name": "accuracy", "value": pytest.approx(2 / 9)}
    fam = metrics["families"]
    assert fam["yes_no"]["evaluator"] == "yes_no" and (fam["yes_no"]["tp"], fam["yes_no"]["fp"]) == (2, 1)
    assert fam["colour"]["accuracy"] == 0.0
    assert doc["ok"] and doc["num_samples"] == 9
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # atomic writes left no temp files
    # results.parquet beside it: the same rows in the same order, each record's video, a stamp gaps trusts
    parquet = pq.read_table(tmp_path / "out" / "results.parquet")
    assert parquet.column_names == ["video_id", "question", "gt", "response", "answer", "correct", "family", "dataset", "turn", "video"]
    assert [{k: int(v) if k == "turn" else v for k, v in r.items() if v is not None and k != "video"} for r in parquet.to_pylist()] == results
    assert parquet["video"].to_pylist() == [r["video"] for r in setup["records"]]
    stamp = json.loads(pq.read_metadata(tmp_path / "out" / "results.parquet").metadata[b"skillbank.results"])
    assert stamp["rows"] == 9 and stamp["annotations"]["path"] == str((setup["data"] / "annotations.json").resolve())
    assert stamp["results_json"]["size"] == (tmp_path / "out" / "results.json").stat().st_size


def test_run_evaluates_every_step_and_picks_the_best_not_the_last(setup, tmp_path, capsys):
    output_dir = tmp_path / "train"
    old = output_dir / "20240101000000" / "safetensors"
    force_answer(setup["model"], old / "step_5", "yes")  # an older run: ignored
    run = output_dir / "20250101000000"
    force_answer(setup["model"], run / "safetensors" / "step_10", "yes")
    force_answer(setup["model"], run / "safetensors" / "step_20", "left")
    shutil.copytree(setup["model"], run / "safetensors" / "step_30")
    (run / "spec.json").write_text(json.dumps({"custom": {  # what the local backend keeps in the run
        "val_dataset": {"annotation_path": str(setup["data"] / "annotations.json"), "media_path": str(setup["data"])},
        "vision": {"fps": 4.0}, "system_prompt": "Answer briefly."}}))

    code, best = run_cli(capsys, "evaluate", "--run", str(output_dir), "--quiet")  # no --config: the run's own spec
    assert code == 0
    assert best["run_dir"] == str(run)
    assert [s["step"] for s in best["steps"]] == [10, 20, 30]
    assert [s["value"] for s in best["steps"]] == pytest.approx([2 / 9, 1 / 9, 0.0])
    assert best["step"] == 10 and best["metric"] == "accuracy" and best["path"].endswith("step_10")
    on_disk = json.loads((run / "evaluate" / "best_checkpoint.json").read_text())
    assert on_disk["step"] == 10 and on_disk["value"] == pytest.approx(2 / 9)
    for step in (10, 20, 30):
        assert (run / "evaluate" / f"step_{step}" / "metrics.json").is_file()
    assert json.loads(Path(best["results_json"]).read_text())[0]["response"] == "yes"

    # the gaps command then finds the best step's results.json through best_checkpoint.json
    code, gaps = run_cli(capsys, "gaps", "--results-dir", str(run / "evaluate"), "--out", str(tmp_path / "g.parquet"),
                         "--annotations", str(setup["data"] / "annotations.json"))
    assert code == 0 and gaps["failures"] == 7 and gaps["results_json"].endswith("step_10/results.json")
    assert gaps["results_read"].endswith("step_10/results.parquet") and gaps["media_from"] == gaps["results_read"]


def test_its_directionality(setup, tmp_path, capsys):
    directions = [r for r in setup["records"] if r["family"] == "directionality"]
    (tmp_path / "dir.json").write_text(json.dumps(directions))
    model = force_answer(setup["model"], tmp_path / "left", "left")
    config = config_for(setup, tmp_path / "out", model, task={"type": "its_directionality"}, metrics={"primary": "f1"},
                        dataset={"annotation_path": str(tmp_path / "dir.json")})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "d.toml", **config)), "--quiet")
    assert code == 0 and doc["evaluator"] == "its_directionality"
    assert doc["accuracy"] == pytest.approx(1 / 3)
    assert doc["confusion_matrix"]["right"] == {"left": 1, "right": 0, "straight": 0, "unparseable": 0}
    assert doc["per_class"]["left"]["precision"] == pytest.approx(1 / 3) and doc["per_class"]["left"]["recall"] == 1.0
    assert doc["primary_metric"] == {"name": "f1", "value": pytest.approx(doc["macro_f1"])}


def test_lora_adapter_on_its_base(setup, tmp_path, capsys):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(setup["model"])
    adapter = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    adapter.save_pretrained(tmp_path / "adapter")
    base_dir = force_answer(setup["model"], tmp_path / "base", "yes")
    config = config_for(setup, tmp_path / "out", tmp_path / "adapter",
                        model={"enable_lora": True, "base_model_path": str(base_dir)}, evaluation={"batch_size": 9, "limit": 3})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "lora.toml", **config)), "--quiet")
    assert code == 0 and doc["num_samples"] == 3
    assert [r["response"] for r in json.loads((tmp_path / "out" / "results.json").read_text())] == ["yes"] * 3


def test_inference_single_and_batch(setup, tmp_path, capsys):
    model = force_answer(setup["model"], tmp_path / "m", "left")
    clip = setup["data"] / setup["records"][1]["video"]
    assert main(["inference", "--model", str(model), "--video", str(clip), "--prompt", "Which way? Answer left, right or straight.", "--num-frames", "4"]) == 0
    assert capsys.readouterr().out.strip() == "left"

    spec = tmp_path / "inference.yaml"
    spec.write_text(f"model_path: {model}\nannotation_path: {setup['data'] / 'annotations.json'}\nmedia_dir: {setup['data']}\nfps: 4.0\n")
    code, doc = run_cli(capsys, "inference", "--config", str(spec), "--out", str(tmp_path / "r.json"), "--batch-size", "5", "--quiet")
    assert code == 0 and doc["count"] == 9
    rows = json.loads((tmp_path / "r.json").read_text())
    assert rows[1] == {"video_id": "val_00001", "question": "Which way does the ball move? Answer left, right or straight.", "gt": "left", "response": "left"}
    assert doc["empty_answers"] == 0 and doc["empty_warning"] is None and doc["device"] == "cpu"


def test_inference_says_how_many_answers_are_empty(setup, tmp_path, capsys):
    """A model that stops at once answers "" (a bias on the end token alone): batch mode says how many on
    stdout, after the line that names the file; single mode keeps stdout for the answer and counts it in --json."""
    model = force_answer(setup["model"], tmp_path / "mute", "")
    out = tmp_path / "r.json"
    assert main(["inference", "--model", str(model), "--annotations", str(setup["data"] / "annotations.json"), "--num-frames", "4",
                 "--batch-size", "9", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    wrote, warning = printed.out.splitlines()
    assert wrote == f"wrote 9 answers to {out}" and "empty" not in printed.err
    assert warning.startswith("warning: 9 of 9 answers are empty (the model wrote nothing but special tokens or whitespace): check that")
    assert "max_tokens 64" in warning and {r["response"] for r in json.loads(out.read_text())} == {""}
    clip = setup["data"] / setup["records"][0]["video"]
    code, doc = run_cli(capsys, "inference", "--model", str(model), "--video", str(clip), "--prompt", "Is the ball red?", "--num-frames", "4")
    assert code == 0 and doc["answer"] == "" and doc["empty_answers"] == 1
    assert doc["empty_warning"].startswith("the answer is empty") and doc["empty_warning"] in doc["warnings"]


def test_bad_inputs_exit_2(setup, tmp_path, capsys):
    assert main(["evaluate"]) == 2
    config = config_for(setup, tmp_path / "out", setup["model"], dataset={"media_dir": str(tmp_path)})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "e.toml", **config)))
    assert code == 2 and "9 video(s) not found" in doc["error"]["message"]
    config = config_for(setup, tmp_path / "out", setup["model"], vision={"fps": 2.0, "num_frames": 4})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "v.toml", **config)))
    assert code == 2 and "vision.fps" in doc["error"]["message"]
    config = config_for(setup, tmp_path / "out", setup["model"], task={"type": "its_directionality"})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "d.toml", **config)))
    assert code == 2 and "record 0 has 'yes'" in doc["error"]["message"]  # before any model loads
    code, doc = run_cli(capsys, "evaluate", "--run", str(tmp_path / "nothing"))
    assert code == 2 and "run folder not found" in doc["error"]["message"]
    assert main(["inference", "--model", str(setup["model"]), "--video", str(tmp_path / "none.mp4"), "--prompt", "q"]) == 2


def test_qwen3_vl_the_cosmos_reason2_family(setup, tiny_qwen3_model_dir, tmp_path, capsys):
    model = force_answer(tiny_qwen3_model_dir, tmp_path / "q3_yes", "yes")
    config = config_for(setup, tmp_path / "out", model, evaluation={"limit": 3, "batch_size": 3})
    code, doc = run_cli(capsys, "evaluate", "--config", str(write_toml(tmp_path / "q3.toml", **config)), "--quiet")
    assert code == 0 and doc["num_samples"] == 3
    assert [r["response"] for r in json.loads((tmp_path / "out" / "results.json").read_text())] == ["yes"] * 3


def test_model_names_resolve_without_downloading(setup, tmp_path, monkeypatch):
    import huggingface_hub

    from skillbank.errors import InputError
    from skillbank.evaluation.model import resolve_model_path

    asked = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **_: asked.append(repo_id) or "/snap")
    assert resolve_model_path("hf_model://nvidia/Cosmos-Reason2-8B") == "/snap"
    assert resolve_model_path("nvidia/Cosmos-Reason1-7B") == "/snap"
    assert asked == ["nvidia/Cosmos-Reason2-8B", "nvidia/Cosmos-Reason1-7B"]
    assert resolve_model_path(str(setup["model"])) == str(setup["model"])
    with pytest.raises(InputError, match="not a model folder"):
        resolve_model_path(str(tmp_path))
    with pytest.raises(InputError, match="model not found"):
        resolve_model_path(str(tmp_path / "missing" / "step_5"))
