"""GRPO on one machine: `skillbank rl --backend local` on the tiny model (a few real policy steps on CPU),
and the objective checked against cosmos-rl 0.4.7's own code.

cosmos-rl's GRPO trainer module cannot be imported on this CPU stack (it needs torchao); its
`compute_loss` and `GRPO.compute_advantage` are read from the installed package's source with ast
and run as they are, so the comparison is with cosmos-rl's code, not a copy of it.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from helpers import json_out, skillbank
from skillbank.specification.overrides import set_dotted


def _cosmos_function(relative: str, name: str, cls: str | None = None):
    """A function (or method) of the installed cosmos_rl, compiled from its source file."""
    import importlib.util
    import typing

    import numpy as np
    import torch

    root = Path(importlib.util.find_spec("cosmos_rl").submodule_search_locations[0])
    tree = ast.parse((root / relative).read_text(encoding="utf-8"))
    nodes = tree.body
    if cls is not None:
        nodes = next(n for n in nodes if isinstance(n, ast.ClassDef) and n.name == cls).body
    fn = next(n for n in nodes if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace: dict[str, Any] = {"torch": torch, "np": np, **{k: getattr(typing, k) for k in ("Optional", "List", "Tuple", "Dict", "Any")},
                                 "CosmosConfig": Any, "HighAvailabilitylNccl": Any}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(root / relative), "exec"), namespace)  # noqa: S102 - cosmos-rl's own code
    return namespace[name]


def test_group_advantages_are_cosmos_rls():
    from skillbank.training.local.grpo import group_advantages

    compute_advantage = _cosmos_function("dispatcher/algo/grpo.py", "compute_advantage", cls="GRPO")
    cosmos_self = SimpleNamespace(unbiased=False, eps=1e-6)
    rewards = [1.0, 0.0, 0.0, 1.0, 0.9, 0.9, 0.9, 0.9, 0.1, 1.0, 0.0, 0.0]
    ours = group_advantages(rewards, 4)
    theirs = [a for s in range(0, 12, 4) for a in compute_advantage(cosmos_self, rewards[s : s + 4])]
    assert ours == pytest.approx(theirs, abs=1e-5)
    assert ours[4:8] == [0.0] * 4  # a group that scored alike teaches nothing


@pytest.mark.parametrize("kl_beta", [0.0, 0.05])
def test_token_loss_is_cosmos_rls_token_mean_dual_clip_objective(kl_beta):
    """Off-policy ratios (so both clips and the dual-clip bound act) and a KL term: the same values."""
    import torch

    from skillbank.training.local.grpo import grpo_token_loss

    compute_loss = _cosmos_function("policy/trainer/llm_trainer/grpo_trainer.py", "compute_loss")
    torch.manual_seed(0)
    lengths = [3, 5, 1, 4]
    width = max(lengths)
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths], dtype=torch.bool)
    logps = -torch.rand(len(lengths), width) * 3
    old = logps + torch.randn_like(logps) * 0.5  # ratios well outside [0.8, 1.2]
    ref = logps + torch.randn_like(logps) * 0.3
    adv = torch.tensor([1.5, -0.7, -2.0, 0.4])
    pg, kl = grpo_token_loss(logps, old, ref, adv, mask, eps_low=0.2, eps_high=0.28, kl_beta=kl_beta)
    ours = (pg + kl_beta * kl) / mask.sum()

    policy = SimpleNamespace(variant="grpo", aipo_rho=None, epsilon_low=0.2, epsilon_high=0.28, lower_bound_ratio=3.0,
                             off_policy_masking_delta=None, kl_beta=kl_beta, unbiased_kl_estimate=False, loss_type="token-mean",
                             balance_dp_token=False, unbiased_loss_max_tokens=None)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    theirs, _, _ = compute_loss(logps[mask], old[mask], ref[mask] if kl_beta else None, adv.unsqueeze(1).expand_as(logps).clone(),
                                cu, SimpleNamespace(train=SimpleNamespace(train_policy=policy)), mask)
    assert float(ours) == pytest.approx(float(theirs), rel=1e-5)


def _rl_spec(tmp_path: Path, model: Path, data: Path, **over: Any) -> Path:
    spec: dict[str, Any] = {
        "train": {"output_dir": str(tmp_path / "rl"), "train_batch_per_replica": 4, "max_num_steps": 2, "optm_lr": 1e-4,
                  "optm_warmup_steps": 0, "param_dtype": "float32",
                  "ckpt": {"save_freq": 2, "save_mode": "sync"},
                  "train_policy": {"reward_function": {"exact_match": 1.0}, "mini_batch": 2, "kl_beta": 0.01}},
        "rollout": {"n_generation": 2, "max_response_length": 16},
        "policy": {"model_name_or_path": str(model), "model_gradient_checkpointing": False, "parallelism": {"dp_shard_size": 1}},
        "custom": {"answer_type": "short", "vision": {"fps": 2.0},
                   "train_dataset": {"annotation_path": str(data / "train" / "annotations.json"), "media_path": str(data / "train")}},
        "results_dir": str(tmp_path / "results"),
    }
    for key, value in over.items():
        set_dotted(spec, key, value)
    path = tmp_path / "rl.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_grpo_runs_checkpoints_exports_and_resumes(tmp_path, tiny_model_dir, demo_dataset_dir):
    """Two policy steps of 2 prompts x 2 samples on the tiny model, then --resume to step 3: metrics per
    step, cosmos-rl's checkpoint layout, a loadable export, a finished job record. (The start check runs
    once, in the training call; test_rl_start_check tests it.)"""
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    dry = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--dry-run", "--no-start-check", "--json"))
    assert dry["result"]["dry_run"] and dry["result"]["total_steps"] == 2 and dry["job_record"] is None
    assert not (tmp_path / "rl").exists() and not (tmp_path / "results").exists()  # a dry run creates nothing

    out = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--json", timeout=300))
    result = out["result"]
    run = Path(result["run_dir"])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["reward_mean"] <= 1.0 and row["correct"] == row["reward_exact_match"]
        assert row["kl"] >= 0 and row["response_length"] >= 1 and row["samples_per_s"] > 0 and math.isfinite(row["grad_norm"])
    policy = run / "checkpoints" / "step_2" / "policy"
    assert {"model_rank_0.pth", "optimizer_rank_0.pth", "scheduler_rank_0.pth", "extra_info_rank_0.pth", "cosmos_config", ".rank_0_complete"} <= {
        p.name for p in policy.iterdir()}
    export = run / "safetensors" / "step_2"
    assert result["final_safetensors"] == str(export)
    from transformers import AutoModelForImageTextToText

    AutoModelForImageTextToText.from_pretrained(export)  # what evaluate loads
    recipe = json.loads((export / "skillbank_recipe.json").read_text())  # the recipe travels with the GRPO export too
    assert recipe["answer_type"] == "short" and recipe["steps_trained"] == 2 and recipe["system_prompt"]
    assert recipe["vision"]["total_pixels"] and recipe["base_model"] == str(tiny_model_dir)
    job = json.loads(Path(out["job_record"]).read_text())
    assert job["status"] == "succeeded" and job["action"] == "rl" and job["backend"] == "local"

    spec3 = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir, **{"train.max_num_steps": 3})
    resumed = json_out(skillbank("rl", "--spec", str(spec3), "--backend", "local", "--resume", "--no-start-check", "--json", timeout=300))
    assert resumed["result"]["run_dir"] == str(run) and resumed["result"]["last_step"] == 3
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]


def test_a_batch_that_splits_a_prompt_group_is_refused_before_anything_starts(tmp_path, tiny_model_dir, demo_dataset_dir):
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir, **{"train.train_batch_per_replica": 6, "rollout.n_generation": 4,
                                                                   "train.train_policy.mini_batch": 2})
    proc = skillbank("rl", "--spec", str(spec), "--backend", "local")
    assert proc.returncode == 2, proc.stderr
    assert "train.train_batch_per_replica" in proc.stderr and "multiple of rollout.n_generation" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "rl").exists() and not (tmp_path / "results" / "jobs").exists()


def test_dry_run_and_resume_belong_to_the_local_backend(tmp_path, tiny_model_dir, demo_dataset_dir):
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    proc = skillbank("rl", "--spec", str(spec), "--dry-run")
    assert proc.returncode == 2 and "--backend local" in proc.stderr


def test_preflight_of_a_local_rl_run_checks_prompt_groups_not_gpus(tmp_path, tiny_model_dir, demo_dataset_dir):
    """--backend local: no GPU split or redis findings (one process samples its rollouts); the batch must hold
    whole prompt groups. The cosmos-rl backend still wants the spec's 5 GPUs on this machine."""
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    args = ("preflight", "--skill", "tao-finetune-cosmos-reason", "--action", "rl", "--spec", str(spec), "--json")
    local = json_out(skillbank(*args, "--backend", "local", "--no-start-check"))
    assert local["ok"] and not [f for f in local["findings"] if f["check"] in ("spec.parallelism", "env.gpus", "env.redis")]
    cosmos = json.loads(skillbank(*args, "--backend", "cosmos-rl").stdout)
    assert not cosmos["ok"] and "env.gpus" in {f["check"] for f in cosmos["findings"]}  # CI has no GPU


def test_grpo_runs_on_the_qwen3_vl_family(tmp_path, tiny_qwen3_model_dir, demo_dataset_dir):
    """Cosmos-Reason2's family: rollouts repeat each prompt (transformers 4.57's num_return_sequences cannot
    expand Qwen3-VL video inputs) and never sample a vision placeholder (the loss forward would read it
    as a video slot); one policy step and its export."""
    spec = _rl_spec(tmp_path, tiny_qwen3_model_dir, demo_dataset_dir, **{"train.max_num_steps": 1, "train.ckpt.save_freq": 1})
    out = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--json", timeout=300))
    assert out["result"]["last_step"] == 1 and out["result"]["final_safetensors"].endswith("safetensors/step_1")


def test_local_scoring_sums_the_weighted_rewards_cosmos_rl_workers_call():
    """rewards.score (the local backend's) agrees with reward_fns (what grpo_script hands cosmos-rl), sample by sample."""
    from skillbank.training import rewards

    weights = {"exact_match": 0.9, "format": 0.1}
    ref = rewards.reference_json("yes", "Is the ball red? Answer yes or no.")
    responses = ["<think>\nred ball\n</think>\n\n<answer>\nyes\n</answer>", "<answer>no</answer>", "yes"]
    totals, parts = rewards.score(responses, [ref] * 3, weights, answer_type="reasoning", task_type="")
    fns = rewards.reward_fns(weights, {"answer_type": "reasoning", "task_type": ""})
    assert totals == pytest.approx([sum(w * fn(r, ref) for fn, w in fns) for r in responses])
    assert parts["exact_match"] == [1.0, 0.0, 0.0] and parts["format"][0] == 1.0 and totals[0] == pytest.approx(1.0)
