"""Checks of the rl action (GRPO) that the spec model cannot make: the GPUs for policy plus rollout,
the starting checkpoint, a reference answer a reward can check on every record, the answer format
the prompt asks for against the rewards, and rollout samples enough for one policy step."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from skillbank.preflight.report import Findings
from skillbank.runs.steps import BATCH_KEY, no_step, split_groups
from skillbank.specification.rl import FORMAT_PATTERN, MIN_RECOMMENDED_GPUS, RlSpec

MODEL_KEY = "policy.model_name_or_path"
REWARDS_KEY = "train.train_policy.reward_function"
PROMPT_KEY = "custom.system_prompt"
SHOWN = 5  # records named in one finding
_EXPORT = re.compile(r"(^|/)safetensors/step_\d+/?$")


def gpus(spec: RlSpec, gpus_per_node: int | None, nodes: int | None, f: Findings) -> None:
    """Policy GPUs + rollout GPUs against what the flags say the job gets; fewer than the recipes' 4 warns."""
    need, policy, rollout = spec.gpus, spec.policy_gpus, spec.rollout.num_gpus
    what = f"policy {policy} (tp_size*dp_shard_size) + rollout {rollout} (rollout.num_gpus) = {need} GPUs"
    if gpus_per_node is not None:
        have = gpus_per_node * (nodes or 1)
        if need > have:
            f.error("spec.parallelism", f"the rl job needs {what}, but --gpus-per-node x --nodes gives {have}",
                    f"lower policy.parallelism.dp_shard_size and rollout.num_gpus so they add up to {have} or fewer", "rollout.num_gpus")
        elif need < have:
            f.warning("spec.parallelism", f"the rl job uses {what} of the {have} available",
                      "raise policy.parallelism.dp_shard_size or rollout.num_gpus to use them all", "rollout.num_gpus")
    if need < MIN_RECOMMENDED_GPUS:
        f.warning("spec.parallelism", f"the rl job uses {what}; the GRPO recipes use at least {MIN_RECOMMENDED_GPUS} "
                  "(an 8B policy under FSDP beside a vLLM rollout engine)", "give policy and rollout 2 GPUs or more each", "rollout.num_gpus")


def local_batch(spec: RlSpec, f: Findings) -> None:
    problem = split_groups(spec)
    if problem:
        f.error("spec.batch", *problem, BATCH_KEY)


def visible_gpus(spec: RlSpec, f: Findings) -> dict[str, int]:
    """On the machine that trains: cosmos-rl starts every policy and rollout rank on this node's GPUs."""
    from skillbank.preflight.env_checks import visible_gpus as count_gpus

    count, how = count_gpus()
    if count < spec.gpus:
        f.error("env.gpus", f"the rl job needs {spec.gpus} GPUs (policy {spec.policy_gpus} + rollout {spec.rollout.num_gpus}) but {count} are visible here ({how})",
                "run it on a node with that many NVIDIA GPUs (skillbank submit --platform slurm|docker)", "rollout.num_gpus")
    return {"visible": count, "need": spec.gpus}


def start(spec: RlSpec, ref: Any, f: Findings) -> None:
    """RL refines an SFT checkpoint: empty is an error, a hub model (a base) a warning, a local folder that
    is no `safetensors/step_N` export a warning."""
    value = spec.policy.model_name_or_path.strip()
    if not value:
        f.error("spec.model", "policy.model_name_or_path is empty: RL starts from a checkpoint",
                "set it to the SFT job's <output_dir>/<timestamp>/safetensors/step_N (or a base model such as hf_model://nvidia/Cosmos-Reason2-8B)", MODEL_KEY)
        return
    if ref.where == "hub":
        f.warning("spec.model", f"policy.model_name_or_path {value!r} is a base model, not an SFT checkpoint: GRPO learns from rewards the "
                  "samples earn, and a model that has not learned the task and its answer format earns almost none",
                  "train first (skillbank train), then set it to that job's <output_dir>/<timestamp>/safetensors/step_N", MODEL_KEY)
    elif ref.where == "local" and not _EXPORT.search(str(ref.path).replace("\\", "/")):
        f.warning("spec.model", f"policy.model_name_or_path {value!r} is not a training export (<output_dir>/<timestamp>/safetensors/step_N): "
                  "if it is a base model, RL rarely finds rewards to learn from", "start from the SFT job's export", MODEL_KEY)


def answer_format(spec: RlSpec, prompt: str, f: Findings) -> None:
    """The response shape the prompt asks for must be one the rewards can read."""
    rewards, reasoning = spec.train.train_policy.reward_function, spec.custom.answer_type == "reasoning"
    asks_answer_tag, asks_think = "<answer>" in prompt, "<think>" in prompt or "</think>" in prompt
    if "format" in rewards and not (asks_answer_tag and asks_think):
        f.error("spec.reward_format", f"the format reward pays only for {FORMAT_PATTERN}, but {PROMPT_KEY} does not ask for "
                "<think> and <answer>: every sample that follows the prompt scores 0",
                f"set {PROMPT_KEY}=null (the default asks for that format), or drop format from {REWARDS_KEY}", PROMPT_KEY)
    if "single_choice" in rewards and reasoning and not asks_answer_tag:
        f.warning("spec.reward_format", "single_choice compares the <answer> text (else the whole response) with the reference; with answer_type "
                  f"reasoning and a {PROMPT_KEY} that does not ask for <answer>, the thinking is compared too and scores 0",
                  f"ask for <answer>...</answer> in {PROMPT_KEY}, or use exact_match (extracts after </think> too)", PROMPT_KEY)
    if "exact_match" in rewards and reasoning and not (asks_answer_tag or asks_think):
        f.warning("spec.reward_format", f"answer_type reasoning extracts the answer from <answer> or after </think>, but {PROMPT_KEY} asks for neither",
                  f"set {PROMPT_KEY}=null, or custom.answer_type=short", PROMPT_KEY)
    if "boxed_math" in rewards and "boxed" not in prompt:
        f.warning("spec.reward_format", f"boxed_math reads the \\boxed{{}} answer, but {PROMPT_KEY} does not ask for one",
                  f"ask for the final answer in \\boxed{{}} in {PROMPT_KEY}", PROMPT_KEY)


def references(spec: RlSpec, records: Sequence[Mapping[str, Any]], file: str, f: Findings) -> int:
    """Every record needs a reference answer (its first answer turn) the rewards can check: non-empty, and
    for exact_match one the answer rules read as a label of custom.task_type (scored against itself).
    Returns the records with a usable reference."""
    from skillbank.data.chat import prompt_and_answer
    from skillbank.errors import InputError
    from skillbank.scoring.answers import score_rows

    rewards = spec.train.train_policy.reward_function
    if set(rewards) == {"format"}:
        return len(records)  # the format reward reads no reference
    rows, empty = [], []
    for i, record in enumerate(records):
        try:
            question, answer = prompt_and_answer(dict(record))
        except (InputError, KeyError, TypeError, AttributeError):
            question, answer = "", ""  # the scan reports malformed conversations
        if not answer.strip():
            empty.append(i)
        rows.append({"question": question, "gt": answer, "response": answer})
    if empty:
        f.error("annotations.reference", f"{len(empty):,} record(s) have no reference answer (a non-empty gpt turn) for the rewards to check: "
                f"{_indices(empty)}", "give every record a gpt answer, or remove those records", file)
    if "exact_match" in rewards:
        scored = score_rows(rows, spec.custom.task_type, "short")
        unread = [i for i, s in enumerate(scored) if not s.correct and i not in set(empty)]
        if unread:
            task = spec.custom.task_type or '""'
            f.error("annotations.reference", f"{len(unread):,} reference answer(s) cannot be checked by exact_match with custom.task_type {task} "
                    f"(no option / direction they name): {_indices(unread)}",
                    "fix those answers, or set custom.task_type to the task the answers follow", file)
        return len(records) - len(set(empty) | set(unread))
    return len(records) - len(empty)


def samples_per_step(spec: RlSpec, prompts: int, f: Findings) -> dict[str, int]:
    """Rollout samples per epoch (prompts x n_generation) against one policy step's batch."""
    problem = no_step(spec, prompts)
    if problem:
        f.error("spec.steps_per_rank", *problem, BATCH_KEY)
    samples = prompts * spec.rollout.n_generation
    return {"prompts": prompts, "samples_per_epoch": samples, "steps_per_epoch": samples // spec.train.train_batch_per_replica}


def _indices(items: Sequence[int]) -> str:
    shown = ", ".join(f"#{i}" for i in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN:,} more" if len(items) > SHOWN else "")
