"""The recipe travels with the model (skillbank.recipe): the tiny model trained at non-default settings
(4 frames per clip, a custom system prompt) writes skillbank_recipe.json into its export; evaluate and
inference on the bare folder (copied out of its run) use those settings, a differing setting the user
set warns, a prompt family that is not the checkpoint's is a finding; evaluate's output names
unparseable answers, Wilson intervals and small classes; preflight accepts a CPU evaluate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import local_train_spec
from skillbank import recipe
from skillbank.cli import main
from skillbank.hashing import sha256_file
from skillbank.runs import layout

PROMPT = "You watch a clip. Reply with one word."
SKILL = "tao-finetune-cosmos-reason"


@pytest.fixture(scope="module")
def trained(tiny_model_dir, demo_dataset_dir, tmp_path_factory):
    """One local run (1 rank, 2 steps) at nframes 4 and a custom prompt; its export copied out of the run."""
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    root = tmp_path_factory.mktemp("recipe")
    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, root / "out", {
        "train.max_num_steps": 2, "train.ckpt.save_freq": 100, "validation.enable": False,
        "custom.vision": {"nframes": 4}, "custom.system_prompt": PROMPT,
    }, dp_shard_size=1))
    result = train_local(spec, log=lambda line: None)
    run = Path(result["run_dir"])
    bare = root / "bare"
    shutil.copytree(layout.safetensors_dir(run, 2), bare)  # a bare Hugging Face folder: no run around it
    return {"run": run, "bare": bare, "data": demo_dataset_dir, "root": root}


def eval_config(trained, out: Path, **extra) -> Path:
    import tomli_w

    data = trained["data"] / "val"
    config = {"results_dir": str(out), "num_gpus": 0, "model": {"model_name": str(trained["bare"])},
              "dataset": {"annotation_path": str(data / "annotations.json"), "media_dir": str(data)},
              "evaluation": {"batch_size": 4, "limit": 3}, "generation": {"max_tokens": 2}}
    for key, value in extra.items():
        config[key] = {**config.get(key, {}), **value}
    path = out.parent / f"{out.name}.toml"
    path.write_text(tomli_w.dumps(config))
    return path


def test_the_export_carries_its_recipe(trained, tiny_model_dir):
    doc = json.loads((trained["bare"] / recipe.RECIPE_FILE).read_text())
    assert doc["vision"]["nframes"] == 4 and doc["vision"]["fps"] is None and doc["vision"]["total_pixels"] > 0
    assert doc["system_prompt"] == PROMPT and doc["answer_type"] == "short" and doc["model_type"] == "qwen2_5_vl"
    assert doc["steps_trained"] == 2 and doc["base_model"] == str(tiny_model_dir)
    train = trained["data"] / "train" / "annotations.json"
    assert doc["training_data"] == {"annotation_path": str(train), "media_path": str(train.parent), "sha256": sha256_file(train), "records": 24}
    assert doc["chat_template_sha256"] == recipe.chat_template_digest(trained["bare"]) is not None
    assert doc["skillbank_version"] and doc["recipe_version"] == recipe.RECIPE_VERSION


def test_evaluate_a_bare_folder_as_it_was_trained(trained, tmp_path, capsys):
    assert main(["evaluate", "--config", str(eval_config(trained, tmp_path / "out")), "--quiet"]) == 0
    captured = capsys.readouterr()
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["vision"]["num_frames"] == 4 and metrics["vision"]["fps"] is None
    assert metrics["vision"]["total_pixels"] == json.loads((trained["bare"] / recipe.RECIPE_FILE).read_text())["vision"]["total_pixels"]
    assert metrics["generation"]["system_prompt"] == PROMPT and metrics["generation"]["prompt_family"] == "cosmos-reason1"
    assert metrics["settings_from"]["vision.num_frames"] == "recipe" and metrics["settings_from"]["evaluation.answer_type"] == "recipe"
    assert metrics["recipe"].endswith(recipe.RECIPE_FILE)
    assert not [w for w in metrics["warnings"] if "recipe" in w]  # nothing set, nothing differs
    assert any("samples, fewer than 30" in w for w in metrics["warnings"])
    lo, hi = metrics["ci95"]["accuracy"]
    assert 0.0 <= lo <= metrics["accuracy"] <= hi <= 1.0
    # the summary names the unparseable answers (a random tiny model reads as nothing in 2 tokens)
    lines = captured.out.strip().splitlines()
    line = lines[0]
    assert line.startswith(f"accuracy {metrics['accuracy']:.4f} on 3 samples")
    # then each family with its 95% interval (issue 28 item 2), and the training-overlap result
    assert [x.split(":")[0].strip() for x in lines[1:-1]] == [f"family {name}" for name in metrics["families"]]
    assert lines[-1].strip().startswith("training overlap: 0 item(s) share content with")
    if metrics["unparseable"]:
        assert f", {metrics['unparseable']} unparseable" in line


def test_a_differing_setting_and_a_foreign_prompt_family_warn(trained, tmp_path, capsys):
    config = eval_config(trained, tmp_path / "out", vision={"fps": 4.0}, evaluation={"prompt_family": "cosmos-reason2"})
    assert main(["evaluate", "--config", str(config), "--quiet"]) == 0
    err = capsys.readouterr().err
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["vision"]["fps"] == 4.0 and metrics["vision"]["num_frames"] is None  # the user's setting wins
    assert metrics["settings_from"]["vision.fps"] == "user" and metrics["generation"]["system_prompt"] == PROMPT
    differs = [w for w in metrics["warnings"] if "differs from the model's recipe" in w]
    assert differs and "vision.fps 4.0" in differs[0] and "nframes 4" in differs[0]
    family = [w for w in metrics["warnings"] if "prompt_family is cosmos-reason2" in w]
    assert family and "qwen2_5_vl" in family[0] and metrics["generation"]["prompt_family"] == "cosmos-reason2"
    assert "warning: vision.fps 4.0 differs" in err and "warning: the checkpoint's model_type is qwen2_5_vl" in err

    code = main(["preflight", "--skill", SKILL, "--action", "evaluate", "--spec", str(config), "--gpus-per-node", "0", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], report  # a CPU run (num_gpus 0, --gpus-per-node 0) is accepted
    checks = {(f["check"], f["severity"]) for f in report["findings"]}
    assert {("spec.recipe", "warning"), ("spec.model", "warning")} <= checks


def test_inference_takes_the_recipe_too(trained, capsys):
    video = next((trained["data"] / "val").rglob("*.mp4"))
    code = main(["inference", "--model", str(trained["bare"]), "--video", str(video), "--prompt", "Left or right?",
                 "--max-tokens", "2", "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["vision"]["num_frames"] == 4 and doc["system_prompt"] == PROMPT
    assert doc["warnings"] == ([doc["empty_warning"]] if doc["answer"] == "" else [])  # nothing differs from the recipe (2 tokens of a 2-step model may be blank)


def test_skillbank_export_and_cosmos_rl_exports_carry_it(trained, tiny_model_dir, tmp_path, capsys):
    # skillbank export of the run's step: the output keeps the recipe
    code = main(["export", "--source", str(trained["run"] / "safetensors" / "step_2"), "--out", str(tmp_path / "exp"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    doc = json.loads((tmp_path / "exp" / recipe.RECIPE_FILE).read_text())
    assert doc["vision"]["nframes"] == 4 and doc["system_prompt"] == PROMPT and doc["steps_trained"] == 2
    assert main(["quantize", "--model", str(trained["bare"]), "--scheme", "W8A16", "--out", str(tmp_path / "q"), "--json"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "q" / recipe.RECIPE_FILE).read_text())["vision"]["nframes"] == 4  # and quantize's output

    # cosmos-rl writes safetensors/step_N itself (GPU only; here a copied folder stands in for its export):
    # the log watcher stamps each export from the run's cosmos_rl.toml as its "Exported" line appears
    import tomli_w

    from skillbank.training.cosmos_rl.watcher import LogWatcher

    run = tmp_path / "20250101000000"
    step = layout.safetensors_dir(run, 5)
    shutil.copytree(tiny_model_dir, step)
    (run / layout.TOML_FILE).write_text(tomli_w.dumps({
        "policy": {"model_name_or_path": str(tiny_model_dir)},
        "custom": {"system_prompt": "Think first.", "answer_type": "reasoning", "task_type": "mcq",
                   "vision": {"fps": 1.0, "total_pixels": 100352}, "train_dataset": {"annotation_path": ""}}}))
    assert recipe.read(step).source.endswith("(the run's spec)")  # a reader falls back to the run's spec already
    watcher = LogWatcher(run / "logs", run, progress=False, log=lambda line: None)
    watcher.feed(f"[rank0]:Exported safetensors to {step}", source="policy_0.log")
    doc = json.loads((step / recipe.RECIPE_FILE).read_text())
    assert (doc["vision"]["fps"], doc["vision"]["total_pixels"], doc["answer_type"], doc["task_type"], doc["steps_trained"]) == (
        1.0, 100352, "reasoning", "mcq", 5)

    # readers (jobs diagnose, report) never write into the run they read, even on an "Exported" line
    from skillbank.platform.diagnose import diagnose

    later = layout.safetensors_dir(run, 7)
    shutil.copytree(tiny_model_dir, later)
    (run / "logs" / "logs_latest").mkdir(parents=True)
    (run / "logs" / "logs_latest" / "policy_0.log").write_text(f"[rank0]:Exported safetensors to {later}\n")
    assert diagnose(run).launched_by == "skillbank-cosmos-rl"
    assert not (later / recipe.RECIPE_FILE).exists()


def test_rl_from_a_model_with_a_recipe_warns_where_it_samples_otherwise(trained):
    from skillbank.preflight.run import run_preflight

    data = trained["data"] / "train"
    spec = {"policy": {"model_name_or_path": str(trained["bare"])},
            "custom": {"train_dataset": {"annotation_path": str(data / "annotations.json"), "media_path": str(data)}}}
    report = run_preflight(skill=SKILL, action="rl", spec=spec, backend="local", only=["spec"])
    found = [f for f in report.findings if f.check == "spec.recipe"]
    assert found and found[0].severity == "warning" and "custom.vision.fps 2.0 differs from the start model's recipe" in found[0].message
    assert any(f.message.startswith("custom.answer_type 'reasoning' differs from the start model's recipe") for f in found)  # trained short


def test_user_over_recipe_over_default():
    trained = {"vision": {"fps": None, "nframes": 8, "total_pixels": 1000, "max_pixels": None}, "system_prompt": "P", "answer_type": "short"}
    defaults = {"fps": 2.0, "nframes": None, "total_pixels": None, "max_pixels": None, "system_prompt": None, "answer_type": "short"}
    unset = dict.fromkeys(defaults)
    got = recipe.apply(unset, trained, defaults)
    assert (got.values["fps"], got.values["nframes"], got.values["total_pixels"], got.values["system_prompt"]) == (None, 8, 1000, "P")
    assert got.warnings == [] and got.sources["nframes"] == "recipe"
    assert recipe.apply(unset, None, defaults).values["fps"] == 2.0  # no recipe: the default
    same = recipe.apply({**unset, "nframes": 8, "system_prompt": "P"}, trained, defaults)
    assert same.warnings == [] and same.sources["system_prompt"] == "recipe"
    other = recipe.apply({**unset, "system_prompt": "Q", "answer_type": "reasoning"}, trained, defaults)
    assert [w.split(" ", 1)[0] for w in other.warnings] == ["system_prompt", "answer_type"]


def test_wilson_intervals_and_the_summary_line():
    from skillbank.evaluation.metrics import compute_metrics, summary_line
    from skillbank.scoring.stats import wilson

    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    report = compute_metrics(["yes", "no", "yes", "no"], ["yes", "yes", "maybe", "no"])
    assert set(report["ci95"]) == {"accuracy", "precision", "recall"}
    assert report["ci95"]["precision"] == [round(x, 6) for x in wilson(1, 2)]
    assert report["warnings"] and "yes 2, no 2" in report["warnings"][0]
    assert summary_line(report, "accuracy", report["accuracy"]) == ("accuracy 0.5000 on 4 samples, 1 unparseable; TP 1 FP 1 TN 1 FN 1; "
                                                                     "precision 0.5000 [0.0945, 0.9055], recall 0.5000 [0.0945, 0.9055]")
    from skillbank.evaluation.metrics import family_lines

    report = compute_metrics(["yes", "no", "yes"], ["yes", "yes", "yes"])
    report = {"families": {"yes_no": report}}
    assert family_lines(report) == ["family yes_no: accuracy 0.6667 [0.2077, 0.9385] (2/3); TP 2 FP 1 TN 0 FN 0; "
                                    "precision 0.6667 [0.2077, 0.9385], recall 1.0000 [0.3424, 1.0000]"]
