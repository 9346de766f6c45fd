"""`skillbank plan`: how many GPUs, how long, and whether it fits, for a train (or rl) spec.

Three numbers are taken, not guessed: the parameters (models.params: the model's config.json on
the meta device), the tokens per sample (planning.tokens: preflight's scan with every clip's headers
read, or a described dataset) and the steps (runs.steps, with cosmos-rl's semantics). planning.layouts
turns them into memory per GPU and time for a table of layouts at the spec's global batch; planning.fits
finds settings that fit when the layout does not; planning.timing adds start-up, checkpoint writes and
validation to the steps; runs.disk sizes every disk figure (a run's, an AutoML study's); planning.limit plans a run longer
than its job's time limit, planning.study a study as a whole. rl specs: planning.rl.
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
    setting = layouts.Setting(spec, arch, count, figures.tokens, figures.records, figures.val_records, gpu, inputs.mfu, inputs.rates, inputs.per_gpu_batch,
                              inputs.backend)
    rows = [layouts.layout(setting, n, per_node) for n in sorted(set(layouts.LAYOUT_NODES) | {nodes})]
    main = next(r for r in rows if r["nodes"] == nodes)
    fixes = fits_with(setting, main, lambda s: count_on_meta(config, s.policy.lora))
    records = figures.records
    main_spec = layouts.layout_spec(spec, main["dp_shard_size"], nodes, main["train_batch_per_replica"], main["mini_batch"])
    slurm = timing.slurm_time(main["total_time_h"])
    extra: dict[str, Any] = {}
    if inputs.time_limit_h is not None:
        from skillbank.planning.limit import time_limit

        extra["time_limit"] = time_limit(layouts.timed(setting, nodes, per_node), gpu, inputs.mfu, inputs.rates, inputs.time_limit_h)
    if inputs.study is not None:
        extra.update(_study(inputs, setting, nodes, per_node, figures))
    disk = _disk(inputs, main_spec, records, extra.get("study"))
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
        "recommendation": layouts.recommend(rows, gpu, fixes, batch=layouts.global_batch(spec) if inputs.per_gpu_batch == "scaled" else None,
                                            stated=_stated_nodes(inputs, spec)),
        "assumptions": figures.assumptions + _assumptions(inputs, gpu, arch, spec, records),
        "units": "GiB (1024^3 bytes) for memory and disk, hours for time",
        **extra,
    }


def _stated_nodes(inputs: Inputs, spec: Any) -> tuple[int, str] | None:
    """The node count the user stated: --nodes (the router passes the request's), else a spec on several nodes."""
    if inputs.nodes is not None:
        return inputs.nodes, f"--nodes {inputs.nodes}"
    replicas = spec.policy.parallelism.dp_replicate_size
    return (replicas, f"the spec (policy.parallelism.dp_replicate_size {replicas})") if replicas > 1 else None


def _study(inputs: Inputs, setting: layouts.Setting, nodes: int, per_node: int, figures: Any) -> dict[str, Any]:
    """--trials N: the study block (planning.study: the dry run's figures) and its three figures at the top."""
    from skillbank import recipe
    from skillbank.planning.study import eval_set, study_block

    records = figures.records
    eval_records, eval_on = eval_set(inputs.spec, records.annotated if records else None, figures.val_records)
    answer = recipe.answer_type_of(inputs.spec.custom.model_dump(mode="json")) if inputs.described is None else "short"
    block = study_block(setting, nodes, per_node, inputs.study, records=records.train if records else None, eval_records=eval_records,
                        eval_on=eval_on, answer_type=answer, evaluates=inputs.evaluates)
    return {"study": block, "study_time_h": block["study_time_h"], "disk_gib_per_worker": block["disk_gib_per_worker"],
            "disk_gib_at_most": block["disk_gib_at_most"]}


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


def _disk(inputs: Inputs, spec: Any, records: steps.TrainCount | None, study: dict[str, Any] | None) -> dict[str, Any]:
    """One run's checkpoints (runs.disk.run_disk, as preflight sizes them), or with --trials the study's at most (its block's runs.disk.study_disk)."""
    from skillbank.runs.disk import run_disk

    if study is not None:
        d = study["disk"] or {}
        return {"checkpoint_gib": d.get("checkpoint_gib_largest", 0.0), "disk_gib": d.get("disk_gib_at_most", 0.0), "kept": d.get("kept_per_trial", 0),
                "trials": inputs.study.trials, "detail": d.get("detail", "checkpoints off")}
    need = run_disk(spec, plan=steps.step_plan(spec, records.train) if records else None, backend=inputs.backend)
    if need is None:
        return {"checkpoint_gib": 0.0, "disk_gib": 0.0, "kept": 0, "trials": 1, "detail": "checkpoints off (train.ckpt.enable_checkpoint false)"}
    return {"checkpoint_gib": steps.gib(need.checkpoint_bytes), "disk_gib": steps.gib(need.total_bytes),
            "kept": need.kept, "trials": 1, "detail": need.detail}


def stats_setting(spec: Any, stats: dict[str, Any], *, action: str = "train", gpu: str = "h100-80gb", backend: str | None = None,
                  ) -> tuple[layouts.Setting | None, est.Arch | None, ParamCount | None, str]:
    """The plan's Setting from preflight's stats (the submit gate's, the AutoML dry run's: the token tally and record counts),
    without torch: the parameters as every disk figure counts them (models.params.light_count). (setting, arch, count, why not)."""
    from skillbank.models.params import light_count
    from skillbank.planning.tokens import TokenFigures

    config = find_config(spec.policy.model_name_or_path) if spec.policy.model_name_or_path.strip() else None
    tally, counted = stats.get("tokens_per_sample"), stats.get("plan")
    if config is None or not tally or (action == "train" and not counted):
        return None, None, None, "the model's config.json or the records' token counts are not known here"
    try:
        arch = est.Arch.from_config(config.data)
    except (KeyError, TypeError, ValueError):
        return None, None, None, f"{config.where} does not state the architecture"
    count = light_count(spec.policy.model_name_or_path, getattr(spec.policy, "lora", None))  # rl specs have no LoRA
    if count is None:
        return None, arch, None, "the model is not on this machine"
    tokens = {**tally, "memory_at": tally["max"], "time_at": tally["mean"]}
    if action == "rl":
        return None, arch, count, ""
    records = steps.TrainCount(counted["annotated_records"], counted["validation_split"])
    figures = TokenFigures(tokens, records, (counted.get("validation") or {}).get("records"))
    return (layouts.Setting(spec, arch, count, figures.tokens, records, figures.val_records, est.GPUS[gpu], est.DEFAULT_MFU, timing.Rates(),
                            backend=backend), arch, count, "")


def suggest_slurm_time(spec: Any, stats: dict[str, Any], *, action: str, nodes: int, gpus_per_node: int, gpu: str = "h100-80gb") -> tuple[str | None, str]:
    """A Slurm --time for a job, from its preflight stats (the submit gate's token tally and record counts) and the
    plan's arithmetic, without torch (stats_setting): (HH:MM:SS or None, why)."""
    setting, arch, count, why = stats_setting(spec, stats, action=action, gpu=gpu)
    if arch is None or count is None:
        return None, f"no --time suggested: {why}; pass --time"
    if action == "rl":
        from skillbank.planning.rl import rl_time

        tally = stats["tokens_per_sample"]
        hours = rl_time(spec, arch, count, {**tally, "memory_at": tally["max"], "time_at": tally["mean"]}, stats, est.GPUS[gpu])
    else:
        hours = layouts.layout(setting, nodes, gpus_per_node)["total_time_h"]
    suggested = timing.slurm_time(hours)
    if suggested is None:
        return None, "no --time suggested: the step count is unknown; pass --time"
    return suggested["value"], (f"--time {suggested['value']}: `skillbank plan`'s estimate ({hours:.2f} h on {gpu} at MFU {est.DEFAULT_MFU:g}, "
                                f"{suggested['margin']}); pass --time to set your own")
