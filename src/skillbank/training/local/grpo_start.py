"""The GRPO start check: before `skillbank rl` (or `skillbank preflight --action rl`) commits GPUs, sample a
few prompts from the start model, rollout.n_generation samples each, with the local GRPO code
(training.local.grpo.GrpoSampler: the same chat, frames, sampling and rewards as a run) and count the
groups whose rewards are all equal. Such a group has all-zero advantages: GRPO learns nothing from it.
When every sampled group is flat, the run would learn nothing from the start (an answer format the
rewards cannot read, a model that always answers the same, a task it always or never gets right).

It loads the model (torch), so it runs only when the start is a local folder and torch is installed;
`--no-start-check` skips it. Heavy imports live inside the functions.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

START_CHECK_GROUPS = 4  # prompts sampled (each one group of rollout.n_generation samples)
CPU_MAX_PARAMS = 2e9  # larger models are sampled only where a GPU is visible (a CPU would take many minutes)


def skipped_because(spec: Any, model: Any) -> str | None:
    """Why the start check cannot run here (None: it can): no local model folder, no torch, no prompts."""
    if model is None or getattr(model, "where", None) != "local" or not Path(str(model.path)).is_dir():
        return "the start model is not a local folder (it is sampled only where its weights are)"
    if not (Path(str(model.path)) / "tokenizer_config.json").is_file():
        return "the start model folder holds no tokenizer (tokenizer_config.json) to sample with"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed here"
    path = spec.custom.train_dataset.annotation_path
    if not path or not Path(path).expanduser().is_file():
        return "custom.train_dataset.annotation_path is not a file"
    from skillbank.models.params import model_params

    params, _ = model_params(model.value)
    if params and params > CPU_MAX_PARAMS:
        import torch

        if not torch.cuda.is_available():
            return (f"a {params / 1e9:.1f}B model on CPU would take too long; it runs where a GPU is visible "
                    "(or pass --no-start-check)")
    return None


def start_check(spec: Any, model_path: str, *, groups: int = START_CHECK_GROUPS) -> dict[str, Any]:
    """Sample `groups` prompts (the first of epoch 0's seeded order, as the run's first step takes them)
    n_generation times each; returns {groups, samples_per_group, flat_groups, flat_share, reward_mean,
    seconds}."""
    from skillbank.training.local.data import epoch_order
    from skillbank.training.local.grpo import GrpoSampler, flat_groups

    started = time.perf_counter()
    sampler = GrpoSampler(spec, model_path=model_path)
    order = epoch_order(len(sampler.records), spec.train.train_policy.dataloader_seed, 0)
    indices = order[: max(1, min(groups, len(order)))]
    _, _, texts = sampler.rollouts(indices)
    totals, _ = sampler.score(indices, texts)
    g = spec.rollout.n_generation
    flat = flat_groups(totals, g)
    return {"groups": len(indices), "samples_per_group": g, "flat_groups": flat, "flat_share": round(flat / len(indices), 4),
            "reward_mean": round(sum(totals) / len(totals), 4), "seconds": round(time.perf_counter() - started, 2)}


def finding(result: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fix) when every sampled group's rewards are equal: nothing to learn."""
    if result["flat_groups"] < result["groups"]:
        return None
    return (f"start check: {result['flat_groups']} of {result['groups']} sampled prompt groups ({result['flat_share']:.0%}; "
            f"{result['samples_per_group']} samples each) scored all alike (mean reward {result['reward_mean']:g}): their GRPO "
            "advantages are all 0 and the run learns nothing from them",
            "start from a checkpoint that answers the task in the format the rewards read (SFT first), raise "
            "train.train_policy.temperature for varied samples, or check custom.answer_type / custom.task_type / the rewards")
