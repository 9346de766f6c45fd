"""The GRPO start check: before `skillbank rl` (or `skillbank preflight --action rl`) commits GPUs, sample a
few prompts from the start model, rollout.n_generation samples each, with the local GRPO code
(training.local.grpo.GrpoSampler: the same chat, frames, sampling and rewards as a run) and count the
groups whose rewards are all equal. Such a group has all-zero advantages: GRPO learns nothing from it.
When every sampled group is flat, the run would learn nothing from the start (an answer format the
rewards cannot read, a model that always answers the same, a task it always or never gets right).

Bounded by default, so that `skillbank rl` answers in seconds: the first START_CHECK_PROMPTS prompts of the
run's order, at most START_CHECK_TOKENS tokens a sample (or the run's rollout.max_response_length when
shorter), and START_CHECK_SECONDS of sampling (a generate call is stopped at the cap); what was sampled by
then decides. A sample cut before it ended (the check's token cap, or the time cap) is no sample the
run would score: a group whose finished samples all scored alike but that holds a cut one is undecided,
never flat. `full` samples to the run's length without a time cap. A model that does not fit this
machine's free memory, or one over CPU_MAX_PARAMS parameters where no GPU is visible, is not loaded.

It loads the model (torch), so it runs only when the start is a local folder and torch is installed;
`--no-start-check` (`--start-check off`) skips it. Heavy imports live inside the functions.
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODES = ("bounded", "full", "off")  # --start-check
START_CHECK_PROMPTS = 8  # prompts sampled (each one group of rollout.n_generation samples)
START_CHECK_TOKENS = 64  # a sample's cap in the bounded check (the run's max_response_length when shorter)
START_CHECK_SECONDS = 20.0  # the bounded check's sampling time (the model load is bounded by its size); sampling stops there
CPU_MAX_PARAMS = 2e9  # larger models are sampled only where a GPU is visible (a CPU would take many minutes)
LOAD_BYTES_PER_PARAM = 4  # the policy is loaded in float32 (training.local.model.load_policy)
MEMORY_HEADROOM = 1.25  # activations, the KV cache and the processor beside the weights
GIB = 1 << 30


@dataclass(frozen=True)
class Bounds:
    """How much the check samples: prompts, tokens a sample (None: the run's), seconds (None: no cap)."""

    mode: str = "bounded"
    prompts: int = START_CHECK_PROMPTS
    tokens: int | None = START_CHECK_TOKENS
    seconds: float | None = START_CHECK_SECONDS

    @classmethod
    def of(cls, mode: str) -> "Bounds":
        return cls("full", tokens=None, seconds=None) if mode == "full" else cls()


def skipped_because(spec: Any, model: Any) -> str | None:
    """Why the start check cannot run here (None: it can): no local model folder, no torch, no prompts,
    a model this machine cannot hold or sample in time. Loads nothing."""
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

    params, how = model_params(model.value)
    need = params * LOAD_BYTES_PER_PARAM * MEMORY_HEADROOM
    free = free_memory()
    if free is not None and need > free:
        return (f"the {params / 1e9:.2g}B-parameter start model ({how}) needs about {need / GIB:.1f} GiB to sample in float32 and "
                f"{free / GIB:.1f} GiB of memory are free here; it runs where it fits (or pass --no-start-check)")
    if params > CPU_MAX_PARAMS:
        import torch

        if not torch.cuda.is_available():
            return (f"a {params / 1e9:.1f}B model on CPU would take too long; it runs where a GPU is visible "
                    "(or pass --no-start-check)")
    return None


def free_memory() -> float | None:
    """Bytes of memory available to a new process here (Linux MemAvailable), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def start_check(spec: Any, model_path: str, *, bounds: Bounds = Bounds()) -> dict[str, Any]:
    """Sample up to `bounds.prompts` prompts (the first of epoch 0's seeded order, as the run's first step
    takes them) n_generation times each, rollout.batch_size prompts per call, until `bounds.seconds`.
    Returns {mode, groups, samples_per_group, tokens, run_tokens, flat_groups, varied_groups,
    undecided_groups, cut_samples, flat_share, reward_mean, mean_length, stopped_by_time, load_seconds, seconds}."""
    from skillbank.training.local.data import epoch_order
    from skillbank.training.local.grpo import GrpoSampler

    started = time.perf_counter()
    sampler = GrpoSampler(spec, model_path=model_path)
    loaded = time.perf_counter()
    order = epoch_order(len(sampler.records), spec.train.train_policy.dataloader_seed, 0)
    chosen = order[: max(1, min(bounds.prompts, len(order)))]
    run_tokens = spec.rollout.max_response_length
    tokens = min(run_tokens, bounds.tokens) if bounds.tokens else run_tokens
    per_call, g = spec.rollout.batch_size, spec.rollout.n_generation
    done: list[int] = []
    totals: list[float] = []
    complete: list[bool] = []
    lengths: list[int] = []
    stopped = False
    for start in range(0, len(chosen), per_call):
        left = None if bounds.seconds is None else max(0.0, bounds.seconds - (time.perf_counter() - loaded))
        if left == 0.0 and done:  # the first call always runs (stopped by the cap after its first token at worst)
            stopped = True
            break
        indices = chosen[start : start + per_call]
        called = time.perf_counter()
        completions, ended = sampler.sample(indices, max_new_tokens=tokens, max_time=left)
        stopped = left is not None and time.perf_counter() - called >= left  # the cap stopped this call
        texts = [t.strip() for t in sampler.tokenizer.batch_decode(completions, skip_special_tokens=True)]
        scores, _ = sampler.score(indices, texts)
        done += indices
        totals += scores
        lengths += [int(c.shape[0]) for c in completions]
        complete += [e or int(c.shape[0]) >= run_tokens for c, e in zip(completions, ended)]  # what the run would score as is
    flat, varied, undecided = judge(totals, complete, g)
    decided = flat + varied
    return {"mode": bounds.mode, "groups": len(done), "prompts_planned": len(chosen), "samples_per_group": g, "tokens": tokens, "run_tokens": run_tokens,
            "flat_groups": flat, "varied_groups": varied, "undecided_groups": undecided, "cut_samples": complete.count(False),
            "flat_share": round(flat / decided, 4) if decided else None, "reward_mean": round(sum(totals) / len(totals), 4),
            "mean_length": round(sum(lengths) / len(lengths), 1), "stopped_by_time": stopped, "load_seconds": round(loaded - started, 2),
            "seconds": round(time.perf_counter() - started, 2)}


def judge(rewards: list[float], complete: list[bool], group: int) -> tuple[int, int, int]:
    """(flat, varied, undecided) groups of `group` consecutive samples: varied when two finished samples
    scored differently, flat when every sample finished and all scored alike, else undecided (a cut
    sample might have scored otherwise)."""
    flat = varied = undecided = 0
    for start in range(0, len(rewards), group):
        scores, done = rewards[start : start + group], complete[start : start + group]
        if len({r for r, d in zip(scores, done) if d}) > 1:
            varied += 1
        elif all(done):
            flat += 1
        else:
            undecided += 1
    return flat, varied, undecided


def finding(result: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fix) when every decided group's rewards are equal: nothing to learn."""
    decided = result["flat_groups"] + result["varied_groups"]
    if not decided or result["varied_groups"]:
        return None
    undecided = (f" ({result['undecided_groups']} more undecided: samples cut at {result['tokens']} tokens or by the time cap)"
                 if result["undecided_groups"] else "")
    return (f"start check: {result['flat_groups']} of {decided} sampled prompt groups ({result['flat_share']:.0%}; "
            f"{result['samples_per_group']} samples each){undecided} scored all alike (mean reward {result['reward_mean']:g}): their GRPO "
            "advantages are all 0 and the run learns nothing from them",
            "start from a checkpoint that answers the task in the format the rewards read (SFT first), raise "
            "train.train_policy.temperature for varied samples, or check custom.answer_type / custom.task_type / the rewards")


def line(check: dict[str, Any]) -> str:
    """The start check in one line: skipped and why, or what it sampled, how long it took and what it found."""
    if "skipped" in check:
        return f"start check: skipped ({check['skipped']})"
    g, groups = check["samples_per_group"], check["groups"]
    cap = (f"up to {check['tokens']} tokens (the run's rollout.max_response_length)" if check["tokens"] >= check["run_tokens"]
           else f"up to {check['tokens']} of the run's {check['run_tokens']} tokens")
    stop = f", stopped by the time cap after {groups} of {check['prompts_planned']} prompts" if check["stopped_by_time"] else ""
    decided = check["flat_groups"] + check["varied_groups"]
    if decided:
        found = f"{check['flat_groups']} of {decided} groups scored all alike ({check['flat_share']:.0%})"
    else:
        found = "no group decided"
    if check["undecided_groups"]:
        found += (f", {check['undecided_groups']} undecided ({check['cut_samples']} samples cut before they ended"
                  + ("; --start-check full samples to the run's length" if check["mode"] != "full" else "") + ")")
    return (f"start check ({check['mode']}): {groups} prompts x {g} samples, {cap}, mean length {check['mean_length']:g}, "
            f"in {check['seconds']:g} s ({check['load_seconds']:g} s loading the model)"
            f"{stop}: {found}; mean reward {check['reward_mean']:g}")
