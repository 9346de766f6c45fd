"""`skillbank plan`: how many GPUs, how long, and whether it fits, for a train (or rl) spec.

Three numbers are taken, not guessed: the parameters (models.params: the model's config.json on
the meta device), the tokens per sample (planning.tokens: preflight's scan with every clip's headers
read, or a described dataset) and the steps (runs.steps, with cosmos-rl's semantics). planning.layouts
turns them into memory per GPU and time for a table of layouts at the spec's global batch; planning.fits
finds settings that fit when the layout does not; planning.timing adds start-up, checkpoint writes and
validation to the steps; runs.disk sizes an AutoML study's disk. rl specs: planning.rl.
"""

from __future__ import annotations

from typing import Any

from skillbank.models.params import ParamCount, count_on_meta, find_config
from skillbank.planning import estimate as est
from skillbank.planning import layouts, timing
from skillbank.planning.inputs import Inputs, check_inputs, model_config, token_figures
from skillbank.runs import steps


def shape(spec: Any, nodes: int | None, gpus_per_node: int | None) -> tuple[int, int]:
    par = spec.policy.parallelism
    model_parallel = par.tp_size * par.cp_size * par.pp_size
    return nodes or par.dp_replicate_size, gpus_per_node or par.dp_shard_size * model_parallel


def build_plan(inputs: Inputs) -> dict[str, Any]:
    """The plan document (`skillbank plan --json`) of a train or rl spec."""
    if inputs.action == "rl":
        from skillbank.planning.rl import build_rl_plan

        return build_rl_plan(inputs)
    from skillbank.planning.fits import fits_with

    gpu = check_inputs(inputs)
    spec = inputs.spec
    config = model_config(spec)
    count = count_on_meta(config, spec.policy.lora)
    arch = est.Arch.from_config(config.data)
    figures = token_figures(inputs, config)
    nodes, per_node = shape(spec, inputs.nodes, inputs.gpus_per_node)
    setting = layouts.Setting(spec, arch, count, figures.tokens, figures.records, figures.val_records, gpu, inputs.mfu, inputs.rates, inputs.per_gpu_batch)
    rows = [layouts.layout(setting, n, per_node) for n in sorted(set(layouts.LAYOUT_NODES) | {nodes})]
    main = next(r for r in rows if r["nodes"] == nodes)
    fixes = fits_with(setting, main, lambda s: count_on_meta(config, s.policy.lora))
    disk = _disk(inputs, count, figures.records, main)
    slurm = timing.slurm_time(main["total_time_h"])
    records = figures.records
    main_spec = layouts.layout_spec(spec, main["dp_shard_size"], nodes, main["train_batch_per_replica"], main["mini_batch"])
    return {
        "action": "train",
        "model": spec.policy.model_name_or_path,
        "gpu": gpu.name,
        "params": count.total,
        "trainable_params": count.trainable,
        "lora_params": count.lora,
        "tokens_per_sample": figures.tokens,
        "train_records": records.train if records else None,
        "nodes": nodes,
        "gpus_per_node": per_node,
        "gradient_checkpointing": spec.policy.model_gradient_checkpointing,
        "fused_loss": spec.policy.enable_liger_fused_cross_entropy,
        "memory_per_gpu_gib": main["memory_per_gpu_gib"],
        "memory_breakdown_gib": main["memory_breakdown_gib"],
        "activations_gib": main["activations_gib"],
        "fits": main["fits"],
        "fits_with": fixes,
        "per_gpu_batch": inputs.per_gpu_batch,
        "global_batch": main["global_batch"],
        "train_batch_per_replica": main["train_batch_per_replica"],
        "mini_batch": main["mini_batch"],
        "total_steps": main["total_steps"],
        "step_time_s": main["step_time_s"],
        "time_breakdown_h": main["time_breakdown_h"],
        "total_time_h": main["total_time_h"],
        "slurm_time": slurm,
        "checkpoint_gib": disk["checkpoint_gib"],
        "disk_gib": disk["disk_gib"],
        "disk": disk,
        "steps": steps.run_plan(main_spec, records, val_records=figures.val_records) if records else None,
        "layouts": rows,
        "recommendation": layouts.recommend(rows, gpu, fixes),
        "assumptions": figures.assumptions + _assumptions(inputs, gpu, arch, spec, records),
        "units": "GiB (1024^3 bytes) for memory and disk, hours for time",
    }


def _assumptions(inputs: Inputs, gpu: est.Gpu, arch: est.Arch, spec: Any, records: Any) -> list[str]:
    from skillbank.preflight.vision import TYPICAL_TEXT_TOKENS

    out = [
        f"GPU {gpu.name}: {gpu.source}; fits = at most {layouts.usable(gpu):.1f} GiB ({est.RESERVE:.0%} kept for the CUDA context, NCCL buffers and fragmentation)",
        f"MFU {inputs.mfu:g}" + ("" if inputs.mfu != est.DEFAULT_MFU else f" (default: {est.MFU_SOURCE})"),
        f"FSDP as cosmos-rl runs it: fp32 master weights, fp32 gradients and AdamW moments sharded over dp_shard_size x tp x pp of a replica; "
        f"{spec.train.param_dtype} compute copies of the root unit and two blocks gathered",
        "activations: the tensors the Qwen layers save for backward (benchmarks/plan_memory.py checks the formula against a measured run); "
        f"vision tokens = tokens per sample - {TYPICAL_TEXT_TOKENS} text tokens, {arch.merge ** 2} patches each in the vision tower",
        "logits: " + ("liger's fused lm_head + cross-entropy (policy.enable_liger_fused_cross_entropy): the hidden-state and lm_head gradients and one chunk of logits"
                      if spec.policy.enable_liger_fused_cross_entropy else "vocab x tokens x 16 bytes per sample of a mini batch (cosmos-rl's loss on the full logits)"),
        "step time: (6 x parameters x tokens, 4 x with LoRA, + causal attention; + one forward with gradient checkpointing) x train_batch_per_replica "
        "per GPU, over peak bf16 FLOPs x MFU, + the fp32 gradient all-reduce between nodes (not overlapped: an upper bound; FSDP's collectives inside a node "
        "go over NVLink, overlapped with compute)",
        "layouts hold the spec's global batch (train_batch_per_replica scales down as GPUs grow; --per-gpu-batch fixed keeps it per rank instead)"
        if inputs.per_gpu_batch == "scaled" else "layouts keep train_batch_per_replica per rank (--per-gpu-batch fixed): more GPUs, a larger global batch",
        inputs.rates.said() + "; time_breakdown_h: compute = steps x step time; startup = launch + the weights (bf16) downloaded (a Hub model) and read; "
        "checkpoint = saves x (the sharded state over the nodes + the export, one writer) / write bandwidth; validation = forward passes over the validation "
        "records at each validation on every GPU at the same MFU",
        f"slurm_time: the total + {timing.MARGIN:.0%} + {timing.MARGIN_MIN} min, rounded up to {timing.SLURM_STEP_MIN} min (`skillbank submit --platform slurm` uses it when --time is not given)",
    ]
    if records is None:
        out.append("train records were not counted (custom.train_dataset.annotation_path missing or unreadable, and no --records): steps and time are null")
    return out


def _disk(inputs: Inputs, count: ParamCount, records: steps.TrainCount | None, main: dict[str, Any]) -> dict[str, Any]:
    """One run's checkpoints (steps.disk_need), or an AutoML study's (--trials: runs.disk.study_disk, as the dry run and the job's gate)."""
    split = layouts.layout_spec(inputs.spec, main["dp_shard_size"], main["nodes"], main["train_batch_per_replica"], main["mini_batch"])
    if inputs.trials > 1:
        from skillbank.runs.disk import study_disk

        need = study_disk(split, float(count.total), trials=inputs.trials, records=records.train if records else None, params_from=count.source,
                          trained=float(count.trainable))
    else:
        plan = steps.step_plan(split, records.train) if records else None
        need = steps.disk_need(split, float(count.total), params_from=count.source, plan=plan, trained=float(count.trainable))
    if need is None:
        return {"checkpoint_gib": 0.0, "disk_gib": 0.0, "kept": 0, "trials": inputs.trials, "detail": "checkpoints off (train.ckpt.enable_checkpoint false)"}
    return {"checkpoint_gib": round(need.checkpoint_bytes / est.GIB, 2), "disk_gib": round(need.total_bytes / est.GIB, 2),
            "kept": need.kept, "trials": need.trials, "detail": need.detail}


def suggest_slurm_time(spec: Any, stats: dict[str, Any], *, action: str, nodes: int, gpus_per_node: int, gpu: str = "h100-80gb") -> tuple[str | None, str]:
    """A Slurm --time for a job, from its preflight stats (the submit gate's token tally and record counts) and the
    plan's arithmetic, without torch (the shipped parameter count, or the weights on disk): (HH:MM:SS or None, why)."""
    from skillbank.models.params import known_count, model_params
    from skillbank.planning.tokens import TokenFigures

    config = find_config(spec.policy.model_name_or_path) if spec.policy.model_name_or_path.strip() else None
    tally, counted = stats.get("tokens_per_sample"), stats.get("plan")
    if config is None or not tally or (action == "train" and not counted):
        return None, "no --time suggested: the model's config.json or the records' token counts are not known here; pass --time"
    try:
        arch = est.Arch.from_config(config.data)
    except (KeyError, TypeError, ValueError):
        return None, f"no --time suggested: {config.where} does not state the architecture; pass --time"
    count = known_count(config)
    if count is None or getattr(getattr(spec.policy, "lora", None), "enable", False):  # rl specs have no LoRA
        total, how = model_params(spec.policy.model_name_or_path)
        count = ParamCount(int(total), int(total), 0, 0, 0, how)
    tokens = {**tally, "memory_at": tally["max"], "time_at": tally["mean"]}
    if action == "rl":
        from skillbank.planning.rl import rl_time

        hours = rl_time(spec, arch, count, tokens, stats, est.GPUS[gpu])
    else:
        records = steps.TrainCount(counted["annotated_records"], counted["validation_split"])
        figures = TokenFigures(tokens, records, (counted.get("validation") or {}).get("records"))
        setting = layouts.Setting(spec, arch, count, figures.tokens, records, figures.val_records, est.GPUS[gpu], est.DEFAULT_MFU, timing.Rates())
        hours = layouts.layout(setting, nodes, gpus_per_node)["total_time_h"]
    suggested = timing.slurm_time(hours)
    if suggested is None:
        return None, "no --time suggested: the step count is unknown; pass --time"
    return suggested["value"], (f"--time {suggested['value']}: `skillbank plan`'s estimate ({hours:.2f} h on {gpu} at MFU {est.DEFAULT_MFU:g}, "
                                f"{suggested['margin']}); pass --time to set your own")
