"""Preflight of the rl action (GRPO): one failing example per check, on tiny files written here
(no network, no GPU; the env group, which needs the training machine, is left out with only=)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillbank.preflight.run import run_preflight
from skillbank.specification.overrides import set_dotted

SKILL = "tao-finetune-cosmos-reason"
CHECKS = ("spec", "data")  # env (GPUs, redis, token) is the node's


def record(i: int, answer: str = "yes", question: str = "Is clip {i} red?") -> dict:
    return {"id": f"clip-{i}", "video": f"videos/c{i % 2}.mp4", "video_fps": 4.0, "duration": 2.0,
            "conversations": [{"from": "human", "value": "<video>\n" + question.format(i=i)}, {"from": "gpt", "value": answer}]}


@pytest.fixture
def bank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    media = tmp_path / "media" / "videos"
    media.mkdir(parents=True)
    for i in range(2):
        (media / f"c{i}.mp4").write_bytes(b"\0")
    export = tmp_path / "sft" / "20260101" / "safetensors" / "step_10"
    export.mkdir(parents=True)
    (export / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (export / "model.safetensors").write_bytes(b"\0" * 1024)

    def spec(records=None, **keys) -> dict:
        ann = tmp_path / "train.json"
        ann.write_text(json.dumps(records if records is not None else [record(i) for i in range(8)]))
        data = {"policy": {"model_name_or_path": str(export)},
                "custom": {"train_dataset": {"annotation_path": str(ann), "media_path": str(tmp_path / "media")}}}
        for key, value in keys.items():
            set_dotted(data, key.replace("__", "."), value)
        return data

    return spec


def rl(spec: dict, **kw):
    kw.setdefault("only", CHECKS)
    return run_preflight(skill=SKILL, action="rl", spec=spec, **kw)


def found(report, check: str, severity: str | None = None) -> list:
    out = [f for f in report.findings if f.check == check and (severity is None or f.severity == severity)]
    assert out, f"no {check} finding in {[(f.check, f.severity, f.message) for f in report.findings]}"
    return out


def test_a_clean_rl_spec_passes(bank):
    report = rl(bank(), gpus_per_node=8, nodes=1)
    assert report.findings == [], report.findings
    assert report.stats["records"] == {"train": 8}
    assert report.stats["rl_plan"] == {"prompts": 8, "samples_per_epoch": 64, "steps_per_epoch": 2}


def test_gpus_for_policy_plus_rollout(bank):
    f = found(rl(bank(), gpus_per_node=4), "spec.parallelism", "error")[0]
    assert "policy 4" in f.message and "rollout 4" in f.message and "= 8 GPUs" in f.message
    small = bank(policy__parallelism__dp_shard_size=1, rollout__num_gpus=2, rollout__parallelism__tp_size=1)
    assert "at least 4" in found(rl(small, gpus_per_node=3), "spec.parallelism", "warning")[0].message


def test_rollout_tp_must_divide_rollout_gpus(bank):
    report = rl(bank(rollout__num_gpus=3))
    assert any(f.where == "rollout.num_gpus" and "multiple of rollout.parallelism.tp_size" in f.message for f in found(report, "spec.schema"))


def test_every_record_has_a_reference_a_reward_can_check(bank):
    records = [record(0), record(1, answer=""), record(2, answer="  ")] + [record(i) for i in range(3, 8)]
    f = found(rl(bank(records)), "annotations.reference", "error")[0]
    assert "2 record(s)" in f.message and "#1, #2" in f.message
    mcq = [record(i, answer="B" if i else "E", question="Which? A) red B) blue") for i in range(8)]
    f = found(rl(bank(mcq, custom__task_type="mcq")), "annotations.reference", "error")[0]
    assert "exact_match" in f.message and "#0" in f.message and "#1" not in f.message
    # the format reward alone reads no reference
    assert not [x for x in rl(bank(records, train__train_policy__reward_function={"format": 1.0})).findings if x.check == "annotations.reference"]


def test_start_is_an_sft_checkpoint(bank):
    assert "empty" in found(rl(bank(policy__model_name_or_path="")), "spec.model", "error")[0].message
    base = found(rl(bank(policy__model_name_or_path="hf_model://nvidia/Cosmos-Reason2-8B")), "spec.model", "warning")[0]
    assert "base model" in base.message and base.where == "policy.model_name_or_path"


def test_reasoning_format_matches_the_rewards(bank):
    no_tags = bank(custom__system_prompt="Answer briefly.")
    assert "format reward" in found(rl(no_tags), "spec.reward_format", "error")[0].message
    choice = bank(custom__system_prompt="Think in <think></think>, then answer.", train__train_policy__reward_function={"single_choice": 1.0})
    assert "single_choice" in found(rl(choice), "spec.reward_format", "warning")[0].message
    # format needs answer_type reasoning: the spec model's own rule
    short = bank(custom__answer_type="short")
    assert any("format reward" in f.message for f in found(rl(short), "spec.schema"))


def test_too_few_samples_for_one_policy_step(bank):
    f = found(rl(bank([record(i) for i in range(2)], rollout__n_generation=4)), "spec.steps_per_rank", "error")[0]
    assert "2 prompts x rollout.n_generation 4 = 8 samples" in f.message


def test_sft_spec_is_no_rl_spec(bank):
    """The rl and train actions keep their own type rules: an SFT spec checked as rl fails on type."""
    report = rl(bank(train__train_policy__type="sft"))
    assert any(f.where == "train.train_policy.type" for f in found(report, "spec.schema"))


def test_preflight_cli_on_an_rl_spec(bank, tmp_path):
    """The command's text and JSON output for the rl action (its plan is stats.rl_plan, not train's plan)."""
    import yaml

    from helpers import skillbank

    spec = tmp_path / "rl.yaml"
    spec.write_text(yaml.safe_dump(bank()))
    text = skillbank("preflight", "--skill", SKILL, "--action", "rl", "--spec", str(spec), "--gpus-per-node", "8", "--only", "spec,data")
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr
    out = json.loads(skillbank("preflight", "--skill", SKILL, "--action", "rl", "--spec", str(spec), "--only", "spec,data", "--json").stdout)
    assert out["stats"]["rl_plan"]["samples_per_epoch"] == 64
