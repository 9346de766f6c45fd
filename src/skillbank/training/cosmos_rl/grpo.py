"""RlSpec -> cosmos-rl's TOML for GRPO.

The shared sections come from the SFT builder (skillbank.training.cosmos_rl.toml: logging, the
warm-up translation, dataset paths); what differs is written here. cosmos-rl's surprising defaults
are all explicit: train_policy.type "grpo" (never inferred), policy tp_size, kl_beta, n_generation,
the warm-up, compile, enable_checkpoint, the rollout engine's tensor parallelism and replicas,
validation off. The reward names go to `train_policy.reward_function` for the record; the dataset
script (grpo_script.py) hands cosmos-rl the callables, which it uses instead of the names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.specification.evaluate import SHORT_SYSTEM_PROMPT
from skillbank.specification.io import drop_none
from skillbank.specification.rl import RlSpec
from skillbank.training.cosmos_rl.family import ModelFamily
from skillbank.training.cosmos_rl.toml import _dataset_paths, _logging, _warmup, vision_table

# The default prompt of answer_type reasoning: the response shape cosmos-rl's format reward accepts
# (Cosmos-Reason1's reasoning prompt, which every family follows when asked).
GRPO_REASONING_PROMPT = (
    "Answer the question with provided options in the following format:\n<think>\nyour reasoning\n</think>\n\n"
    "<answer>\nyour answer\n</answer>."
)


@dataclass
class GrpoToml:
    """The TOML as a dict, plus the GPU counts and notes a plan shows."""

    data: dict[str, Any]
    policy_gpus: int
    rollout_gpus: int
    notes: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.policy_gpus + self.rollout_gpus


def system_prompt(spec: RlSpec) -> str:
    """custom.system_prompt, or the answer type's default when null."""
    if spec.custom.system_prompt is not None:
        return spec.custom.system_prompt
    return GRPO_REASONING_PROMPT if spec.custom.answer_type == "reasoning" else SHORT_SYSTEM_PROMPT


def build_grpo_toml(spec: RlSpec, *, model: str, family: ModelFamily, run_dir: Path, run_id: str, resume: bool = False) -> GrpoToml:
    """The cosmos-rl config of one GRPO run. `model` is what cosmos-rl loads (a local path or an id)."""
    notes: list[str] = []
    data: dict[str, Any] = {
        "redis": spec.redis,
        "train": _train(spec, run_dir=run_dir, run_id=run_id, resume=resume),
        "rollout": _rollout(spec),
        "policy": _policy(spec, model),
        "validation": {"enable": False},  # cosmos-rl's GRPO validation needs its own rollouts; not offered yet
        "logging": _logging(spec, notes),  # type: ignore[arg-type]  # the same section shape as SFT's
        "custom": _custom(spec, family, notes),
    }
    return GrpoToml(drop_none(data), spec.policy_gpus, spec.rollout.num_gpus, notes)


def _train(spec: RlSpec, *, run_dir: Path, run_id: str, resume: bool) -> dict[str, Any]:
    train = spec.train.model_dump(mode="json")
    train["output_dir"] = str(run_dir)  # with the timestamp fixed, cosmos-rl does not append one
    train["timestamp"] = run_id
    train["resume"] = resume
    train["compile"] = False  # cosmos-rl defaults to torch.compile; the published Reason recipes turn it off
    train["optm_warmup_steps"] = _warmup(spec.train.optm_warmup_steps)
    policy = train["train_policy"]
    policy["type"] = "grpo"  # explicit: cosmos-rl infers a missing type from other keys
    policy["reward_function"] = dict(spec.train.train_policy.reward_function)
    return train


def _rollout(spec: RlSpec) -> dict[str, Any]:
    rollout = spec.rollout.model_dump(mode="json")
    num_gpus = rollout.pop("num_gpus")
    tp = rollout["parallelism"]["tp_size"]
    # cosmos-rl's parallelism defaults to tp 2; a rollout replica takes tp_size * pp_size GPUs
    rollout["parallelism"] = {"tp_size": tp, "pp_size": 1, "dp_shard_size": 1, "n_init_replicas": num_gpus // tp}
    return rollout


def _policy(spec: RlSpec, model: str) -> dict[str, Any]:
    policy = spec.policy.model_dump(mode="json")
    policy["model_name_or_path"] = model
    par = policy["parallelism"]
    par.update(n_init_replicas=1, cp_size=1, pp_size=1, dp_replicate_size=1)  # GRPO scales by replicas, not dp_replicate
    return policy


def _custom(spec: RlSpec, family: ModelFamily, notes: list[str]) -> dict[str, Any]:
    custom = spec.custom
    vision = vision_table(custom.vision, spec.policy.model_max_length, family, notes)
    return {
        "model_family": family.model_type,
        "system_prompt": system_prompt(spec),
        "answer_type": custom.answer_type,
        "task_type": custom.task_type,
        "vision": vision,
        "train_dataset": _dataset_paths(custom.train_dataset),
    }
