"""`skillbank plan`: how many GPUs, how long, and whether it fits, for a train spec.

Three numbers are taken, not guessed: the parameters (planning.params: the model's config.json on
the meta device), the tokens per sample (preflight's data scan: preflight.vision.TokenTally, the same
figure `preflight --json` reports as stats.tokens_per_sample) and the steps (runs.steps: records
per rank, global batch, steps, checkpoints, disk, with cosmos-rl's semantics). planning.estimate
turns them into memory per GPU and time for a table of layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillbank.errors import InputError
from skillbank.planning import estimate as est
from skillbank.planning.params import ModelConfig, ParamCount, bundled_repos, count_on_meta, find_config
from skillbank.runs import steps

LAYOUT_NODES = (1, 2, 4)


@dataclass(frozen=True)
class Inputs:
    spec: Any
    spec_path: str
    skill: str
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu: str = "h100-80gb"
    mfu: float = est.DEFAULT_MFU
    trials: int = 1
    decode_sample: int = 0  # preflight's --decode-sample: clips decoded to measure their lengths


def model_config(spec: Any) -> ModelConfig:
    value = spec.policy.model_name_or_path
    config = find_config(value)
    if config is None:
        raise InputError(
            f"no config.json found for the model {value!r} (not a local model folder, not in the local Hugging Face cache, and not one the bank ships)",
            where="policy.model_name_or_path",
            fix=f"point it at a local model folder with config.json, download the model into the hub cache, or use one of: {', '.join(bundled_repos())}",
        )
    return config


def token_figures(inputs: Inputs, config: ModelConfig, assumptions: list[str]) -> tuple[dict[str, Any], steps.TrainCount | None]:
    """(tokens_per_sample, the train records counted) from preflight's data scan; without clip lengths, the spec's
    vision budget stands in for every sample (said in `assumptions`)."""
    from skillbank.preflight.run import run_preflight
    from skillbank.preflight.vision import TYPICAL_TEXT_TOKENS, VisionBudget

    report = run_preflight(skill=inputs.skill, action="train", spec_path=inputs.spec_path, only=["data"], decode_sample=inputs.decode_sample)
    stats = report.stats
    counted = stats.get("plan")
    records = steps.TrainCount(counted["annotated_records"], counted["validation_split"]) if counted else None
    if stats.get("errors"):
        assumptions.append(f"preflight found {stats['errors']} error(s) in the data: run `skillbank preflight --spec {inputs.spec_path}` and fix them first")
    tally = stats.get("tokens_per_sample")
    if tally:
        assumptions.append(f"tokens per sample from preflight's scan of {tally['samples']:,} train records ({tally['bound']} estimate): memory at the longest ({tally['max']:,}), time at the mean ({tally['mean']:,})")
        return {**tally, "memory_at": tally["max"], "time_at": tally["mean"], "source": "preflight data scan (stats.tokens_per_sample)"}, records
    patch = int((config.data.get("vision_config") or {}).get("patch_size", 16))
    budget = VisionBudget.from_train_spec(inputs.spec, patch)
    vision = budget.total_pixels // budget.pixels_per_token
    text = TYPICAL_TEXT_TOKENS + budget.text_tokens(0)
    tokens = min(budget.model_max_length, vision + text)
    assumptions.append(
        f"the records state no clip length (duration / num_frames) and none was decoded: every sample is assumed to fill the spec's vision budget, "
        f"custom.vision.total_pixels {budget.total_pixels:,} / {budget.pixels_per_token} pixels per token = {vision:,} vision tokens + ~{text} text tokens "
        f"(capped by policy.model_max_length {budget.model_max_length:,}); add duration to the records or pass --decode-sample K for measured figures"
    )
    return {"samples": 0, "mean": tokens, "max": tokens, "bound": "budget", "memory_at": tokens, "time_at": tokens, "source": "the spec's vision budget (VisionBudget)"}, records


def _tokens(n: float) -> est.Tokens:
    from skillbank.preflight.vision import TYPICAL_TEXT_TOKENS

    return est.Tokens(n, max(0.0, n - TYPICAL_TEXT_TOKENS))


def with_layout(spec: Any, shard: int, nodes: int) -> Any:
    """The spec with dp_shard_size / dp_replicate_size of a layout (what the step arithmetic reads)."""
    par = spec.policy.parallelism.model_copy(update={"dp_shard_size": shard, "dp_replicate_size": nodes})
    return spec.model_copy(update={"policy": spec.policy.model_copy(update={"parallelism": par})})


def layout(inputs: Inputs, arch: est.Arch, count: ParamCount, tokens: dict[str, Any], records: int | None, nodes: int, per_node: int) -> dict[str, Any]:
    """Memory and time of the spec on `nodes` x `per_node` GPUs (one replica per node, FSDP within it)."""
    spec, gpu = inputs.spec, est.GPUS[inputs.gpu]
    par = spec.policy.parallelism
    model_parallel = par.tp_size * par.cp_size * par.pp_size
    shard = max(1, per_node // model_parallel)
    split = with_layout(spec, shard, nodes)
    b = est.DTYPE_BYTES[spec.train.param_dtype]
    lora, ckpt = spec.policy.lora.enable, spec.policy.model_gradient_checkpointing
    mini = spec.train.train_policy.mini_batch

    def mem(checkpointing: bool) -> est.Memory:
        return est.memory(arch, total=count.total, trainable=count.trainable, adapters=count.lora, largest_unit=count.largest_unit, root=count.root,
                          shard=shard * par.tp_size * par.pp_size, b=b, tokens=_tokens(tokens["memory_at"]), mini_batch=mini, checkpointing=checkpointing,
                          sequence_split=par.tp_size * par.cp_size)

    chosen, other = mem(ckpt), mem(not ckpt)
    flops = est.flops_per_sample(arch, count.total, _tokens(tokens["time_at"]), lora=lora, checkpointing=ckpt)
    step_s = est.step_seconds(spec.train.train_batch_per_replica * flops / model_parallel, gpu, inputs.mfu)
    plan = steps.step_plan(split, records) if records else None
    total_steps = plan.total_steps if plan else None
    hours = step_s * total_steps / 3600 if total_steps is not None else None
    usable = gpu.memory_gib * (1 - est.RESERVE)
    gib = chosen.gib()
    return {
        "nodes": nodes,
        "gpus_per_node": per_node,
        "gpus": nodes * per_node,
        "dp_shard_size": shard,
        "dp_replicate_size": nodes,
        "global_batch": shard * nodes * spec.train.train_batch_per_replica,
        "total_steps": total_steps,
        "step_time_s": round(step_s, 2),
        "total_time_h": round(hours, 2) if hours is not None else None,
        "gpu_hours": round(hours * nodes * per_node, 1) if hours is not None else None,
        "memory_per_gpu_gib": round(chosen.total / est.GIB, 2),
        "memory_breakdown_gib": gib,
        "memory_other_checkpointing_gib": round(other.total / est.GIB, 2),
        "activations_gib": {"with_checkpointing": round((chosen if ckpt else other).parts["activations"] / est.GIB, 2),
                            "without_checkpointing": round((other if ckpt else chosen).parts["activations"] / est.GIB, 2)},
        "fits": chosen.total / est.GIB <= usable,
    }


def remedies(spec: Any, breakdown: dict[str, float]) -> str:
    """What lowers memory, the largest part first, leaving out what the spec already does."""
    fixes = {
        "logits": "lower train.train_policy.mini_batch or the tokens per sample (custom.vision.fps / total_pixels)",
        "activations": ("" if spec.policy.model_gradient_checkpointing else "enable policy.model_gradient_checkpointing, ")
        + "lower train.train_policy.mini_batch or custom.vision.fps / total_pixels",
        "optimizer": "" if spec.policy.lora.enable else "enable policy.lora, or use more GPUs per replica (--gpus-per-node)",
        "gradients": "" if spec.policy.lora.enable else "enable policy.lora",
        "weights": "use more GPUs per replica (--gpus-per-node)",
    }
    largest = sorted(breakdown, key=breakdown.get, reverse=True)
    said = [f"{part} ({breakdown[part]:.1f} GiB): {fixes[part]}" for part in largest if fixes.get(part)]
    return "; ".join(said[:3])


def recommend(spec: Any, rows: list[dict[str, Any]], usable: float) -> dict[str, Any]:
    """The fastest layout that fits and trains (and the cheapest in GPU-hours when it differs)."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        return {"nodes": None, "reason": f"no layout fits in {usable:.1f} GiB per GPU; the largest parts: {remedies(spec, rows[0]['memory_breakdown_gib'])}"}
    timed = [r for r in fitting if r["total_steps"]]
    if not timed:
        known = any(r["total_steps"] is not None for r in fitting)
        why = "every layout that fits trains zero steps (fewer records per rank than train.train_batch_per_replica)" if known else \
            "the step count is unknown (no train records counted)"
        return {"nodes": fitting[0]["nodes"] if not known else None, "reason": f"fits in memory, but {why}"}
    fastest = min(timed, key=lambda r: r["total_time_h"])
    cheapest = min(timed, key=lambda r: (r["gpu_hours"], r["gpus"]))
    if fastest is cheapest:
        return {"nodes": fastest["nodes"], "reason": "fits in memory, fastest and fewest GPU-hours"}
    return {"nodes": fastest["nodes"], "cheapest_nodes": cheapest["nodes"],
            "reason": f"fastest that fits ({fastest['total_time_h']} h); {cheapest['nodes']} node(s) cost fewest GPU-hours ({cheapest['gpu_hours']})"}


def build_plan(inputs: Inputs) -> dict[str, Any]:
    spec = inputs.spec
    if inputs.gpu not in est.GPUS:
        raise InputError(f"unknown GPU {inputs.gpu!r}", where="--gpu", fix=f"use one of: {', '.join(est.GPUS)}")
    if not 0 < inputs.mfu <= 1:
        raise InputError(f"--mfu must be in (0, 1] (got {inputs.mfu})", where="--mfu", fix="pass a fraction such as 0.3")
    gpu = est.GPUS[inputs.gpu]
    config = model_config(spec)
    count = count_on_meta(config, spec.policy.lora)
    arch = est.Arch.from_config(config.data)
    assumptions: list[str] = [f"parameters: {count.source}"]
    tokens, counted = token_figures(inputs, config, assumptions)
    records = counted.train if counted else None
    par = spec.policy.parallelism
    per_node = inputs.gpus_per_node or par.dp_shard_size * par.tp_size * par.cp_size * par.pp_size
    nodes = inputs.nodes or par.dp_replicate_size
    rows = [layout(inputs, arch, count, tokens, records, n, per_node) for n in sorted(set(LAYOUT_NODES) | {nodes})]
    main = next(r for r in rows if r["nodes"] == nodes)
    usable = gpu.memory_gib * (1 - est.RESERVE)
    disk = _disk(inputs, count, records, main)
    assumptions += [
        f"GPU {gpu.name}: {gpu.source}; fits = at most {usable:.1f} GiB ({est.RESERVE:.0%} kept for the CUDA context, NCCL buffers and fragmentation)",
        f"MFU {inputs.mfu:g}" + ("" if inputs.mfu != est.DEFAULT_MFU else f" (default: {est.MFU_SOURCE})"),
        f"FSDP as cosmos-rl runs it: fp32 master weights, fp32 gradients and AdamW moments sharded over dp_shard_size x tp x pp of a replica; "
        f"{spec.train.param_dtype} compute copies of the root unit and two blocks gathered",
        "activations: the tensors the Qwen layers save for backward (benchmarks/plan_memory.py checks the formula against a measured run); "
        f"vision tokens = tokens per sample - {_text_tokens()} text tokens, {arch.merge ** 2} patches each in the vision tower",
        "step time: (6 x parameters x tokens, 4 x with LoRA, + causal attention; + one forward with gradient checkpointing) x train_batch_per_replica "
        "per GPU, over peak bf16 FLOPs x MFU; data loading, checkpoint saves and validation not counted",
    ]
    if records is None:
        assumptions.append("train records were not counted (custom.train_dataset.annotation_path missing or unreadable): steps and total time are null")
    return {
        "model": spec.policy.model_name_or_path,
        "gpu": gpu.name,
        "params": count.total,
        "trainable_params": count.trainable,
        "lora_params": count.lora,
        "tokens_per_sample": tokens,
        "train_records": records,
        "nodes": nodes,
        "gpus_per_node": per_node,
        "gradient_checkpointing": spec.policy.model_gradient_checkpointing,
        "memory_per_gpu_gib": main["memory_per_gpu_gib"],
        "memory_breakdown_gib": main["memory_breakdown_gib"],
        "activations_gib": main["activations_gib"],
        "fits": main["fits"],
        "global_batch": main["global_batch"],
        "total_steps": main["total_steps"],
        "step_time_s": main["step_time_s"],
        "total_time_h": main["total_time_h"],
        "checkpoint_gib": disk["checkpoint_gib"],
        "disk_gib": disk["disk_gib"],
        "disk": disk,
        "steps": steps.run_plan(with_layout(spec, main["dp_shard_size"], nodes), counted) if counted else None,
        "layouts": rows,
        "recommendation": recommend(spec, rows, usable),
        "assumptions": assumptions,
    }


def _text_tokens() -> int:
    from skillbank.preflight.vision import TYPICAL_TEXT_TOKENS

    return TYPICAL_TEXT_TOKENS


def _disk(inputs: Inputs, count: ParamCount, records: int | None, main: dict[str, Any]) -> dict[str, Any]:
    spec = inputs.spec
    split = with_layout(spec, main["dp_shard_size"], main["nodes"])
    if inputs.trials > 1:  # an AutoML study: every trial saves and exports each epoch and keeps all (automl.trials)
        from skillbank.automl.trials import TRIAL_CKPT

        split = split.model_copy(update={"train": split.train.model_copy(update={"ckpt": split.train.ckpt.model_copy(update=TRIAL_CKPT)})})
    plan = steps.step_plan(split, records) if records else None
    need = steps.disk_need(split, float(count.total), params_from=count.source, trials=inputs.trials, plan=plan, trained=float(count.trainable))
    if need is None:
        return {"checkpoint_gib": 0.0, "disk_gib": 0.0, "kept": 0, "trials": inputs.trials, "detail": "checkpoints off (train.ckpt.enable_checkpoint false)"}
    return {"checkpoint_gib": round(need.checkpoint_bytes / est.GIB, 2), "disk_gib": round(need.total_bytes / est.GIB, 2),
            "kept": need.kept, "trials": need.trials, "detail": need.detail}


def plan_text(p: dict[str, Any]) -> str:
    """The plan for a person: the same numbers as the JSON."""
    t = p["tokens_per_sample"]
    lines = [
        f"model {p['model']}: {p['params'] / 1e9:.2f}B parameters, {p['trainable_params'] / 1e9:.3f}B trained"
        + (f" ({p['lora_params'] / 1e6:.1f}M LoRA)" if p["lora_params"] else ""),
        f"tokens per sample: mean {t['mean']:,}, max {t['max']:,} ({t['source']})",
        f"on {p['nodes']} node(s) x {p['gpus_per_node']} {p['gpu']}: {p['memory_per_gpu_gib']:.1f} GiB per GPU "
        f"({'fits' if p['fits'] else 'DOES NOT FIT'}; gradient checkpointing {'on' if p['gradient_checkpointing'] else 'off'})",
    ]
    lines += [f"  {k:<17} {v:8.2f} GiB" for k, v in p["memory_breakdown_gib"].items()]
    a = p["activations_gib"]
    lines.append(f"  (activations with gradient checkpointing {a['with_checkpointing']:.2f} GiB, without {a['without_checkpointing']:.2f} GiB)")
    total = f"{p['total_time_h']:.2f} h for {p['total_steps']:,} steps" if p["total_time_h"] is not None else "total unknown (records not counted)"
    lines.append(f"step {p['step_time_s']:.1f} s (global batch {p['global_batch']}); {total}")
    d = p["disk"]
    lines.append(f"checkpoints: {d['checkpoint_gib']:.1f} GiB each, {d['disk_gib']:.1f} GiB on disk ({d['detail']})")
    lines.append("")
    lines.append(f"{'nodes':>5} {'GPUs':>5} {'GiB/GPU':>8} {'fits':>5} {'batch':>6} {'steps':>7} {'step s':>7} {'hours':>7} {'GPU-h':>8}")
    for r in p["layouts"]:
        steps_, hours, gpuh = (f"{r[k]:,}" if isinstance(r[k], int) else (f"{r[k]:.2f}" if r[k] is not None else "-") for k in ("total_steps", "total_time_h", "gpu_hours"))
        lines.append(f"{r['nodes']:>5} {r['gpus']:>5} {r['memory_per_gpu_gib']:>8.1f} {'yes' if r['fits'] else 'NO':>5} {r['global_batch']:>6} {steps_:>7} {r['step_time_s']:>7.1f} {hours:>7} {gpuh:>8}")
    rec = p["recommendation"]
    lines.append(f"recommendation: {rec['nodes']} node(s): {rec['reason']}" if rec["nodes"] else f"recommendation: {rec['reason']}")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in p["assumptions"]]
    return "\n".join(lines)

