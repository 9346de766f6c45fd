"""`skillbank plan`: meta-device parameter counts of the bundled configs, LoRA, memory per GPU, layouts,
the preflight disk estimate on the same count, and the CLI (offline: HF_HUB_OFFLINE and an empty HF_HOME)."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import SKILL, json_out, skillbank
from skillbank.planning import params

KEYS = ("params", "trainable_params", "tokens_per_sample", "memory_per_gpu_gib", "memory_breakdown_gib", "step_time_s",
        "total_time_h", "checkpoint_gib", "disk_gib", "assumptions", "layouts", "recommendation")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No hub cache and no network: the bundled config.json files answer."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _spec(tmp_path, data_dir, **overrides) -> str:
    from skillbank.specification.overrides import set_dotted

    spec = {
        "policy": {"model_name_or_path": "nvidia/Cosmos-Reason2-8B"},
        "train": {"output_dir": str(tmp_path / "out"), "train_batch_per_replica": 1, "train_policy": {"mini_batch": 1}},
        "custom": {
            "train_dataset": {"annotation_path": str(data_dir / "train" / "annotations.json"), "media_path": str(data_dir / "train")},
            "val_dataset": {"annotation_path": str(data_dir / "val" / "annotations.json"), "media_path": str(data_dir / "val")},
        },
    }
    for key, value in overrides.items():
        set_dotted(spec, key, value)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_bundled_configs_count_on_meta_as_shipped():
    counts = json.loads(params.COUNTS_FILE.read_text())
    assert set(counts) == set(params.bundled_repos()) >= {"nvidia/Cosmos-Reason2-8B", "nvidia/Cosmos-Reason1-7B"}
    for repo in counts:
        config = params.find_config(repo)
        assert config is not None and config.bundled == repo
        count = params.count_on_meta(config)
        assert (count.total, count.largest_unit, count.root) == (counts[repo]["total"], counts[repo]["largest_unit"], counts[repo]["root"])
        assert counts[repo]["signature"] == params.signature(config.data)
    assert round(counts["nvidia/Cosmos-Reason2-8B"]["total"] / 1e9, 2) == 8.77
    assert round(counts["nvidia/Cosmos-Reason1-7B"]["total"] / 1e9, 2) == 8.29


def test_lora_trains_the_adapters_peft_adds():
    from skillbank.specification.train import LoraSpec

    lora = LoraSpec(enable=True, r=8)
    count = params.count_on_meta(params.find_config("nvidia/Cosmos-Reason2-8B"), lora)
    h, kv, inter, layers = 4096, 8 * 128, 12288, 36  # the text decoder: the default target module names are its Linear layers
    per_layer = 8 * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h))
    assert count.trainable == count.lora == layers * per_layer
    assert count.total == 8_767_123_696


def test_preflight_disk_estimate_uses_the_counted_parameters(tmp_path, demo_dataset_dir):
    from skillbank.preflight import env_checks
    from skillbank.preflight.run import run_preflight

    count, how = env_checks.model_params(env_checks.resolve("policy.model_name_or_path", "nvidia/Cosmos-Reason2-8B"))
    assert count == 8_767_123_696 and "meta-device count" in how
    # a config re-saved by another transformers version in the hub cache (no weights) has the bundled one's shape
    config = json.loads(params.bundled_config("nvidia/Cosmos-Reason2-8B").read_text())
    snapshot = tmp_path / "hf-home" / "hub" / "models--nvidia--Cosmos-Reason2-8B" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**config, "transformers_version": "4.99.0", "dtype": "float16"}))
    count, how = params.model_params("nvidia/Cosmos-Reason2-8B")
    assert count == 8_767_123_696 and "Hugging Face cache" in how
    report = run_preflight(skill=SKILL, action="train", spec_path=_spec(tmp_path, demo_dataset_dir), only=["data"])
    disk = report.stats["plan"]["disk"]
    assert disk["params"] == 8_767_123_696 and "meta-device count" in disk["params_from"]


def test_plan_memory_parts_layouts_and_recommendation(tmp_path, demo_dataset_dir):
    from skillbank.planning.plan import Inputs, build_plan
    from skillbank.specification.io import load_spec
    from skillbank.specification.registry import spec_model

    def plan(gpus: int, **overrides):
        path = _spec(tmp_path, demo_dataset_dir, **overrides)
        return build_plan(Inputs(load_spec(path, spec_model(SKILL, "train")), path, SKILL, gpus_per_node=gpus))

    eight = plan(8)
    assert all(k in eight for k in KEYS)
    assert eight["params"] == eight["trainable_params"] == 8_767_123_696
    parts = eight["memory_breakdown_gib"]
    assert set(parts) == {"weights", "gathered_weights", "gradients", "optimizer", "activations", "logits"}
    assert abs(sum(parts.values()) - eight["memory_per_gpu_gib"]) < 0.05
    # the demo records state no clip length: every sample fills the spec's vision budget, and the plan says so
    assert eight["tokens_per_sample"]["source"] == "the spec's vision budget (VisionBudget)"
    assert any("state no clip length" in a for a in eight["assumptions"])
    assert [r["nodes"] for r in eight["layouts"]] == [1, 2, 4]
    assert eight["steps"]["total_steps"] == eight["total_steps"] and eight["steps"]["global_batch"] == eight["global_batch"] == 8
    assert eight["layouts"][0]["global_batch"] * 4 == eight["layouts"][2]["global_batch"]
    assert eight["recommendation"]["reason"] and eight["total_time_h"] is not None and eight["disk_gib"] >= eight["checkpoint_gib"] > 0
    # more shards: less weight / optimizer memory per GPU; checkpointing: fewer activations
    two = plan(2)
    assert two["memory_breakdown_gib"]["optimizer"] == pytest.approx(4 * parts["optimizer"], rel=0.01)
    assert two["memory_per_gpu_gib"] > eight["memory_per_gpu_gib"]
    assert eight["activations_gib"]["with_checkpointing"] < eight["activations_gib"]["without_checkpointing"]
    lora = plan(8, **{"policy.lora.enable": True, "policy.model_gradient_checkpointing": False})
    assert lora["trainable_params"] == lora["lora_params"] < lora["params"] / 100
    assert lora["memory_breakdown_gib"]["optimizer"] < 0.1
    assert lora["memory_breakdown_gib"]["activations"] == eight["activations_gib"]["without_checkpointing"]
    assert lora["checkpoint_gib"] < eight["checkpoint_gib"]
    # an AutoML study: each of the trials keeps every epoch's checkpoint
    path = _spec(tmp_path, demo_dataset_dir, **{"train.epoch": 2, "train.ckpt.max_keep": 1})
    study = build_plan(Inputs(load_spec(path, spec_model(SKILL, "train")), path, SKILL, gpus_per_node=8, trials=5))
    assert study["disk"]["trials"] == 5 and study["disk"]["kept"] == 2
    assert study["disk_gib"] == pytest.approx(study["checkpoint_gib"] * 2 * 5, rel=0.01)


def test_cli_json_and_input_errors(tmp_path, demo_dataset_dir):
    spec = _spec(tmp_path, demo_dataset_dir, **{"policy.model_name_or_path": "nvidia/Cosmos-Reason1-7B"})
    env = {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1"}
    proc = skillbank("plan", "--spec", spec, "--gpu", "h200", "--nodes", "2", "--decode-sample", "3", "--json", env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json_out(proc)
    tokens = out["tokens_per_sample"]  # measured by preflight's scan of the decoded clips (stats.tokens_per_sample)
    assert tokens["source"].startswith("preflight") and tokens["samples"] == 3 and tokens["memory_at"] == tokens["max"]
    assert all(k in out for k in KEYS) and round(out["params"] / 1e9, 2) == 8.29
    assert out["nodes"] == 2 and out["gpu"] == "h200" and any("MFU 0.3" in a for a in out["assumptions"])
    assert skillbank("plan", "--json", env=env).returncode == 2  # --spec is required
    bad = skillbank("plan", "--spec", spec, "--gpu", "v100", "--json", env=env)
    assert bad.returncode == 2 and json_out(bad)["error"]["where"] == "--gpu"
    missing = skillbank("plan", "--spec", str(tmp_path / "nope.yaml"), "--json", env=env)
    assert missing.returncode == 2 and not missing.stderr.count("Traceback")
