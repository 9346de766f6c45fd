"""run_preflight: every known failure of a launch, checked before it, for one skill action.

Nothing is launched and no input is modified. Each action runs the checks that apply to it:
train (spec rules, parallelism, steps per rank, validation data, every record of train and val,
the token budget, redis, model and token, disk, example cache), evaluate (spec, every record of
the evaluation set, model and token), inference / quantize / export (spec, data when given, model
and token, disk).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.preflight import env_checks, spec_checks
from skillbank.preflight.cache_checks import check_cache
from skillbank.preflight.datasets import Dataset, ScanOptions, check_clip, scan
from skillbank.preflight.report import Findings, Report
from skillbank.preflight.vision import VisionBudget

BACKENDS = ("local", "cosmos-rl")
FULL_CHECKPOINT_BYTES = 12  # per parameter: fp32 weights + two Adam moments
LORA_CHECKPOINT_BYTES = 2
EXPORT_BYTES = 2  # bf16 safetensors


@dataclass
class Context:
    findings: Findings
    gpus_per_node: int | None
    nodes: int | None
    backend: str | None
    decode_sample: int
    datasets: list[Dataset] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def run_preflight(
    *,
    skill: str,
    action: str,
    spec_path: str | Path | None = None,
    spec: dict | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    backend: str | None = None,
    decode_sample: int = 0,
) -> Report:
    started = time.perf_counter()
    ctx = Context(Findings(), gpus_per_node, nodes, backend, max(0, int(decode_sample or 0)))
    _arguments(ctx)
    parsed = spec_checks.load(skill, action, spec_path, spec, ctx.findings)
    checks = ACTIONS.get(action)
    if parsed is not None and checks is not None:
        checks(parsed, ctx)
    records = {d.role: d.records for d in ctx.datasets}
    stats = {
        "skill": skill,
        "action": action,
        "records": records,
        "checked": sum(records.values()),
        "datasets": {d.role: _dataset_stats(d) for d in ctx.datasets},
        **ctx.stats,
        "errors": ctx.findings.totals["error"],
        "warnings": ctx.findings.totals["warning"],
        "seconds": round(time.perf_counter() - started, 3),
    }
    return Report(ctx.findings.finish(), stats)


def _dataset_stats(d: Dataset) -> dict[str, Any]:
    return {
        "file": d.file,
        "records": d.records,
        "videos": d.videos,
        "images": d.images,
        "complete": d.complete,
        "media_folders_listed": d.folders_listed,
    }


def _arguments(ctx: Context) -> None:
    f = ctx.findings
    if ctx.backend is not None and ctx.backend not in BACKENDS:
        f.error("spec.schema", f"unknown backend {ctx.backend!r}", f"use one of: {', '.join(BACKENDS)}", "--backend")
    for name, value in (("--gpus-per-node", ctx.gpus_per_node), ("--nodes", ctx.nodes)):
        if value is not None and value < 1:
            f.error("spec.parallelism", f"{name} must be at least 1 (got {value})", f"pass a positive {name}", name)


# ---- train -------------------------------------------------------------------------------------------


def _train(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    spec_checks.parallelism(spec, ctx.gpus_per_node, ctx.nodes, f)
    spec_checks.validation_data(spec, f)
    model = env_checks.resolve("policy.model_name_or_path", spec.policy.model_name_or_path)
    env_checks.check_models([model], f)
    env_checks.check_hf_token([model], f)
    env_checks.check_redis(ctx.backend, f)
    patch = env_checks.patch_size(model, f if ctx.backend == "cosmos-rl" else None)
    budget = VisionBudget.from_train_spec(spec, patch)
    _fixed_frames(budget, f)

    custom = spec.custom
    train_file = spec_checks.dataset_file("custom.train_dataset.annotation_path", custom.train_dataset.annotation_path, f)
    train_media = spec_checks.media_folder("custom.train_dataset.media_path", custom.train_dataset.media_path, custom.train_dataset.annotation_path, f)
    media_folders = [train_media]
    val = None
    if custom.val_dataset is not None and custom.val_dataset.annotation_path:
        val_file = spec_checks.dataset_file("custom.val_dataset.annotation_path", custom.val_dataset.annotation_path, f)
        val_media = spec_checks.media_folder("custom.val_dataset.media_path", custom.val_dataset.media_path, custom.val_dataset.annotation_path, f)
        media_folders.append(val_media)
        if val_file:
            val = _scan(ctx, "val", val_file, ScanOptions(val_media, keep_keys=True, budget=budget))
    train = None
    if train_file:
        train = _scan(ctx, "train", train_file, ScanOptions(train_media, overlap_with=val, budget=budget, decode_sample=ctx.decode_sample))
        if train.complete and train.records:
            spec_checks.steps_per_rank(spec, train.records, val.records if val else None, f)
    decoded = _decode(ctx, train, budget)
    for data in (train, val):
        if data is not None:
            _unknown_lengths(data, budget, decoded if data is train else 0, f)
    _train_disk(spec, model, ctx)
    ctx.stats["cache_folders_checked"] = check_cache(spec, patch, media_folders, f)


def _fixed_frames(budget: VisionBudget, f: Findings) -> None:
    est = budget.fixed_frames_overflow()
    if est is not None:
        f.error(
            "vision.budget",
            f"custom.vision.nframes {budget.nframes} gives every sample at least ~{est.vision_low:,} vision tokens "
            f"(+ ~{est.text:,} text), over policy.model_max_length {budget.model_max_length:,}; truncation breaks vision-token alignment",
            "lower custom.vision.nframes or raise policy.model_max_length",
            "custom.vision.nframes",
        )


def _unknown_lengths(data: Dataset, budget: VisionBudget, decoded: int, f: Findings) -> None:
    """One warning for the clips whose length no record states and no decode measured."""
    longest = budget.longest_safe_clip()
    unchecked = data.videos - data.with_meta - decoded
    if longest is None or unchecked <= 0:
        return
    f.warning(
        "vision.budget",
        f"{unchecked:,} of {data.videos:,} video records in the {data.role} set state no clip length (duration or num_frames), "
        f"so their token budget was not checked; at fps {budget.fps:g} clips longer than ~{longest:.0f} s may exceed "
        f"policy.model_max_length {budget.model_max_length:,}",
        "add duration (seconds) or num_frames to the records, run preflight with --decode-sample K to measure some, "
        "or lower custom.vision.fps / total_pixels",
        data.file,
    )


def _decode(ctx: Context, data: Dataset | None, budget: VisionBudget | None) -> int:
    if not ctx.decode_sample or data is None or not data.sample:
        ctx.stats["decoded"] = 0
        return 0
    from skillbank.preflight.decode import decode_sample

    clips = decode_sample(data.sample, data.file, ctx.findings)
    if budget is not None:
        for index, record, clip in clips:
            check_clip(budget, clip, record, index, f"{data.file}#{index}", ctx.findings, group=data.file)
    ctx.stats["decoded"] = len(data.sample)
    return len(clips)


def _train_disk(spec: Any, model: env_checks.ModelRef, ctx: Context) -> None:
    ckpt = spec.train.ckpt
    if not ckpt.enable_checkpoint:
        return
    params, how = env_checks.model_params(model)
    per_param = (LORA_CHECKPOINT_BYTES if spec.policy.lora.enable else FULL_CHECKPOINT_BYTES) + (EXPORT_BYTES if ckpt.export_safetensors else 0)
    one = params * per_param
    saves = math.ceil(spec.train.epoch / ckpt.save_freq_in_epoch) if ckpt.save_freq_in_epoch else spec.train.epoch
    kept = min(ckpt.max_keep, saves) if ckpt.max_keep >= 1 else saves
    what = (
        f"a checkpoint needs ~{one / env_checks.GB:,.0f} GB ({params / 1e9:.1f}B parameters from {how}, {per_param} bytes each), "
        f"{kept} kept ~{one * kept / env_checks.GB:,.0f} GB"
    )
    ctx.stats["disk"] = env_checks.check_disk("train.output_dir", spec.train.output_dir, one, one * kept, what, ctx.findings)


def _output_disk(key: str, output_dir: str, model: env_checks.ModelRef, bytes_per_param: float, ctx: Context) -> None:
    params, how = env_checks.model_params(model)
    need = params * bytes_per_param
    what = f"the output needs ~{need / env_checks.GB:,.1f} GB ({params / 1e9:.1f}B parameters from {how})"
    ctx.stats["disk"] = env_checks.check_disk(key, output_dir, need, need, what, ctx.findings)


def _scan(ctx: Context, role: str, file: str, options: ScanOptions) -> Dataset:
    data = scan(role, file, options, ctx.findings)
    ctx.datasets.append(data)
    return data


# ---- the other actions -----------------------------------------------------------------------------


def _models(ctx: Context, refs: list[env_checks.ModelRef]) -> None:
    env_checks.check_models(refs, ctx.findings)
    env_checks.check_hf_token(refs, ctx.findings)


def _evaluate(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    refs = [env_checks.resolve("model.model_name", spec.model.model_name, "adapter" if spec.model.enable_lora else "model")]
    if spec.model.enable_lora and spec.model.base_model_path:
        refs.append(env_checks.resolve("model.base_model_path", spec.model.base_model_path))
    _models(ctx, refs)
    if ctx.gpus_per_node is not None and spec.num_gpus > ctx.gpus_per_node:
        f.error("spec.parallelism", f"num_gpus {spec.num_gpus} but --gpus-per-node is {ctx.gpus_per_node}", f"set num_gpus={ctx.gpus_per_node} or fewer", "num_gpus")
    file = spec_checks.dataset_file("dataset.annotation_path", spec.dataset.annotation_path, f)
    media = spec_checks.media_folder("dataset.media_dir", spec.dataset.media_dir, spec.dataset.annotation_path, f)
    if file:
        data = _scan(ctx, "eval", file, ScanOptions(media, decode_sample=ctx.decode_sample))
        _decode(ctx, data, None)


def _inference(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    _models(ctx, [env_checks.resolve("model_path", spec.model_path)])
    if spec.annotation_path:
        file = spec_checks.dataset_file("annotation_path", spec.annotation_path, f)
        media = spec_checks.media_folder("media_dir", spec.media_dir, spec.annotation_path, f)
        if file:
            _decode(ctx, _scan(ctx, "inference", file, ScanOptions(media, decode_sample=ctx.decode_sample)), None)
    elif spec.video:
        if not Path(spec.video).expanduser().is_file():
            f.error("annotations.media_exists", f"video {spec.video!r} does not exist", "pass the path of an existing video file", "video")
    else:
        f.error("spec.dataset_paths", "neither video (single mode) nor annotation_path (batch mode) is set", "set video and prompt, or annotation_path and media_dir", "video")


def _quantize(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    model = env_checks.resolve("model_path", spec.model_path)
    _models(ctx, [model])
    if spec.calibration_annotation_path:
        file = spec_checks.dataset_file("calibration_annotation_path", spec.calibration_annotation_path, f)
        media = spec_checks.media_folder("calibration_media_dir", spec.calibration_media_dir, spec.calibration_annotation_path, f)
        if file:
            _scan(ctx, "calibration", file, ScanOptions(media))
    if model.where == "local":
        _output_disk("output_dir", spec.output_dir, model, {"FP8_DYNAMIC": 1, "W8A16": 1, "W4A16": 0.5}.get(spec.scheme, 2), ctx)


def _export(spec: Any, ctx: Context) -> None:
    source = env_checks.resolve("source", spec.source, "checkpoint")
    refs = [source]
    is_adapter = source.path is not None and (source.path / "adapter_config.json").is_file()
    if is_adapter and spec.merge_lora:
        if spec.base_model_path:
            refs.append(env_checks.resolve("base_model_path", spec.base_model_path))
        else:
            ctx.findings.error(
                "env.model",
                "source is a LoRA adapter and merge_lora is true, but base_model_path is empty",
                "set base_model_path to the model the adapter was trained on",
                "base_model_path",
            )
    _models(ctx, refs)
    weights = refs[-1]
    if weights.where == "local":
        _output_disk("output_dir", spec.output_dir, weights, EXPORT_BYTES if spec.dtype != "float32" else 4, ctx)


ACTIONS: dict[str, Callable[[Any, Context], None]] = {
    "train": _train,
    "evaluate": _evaluate,
    "inference": _inference,
    "quantize": _quantize,
    "export": _export,
}
