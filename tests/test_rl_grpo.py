"""The rl action's GRPO TOML (judged by cosmos-rl's own Config) and its dataset script (prompts,
references, rewards). Only the `cosmos` fixture imports cosmos_rl (slow and noisy, once per module)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from skillbank.specification.rl import RlSpec
from skillbank.training.cosmos_rl.family import FAMILIES
from skillbank.training.cosmos_rl.grpo import GRPO_REASONING_PROMPT, build_grpo_toml
from skillbank.training.cosmos_rl.grpo_script import GrpoPromptDataset, exact_match_reward, reference_text, reward_fns
from skillbank.training.cosmos_rl.toml import write_toml


@pytest.fixture(scope="module")
def cosmos():
    from cosmos_rl.dispatcher.algo import reward
    from cosmos_rl.policy import config

    return types.SimpleNamespace(config=config, reward=reward)


def write_records(path: Path, answers: list[str], question: str = "Is the ball red?") -> Path:
    records = [
        {"id": f"r{i}", "video": f"clips/v{i}.mp4", "video_fps": 8,
         "conversations": [{"from": "human", "value": f"<video>\n{question}"}, {"from": "gpt", "value": a}]}
        for i, a in enumerate(answers)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def make_spec(tmp_path: Path, **sections) -> RlSpec:
    ann = write_records(tmp_path / "data" / "annotations.json", ["yes", "no"])
    data = {"policy": {"model_name_or_path": str(tmp_path / "sft" / "safetensors" / "step_10")},
            "custom": {"train_dataset": {"annotation_path": str(ann)}}}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return RlSpec.model_validate(data)


def build(spec: RlSpec, tmp_path: Path):
    return build_grpo_toml(spec, model=spec.policy.model_name_or_path, family=FAMILIES["qwen3_vl"], run_dir=tmp_path / "run", run_id="20260101-000000")


def _unread(ours: dict, theirs: dict, path: str = "") -> list[str]:
    """Keys we write that cosmos-rl's parsed config does not hold with our value (it ignores unknown keys)."""
    out = []
    for key, value in ours.items():
        if key not in theirs:
            out.append(f"{path}{key} (unknown to cosmos-rl)")
        elif isinstance(value, dict) and isinstance(theirs[key], dict):
            out += _unread(value, theirs[key], f"{path}{key}.")
        elif theirs[key] != value and not (isinstance(value, list) and list(theirs[key]) == value):
            out.append(f"{path}{key}: ours {value!r}, cosmos-rl {theirs[key]!r}")
    return out


@pytest.mark.parametrize("sections", [
    {},
    {"train": {"train_policy": {"reward_function": {"single_choice": 1.0}, "kl_beta": 0.0}}, "custom": {"answer_type": "short"}},
    {"rollout": {"num_gpus": 2, "parallelism": {"tp_size": 1}, "n_generation": 4}, "policy": {"parallelism": {"dp_shard_size": 2}}},
])
def test_rl_toml_passes_cosmos_config_with_every_key_read(cosmos, tmp_path, sections):
    spec = make_spec(tmp_path, **sections)
    out = build(spec, tmp_path)
    data = copy.deepcopy(out.data)
    cfg = cosmos.config.Config.from_dict(copy.deepcopy(out.data))
    assert out.data == data
    assert isinstance(cfg.train.train_policy, cosmos.config.GrpoConfig) and cfg.train.train_policy.type == "grpo"
    assert cfg.train.train_policy.reward_function == spec.train.train_policy.reward_function
    assert cfg.train.train_policy.kl_beta == spec.train.train_policy.kl_beta
    assert cfg.rollout.n_generation == spec.rollout.n_generation
    assert cfg.rollout.parallelism.tp_size == spec.rollout.parallelism.tp_size
    assert cfg.rollout.parallelism.n_init_replicas * cfg.rollout.parallelism.tp_size == spec.rollout.num_gpus
    assert cfg.policy.parallelism.tp_size == 1 and cfg.policy.parallelism.dp_shard_size == spec.policy.parallelism.dp_shard_size
    assert cfg.train.optm_lr == 1e-6 and cfg.train.compile is False and cfg.train.ckpt.enable_checkpoint is True
    assert cfg.train.output_dir == str(tmp_path / "run")  # the timestamp is fixed: no folder appended
    theirs = cfg.model_dump(mode="json")
    ours = {k: v for k, v in out.data.items() if k != "custom"}
    # cosmos-rl normalises the weights dict itself; every other key we write must be one it reads, unchanged
    assert _unread(ours, theirs) == []
    assert out.gpus == spec.gpus


def test_surprising_cosmos_defaults_are_written(tmp_path):
    data = build(make_spec(tmp_path), tmp_path).data
    policy = data["train"]["train_policy"]
    assert policy["type"] == "grpo" and policy["kl_beta"] == 0.01  # cosmos-rl: 0.0, no reference model
    assert data["rollout"]["n_generation"] == 8  # cosmos-rl: 16
    assert data["policy"]["parallelism"]["tp_size"] == 1  # cosmos-rl: 2
    assert data["rollout"]["parallelism"] == {"tp_size": 2, "pp_size": 1, "dp_shard_size": 1, "n_init_replicas": 2}
    assert data["train"]["optm_warmup_steps"] == 0.03 and data["train"]["compile"] is False
    assert data["custom"]["system_prompt"] == GRPO_REASONING_PROMPT and data["custom"]["answer_type"] == "reasoning"


def test_spec_rules(tmp_path):
    with pytest.raises(Exception, match="multiple of rollout.parallelism.tp_size"):
        make_spec(tmp_path, rollout={"num_gpus": 3, "parallelism": {"tp_size": 2}})
    with pytest.raises(Exception, match="format reward"):
        make_spec(tmp_path, custom={"answer_type": "short"})
    with pytest.raises(Exception, match="positive sum"):
        make_spec(tmp_path, train={"train_policy": {"reward_function": {"exact_match": 0.0}}})
    with pytest.raises(Exception, match="reward_function"):
        make_spec(tmp_path, train={"train_policy": {"reward_function": {"bleu": 1.0}}})
    with pytest.raises(Exception, match="grpo"):
        make_spec(tmp_path, train={"train_policy": {"type": "sft"}})
    # cosmos-rl's GRPO worker asserts batch % (dp ranks x mini_batch) == 0 on the GPUs: 36 % (4 x 2) != 0
    with pytest.raises(Exception, match=r"multiple of policy.parallelism.dp_shard_size \(4\) x train.train_policy.mini_batch \(2\) = 8"):
        make_spec(tmp_path, train={"train_batch_per_replica": 36})


def test_sft_rule_is_untouched():
    from skillbank.specification.train import TrainSpec

    with pytest.raises(Exception, match="sft"):
        TrainSpec.model_validate({"train": {"train_policy": {"type": "grpo"}}})


def test_prompts_stop_before_the_answer_and_carry_the_reference(tmp_path):
    spec = make_spec(tmp_path)
    custom = build(spec, tmp_path).data["custom"]
    dataset = GrpoPromptDataset.from_custom(custom)
    chat = dataset[0]
    assert [m["role"] for m in chat] == ["system", "user"]  # no assistant turn: the policy writes it
    assert chat[1]["content"][0]["type"] == "video" and chat[1]["content"][0]["fps"] == 2.0
    assert chat[1]["content"][1]["text"] == "Is the ball red?"
    assert reference_text(dataset.get_reference_answer(1)) == ("no", "Is the ball red?")


@pytest.mark.parametrize("response, answer_type, task_type, gt, question, reward", [
    ("<think>\nred\n</think>\n\n<answer>\nYes.\n</answer>", "reasoning", "", "yes", "", 1.0),
    ("<think>\nred\n</think>\n\nYes, it is.", "reasoning", "", "yes", "", 1.0),  # Reason2's format: after </think>
    ("<think>\nred\n</think>\n\n<answer>no</answer>", "reasoning", "", "yes", "", 0.0),
    ("Yes.", "reasoning", "", "yes", "", 0.0),  # reasoning with no extractable answer
    ("Yes.", "short", "", "yes", "", 1.0),
    ("<answer>B</answer>", "reasoning", "mcq", "B", "Which? A) red B) blue", 1.0),
    ("<answer>blue</answer>", "reasoning", "mcq", "B", "Which? A) red B) blue", 1.0),  # the option's text
    ("<answer>A</answer>", "reasoning", "mcq", "B", "Which? A) red B) blue", 0.0),
])
def test_exact_match_reward_is_the_evaluators_rule(response, answer_type, task_type, gt, question, reward):
    from skillbank.scoring.answers import score_rows

    reference = json.dumps({"gt": gt, "question": question})
    assert exact_match_reward(response, reference, answer_type=answer_type, task_type=task_type) == reward
    evaluated = score_rows([{"question": question, "gt": gt, "response": response}], task_type, answer_type)[0]
    assert evaluated.correct == (reward == 1.0)  # the same verdict as `skillbank evaluate`


def test_reward_fns_call_cosmos_rewards_with_weights(cosmos):
    fns = reward_fns({"exact_match": 0.9, "format": 0.1, "single_choice": 0.5}, {"answer_type": "reasoning", "task_type": ""})
    assert [w for _, w in fns] == [0.9, 0.1, 0.5]
    assert [f.__name__ for f, _ in fns] == ["exact_match_reward", "format_reward", "single_choice_reward"]
    reference = json.dumps({"gt": "yes", "question": "Is it?"})
    good = "<think>\nred ball\n</think>\n\n<answer>yes</answer>"
    # the keyword arguments cosmos-rl's Reward passes to each callable
    kwargs = dict(prompt="", data_packer=None, config=None, tokenizer=None)
    assert [f(good, reference, **kwargs) for f, _ in fns] == [1.0, 1.0, 1.0]
    assert [f("yes", reference, **kwargs) for f, _ in fns] == [0.0, 0.0, 1.0]
    assert cosmos.reward.format_reward_fn(good, "yes") == 1.0  # the callable is cosmos-rl's own
    # cosmos-rl's Reward combines our (callable, weight) pairs: 0.9 + 0.1 + 0.5
    rw = cosmos.reward.Reward(types.SimpleNamespace(train=types.SimpleNamespace(train_policy=types.SimpleNamespace(
        filter_reward_metric=[], reward_function={}, group_reward_calculation=False))), None, explicit_reward_fn=fns)
    total, _, _ = rw.compute_reward([good, "yes"], reference)
    assert total == pytest.approx([1.5, 0.5])


def test_unknown_reward_name_fails():
    with pytest.raises(ValueError, match="unknown reward"):
        reward_fns({"bleu": 1.0}, {})


def test_script_check_runs_by_path(tmp_path):
    """The script as cosmos-rl runs it (by path), with --skillbank-check: no cosmos-rl import."""
    spec = make_spec(tmp_path)
    path = write_toml(tmp_path / "rl.toml", build(spec, tmp_path).data)
    script = Path(sys.modules["skillbank.training.cosmos_rl.grpo_script"].__file__)
    proc = subprocess.run([sys.executable, str(script), "--config", str(path), "--skillbank-check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["prompts"] == 2 and out["family"] == "qwen3_vl"
    assert out["rewards_of_reference"] == {"exact_match_reward": 1.0}


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_qwen3_model_dir"])
def test_prompts_go_through_the_cosmos_rollout_packer(cosmos, tmp_path, monkeypatch, request, model_fixture):
    """Our GRPO prompt, our TOML's custom table, cosmos-rl's packer of the family, a tiny model: the
    rollout input vLLM gets holds the decoded video and a prompt that ends where the answer starts."""
    import numpy as np
    import qwen_vl_utils.vision_process as vp

    from skillbank.assets import demo_dataset as demo
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.script import family, packer_class
    from test_cosmos_rl_backend import _pyav_reader  # PyAV in place of the torchvision reader this venv lacks

    monkeypatch.setitem(vp.VIDEO_READER_BACKENDS, "torchvision", _pyav_reader)
    frames = np.zeros((16, 64, 64, 3), dtype=np.uint8)
    (tmp_path / "data" / "clips").mkdir(parents=True)
    demo.write_mp4(tmp_path / "data" / "clips" / "v0.mp4", frames, fps=8)
    model = str(request.getfixturevalue(model_fixture))
    spec = make_spec(tmp_path, policy={"model_name_or_path": model}, custom={"vision": {"fps": 4.0, "total_pixels": 64 * 64 * 16}})
    data = build_grpo_toml(spec, model=model, family=family_of(model), run_dir=tmp_path / "run", run_id="1").data
    cfg = cosmos.config.Config.from_dict(copy.deepcopy(data))
    dataset = GrpoPromptDataset.from_custom(cfg.custom)
    packer = packer_class(family(cfg.custom))()
    packer.setup(cfg)
    item = packer.get_rollout_input(dataset[0])
    assert item["multi_modal_data"]["video"], item.keys()
    assert "Is the ball red?" in item["prompt"] and item["prompt"].rstrip().endswith("assistant")
    assert "<answer>" in item["prompt"]  # the reasoning prompt asks for the format the format reward checks
