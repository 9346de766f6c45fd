"""What `skillbank plan` is asked (Inputs) and the figures every plan starts from: the model's config.json,
the flags checked, the tokens per sample. planning.plan (train) and planning.rl (GRPO) both build on them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillbank.errors import InputError
from skillbank.models.params import ModelConfig, require_config
from skillbank.planning import estimate as est
from skillbank.planning import layouts, timing
from skillbank.planning.tokens import Described, TokenFigures


@dataclass(frozen=True)
class Inputs:
    spec: Any  # validated, as this machine reads it (path map and --set applied)
    skill: str
    action: str = "train"
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu: str = "h100-80gb"
    mfu: float = est.DEFAULT_MFU
    trials: int = 1
    decode_sample: int = 0  # preflight's --decode-sample: clips decoded to measure their lengths
    described: Described | None = None
    per_gpu_batch: str = "scaled"
    rates: timing.Rates = field(default_factory=timing.Rates)
    has_data: bool = True  # the spec names train annotations to read
    backend: str | None = None  # the run's (or trials') backend: what a checkpoint holds (runs.disk)
    time_limit_h: float | None = None  # --time-limit: the time_limit block (planning.limit)
    study: Any = None  # runs.disk.StudyShape of --trials N (> 1): the study block (planning.study)
    evaluates: bool = True  # a study's trials evaluate each epoch's export (not with a loss metric)


def model_config(spec: Any) -> ModelConfig:
    """The model's config.json (a local folder, the hub cache, the model table), else the one refusal
    spec, preflight and the AutoML dry run give too (models.params.unknown_model); its heads checked against
    the spec's tp_size / cp_size (check_parallel)."""
    config = require_config(spec.policy.model_name_or_path)
    check_parallel(spec, config)
    return config


def check_parallel(spec: Any, config: ModelConfig) -> None:
    """tp_size / cp_size against the heads cosmos-rl shards: refused here as preflight reports it, whatever the backend."""
    from skillbank.training.cosmos_rl.family import parallel_check

    par = spec.policy.parallelism
    problem = parallel_check(spec.policy.model_name_or_path, config.data, par.tp_size, getattr(par, "cp_size", 1))
    if problem:
        message, fix, where = problem
        raise InputError(message, where=where, fix=fix)


def check_inputs(inputs: Inputs) -> est.Gpu:
    if inputs.gpu not in est.GPUS:
        raise InputError(f"unknown GPU {inputs.gpu!r}", where="--gpu", fix=f"use one of: {', '.join(est.GPUS)}")
    if not 0 < inputs.mfu <= 1:
        raise InputError(f"--mfu must be in (0, 1] (got {inputs.mfu})", where="--mfu", fix="pass a fraction such as 0.3")
    if inputs.per_gpu_batch not in layouts.PER_GPU_BATCH:
        raise InputError(f"unknown --per-gpu-batch {inputs.per_gpu_batch!r}", where="--per-gpu-batch", fix=f"one of: {', '.join(layouts.PER_GPU_BATCH)}")
    if inputs.time_limit_h is not None and not inputs.time_limit_h > 0:
        raise InputError(f"--time-limit must be positive hours (got {inputs.time_limit_h})", where="--time-limit", fix="pass the partition's limit in hours, e.g. 24")
    for name, value in vars(inputs.rates).items():
        if not value > 0:
            raise InputError(f"{name} must be positive (got {value})", where=f"--{name.replace('_', '-')}", fix="pass a positive number")
    return est.GPUS[inputs.gpu]


def token_figures(inputs: Inputs, config: ModelConfig) -> TokenFigures:
    """From a description, the data (every clip probed), or, with neither, the vision budget (said)."""
    from skillbank.planning import tokens

    patch = int((config.data.get("vision_config") or {}).get("patch_size", 16))
    budget = tokens.budget_of(inputs.spec, patch, inputs.action)
    if inputs.described is not None:
        return tokens.from_description(inputs.spec, inputs.described, budget, inputs.action)
    if not inputs.has_data:
        return tokens.no_data(inputs.spec, budget)
    figures = tokens.from_data(inputs.spec, inputs.skill, inputs.action, decode_sample=inputs.decode_sample)
    if not figures.tokens:
        fallback = tokens.no_data(inputs.spec, budget)
        figures.tokens, figures.assumptions = fallback.tokens, figures.assumptions + fallback.assumptions
    return figures
