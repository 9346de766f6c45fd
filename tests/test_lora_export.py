"""A CPU rehearsal of a LoRA run exports what cosmos-rl exports, and every reader takes it.

One local LoRA run on the tiny Qwen2.5-VL (2 steps): its safetensors/step_2 is the adapter folder
cosmos-rl 0.4.7's LLMTrainer.export_safetensors writes for policy.lora (adapter_model.safetensors with
the trained weights only, adapter_config.json = cosmos-rl's own LoraConfig dump of the same spec + the
base model + peft_type, the processor, the base model's config files); `evaluate` loads that folder
with no LoRA setting (the base from the adapter's config) and answers exactly as the merged copy
`skillbank export` makes of it; training from the adapter is refused with the merge command.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import local_train_spec
from skillbank.cli import main
from skillbank.runs import layout
from test_cosmos_rl_backend import built, cosmos  # noqa: F401 - cosmos: the module fixture
from test_evaluate import write_toml

LORA = {"enable": True, "r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


@pytest.fixture(scope="module")
def lora_run(tiny_model_dir, demo_dataset_dir, tmp_path_factory):
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    out = tmp_path_factory.mktemp("lora") / "out"
    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, out, {
        "train.max_num_steps": 2, "train.optm_lr": 1e-2, "train.ckpt.save_freq": 100, "validation.enable": False, "policy.lora": LORA,
    }, dp_shard_size=1))
    result = train_local(spec, log=lambda line: None)
    return spec, layout.safetensors_dir(Path(result["run_dir"]), 2)


def test_the_local_lora_export_is_the_adapter_cosmos_rl_writes(cosmos, lora_run, tiny_model_dir, tmp_path):  # noqa: F811
    from safetensors.torch import load_file

    spec, folder = lora_run
    cfg = cosmos.config.Config.from_dict(copy.deepcopy(built(spec, tmp_path, model=str(tiny_model_dir)).data))
    theirs = {**cfg.policy.lora.model_dump(mode="json"), "base_model_name_or_path": str(tiny_model_dir), "peft_type": "LORA"}
    assert json.loads((folder / "adapter_config.json").read_text()) == theirs  # what cosmos-rl's export writes for this spec
    names = {p.name for p in folder.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "config.json", "generation_config.json", "preprocessor_config.json",
            "tokenizer_config.json", "skillbank_recipe.json"} <= names and "model.safetensors" not in names
    weights = load_file(folder / "adapter_model.safetensors")
    layers = json.loads((Path(tiny_model_dir) / "config.json").read_text())
    layers = layers.get("text_config", layers).get("num_hidden_layers") or layers["num_hidden_layers"]
    assert len(weights) == 2 * 2 * layers  # lora_A and lora_B of q_proj and v_proj in every decoder layer, nothing else
    assert json.loads((folder / "skillbank_recipe.json").read_text())["base_model"] == str(tiny_model_dir)


def test_evaluate_reads_the_adapter_and_its_merged_copy_alike(lora_run, demo_dataset_dir, tmp_path, capsys):
    _, folder = lora_run
    merged = tmp_path / "merged"
    assert main(["export", "--source", str(folder), "--out", str(merged), "--dtype", "float32", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["manifest"]["source_kind"] == "lora-adapter" and doc["manifest"]["merged_lora"] is True
    answers = {}
    for name, model in (("adapter", folder), ("merged", merged)):
        data = demo_dataset_dir / "val"
        toml = write_toml(tmp_path / f"{name}.toml", results_dir=str(tmp_path / name), num_gpus=0, model={"model_name": str(model)},
                          dataset={"annotation_path": str(data / "annotations.json")}, evaluation={"batch_size": 3, "limit": 3},
                          generation={"max_tokens": 4})
        assert main(["evaluate", "--config", str(toml), "--quiet", "--json"]) == 0, capsys.readouterr()
        capsys.readouterr()
        answers[name] = [r["response"] for r in json.loads((tmp_path / name / "results.json").read_text())]
    assert len(answers["adapter"]) == 3 and answers["adapter"] == answers["merged"]


def test_training_from_an_adapter_is_refused_with_the_merge_command(lora_run, tiny_model_dir, demo_dataset_dir, tmp_path, capsys):
    import yaml

    _, folder = lora_run
    spec = tmp_path / "train.yaml"
    spec.write_text(yaml.safe_dump(local_train_spec(Path(folder), demo_dataset_dir, tmp_path / "out", dp_shard_size=1)))
    code = main(["preflight", "--skill", "tao-finetune-cosmos-reason", "--action", "train", "--spec", str(spec), "--backend", "local", "--json"])
    report = json.loads(capsys.readouterr().out)
    problems = [f["message"] for f in report["findings"] if f["check"] == "env.model"]
    assert code != 0 and problems and "is a LoRA adapter" in problems[0] and f"skillbank export --source {folder}" in problems[0], report


def test_a_deft_round_after_a_lora_round_trains_from_the_merged_adapter(lora_run, tmp_path):
    from types import SimpleNamespace

    from skillbank import modelref
    from skillbank.deft.loop import Loop

    spec, folder = lora_run
    said: list[str] = []
    start = Loop._merged(SimpleNamespace(train_spec=spec, log=said.append), str(folder), tmp_path / "start", 2)
    assert not modelref.is_adapter(start) and (Path(start) / "config.json").is_file() and any(Path(start).glob("*.safetensors"))
    assert said == [f"round 2: merged the LoRA adapter {folder} into {tmp_path / 'start'} (training starts from a whole model)"]
