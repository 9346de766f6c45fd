"""One layout of a train spec (nodes x GPUs per node, one FSDP replica per node): memory per GPU, steps, time.

A layout keeps the spec's recipe: its global batch (train_batch_per_replica x the spec's data-parallel
ranks) is held and the per-rank batch scales down as GPUs grow (`per_gpu_batch="scaled"`, the default);
when the global batch does not split evenly, or a rank would get less than one mini batch, the row
says what it runs instead. `per_gpu_batch="fixed"` keeps train_batch_per_replica (more GPUs, a larger
global batch: another recipe). Step time is FLOPs at a stated MFU plus the gradient all-reduce between
nodes at a stated bandwidth (timing.allreduce_seconds): the recommendation compares layouts at the same
global batch with that cost in, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillbank.planning import estimate as est
from skillbank.planning import timing
from skillbank.models.params import ParamCount
from skillbank.runs import steps

LAYOUT_NODES = (1, 2, 4)
PER_GPU_BATCH = ("scaled", "fixed")


@dataclass(frozen=True)
class Setting:
    """What every layout of one plan shares."""

    spec: Any
    arch: est.Arch
    count: ParamCount
    tokens: dict[str, Any]
    records: steps.TrainCount | None
    val_records: int | None
    gpu: est.Gpu
    mfu: float
    rates: timing.Rates
    per_gpu_batch: str = "scaled"
    backend: str | None = None  # what a checkpoint holds (runs.disk.checkpoint_size): the trials' / run's backend


def global_batch(spec: Any) -> int:
    return spec.train.train_batch_per_replica * steps.data_parallel_ranks(spec)


def batch_for(spec: Any, ranks: int, mode: str) -> tuple[int, int, str | None]:
    """(train_batch_per_replica, mini_batch, what changed) on `ranks` data-parallel ranks."""
    batch, mini = spec.train.train_batch_per_replica, spec.train.train_policy.mini_batch
    if mode == "fixed":
        return batch, mini, None
    wanted = global_batch(spec)
    per_rank = max(1, wanted // ranks)
    mini_here = max(d for d in range(1, min(mini, per_rank) + 1) if per_rank % d == 0)
    notes = []
    if per_rank * ranks != wanted:
        notes.append(f"the global batch {wanted} does not split over {ranks} ranks: {per_rank} per rank, {per_rank * ranks} in all")
    if mini_here != mini:
        notes.append(f"mini_batch {mini} -> {mini_here} (it must divide the {per_rank} records per rank)")
    return per_rank, mini_here, "; ".join(notes) or None


def layout_spec(spec: Any, shard: int, nodes: int, batch: int, mini: int) -> Any:
    """The spec as a layout runs it (what the step arithmetic reads)."""
    par = spec.policy.parallelism.model_copy(update={"dp_shard_size": shard, "dp_replicate_size": nodes})
    policy = spec.train.train_policy.model_copy(update={"mini_batch": mini})
    train = spec.train.model_copy(update={"train_batch_per_replica": batch, "train_policy": policy})
    return spec.model_copy(update={"policy": spec.policy.model_copy(update={"parallelism": par}), "train": train})


def tokens_of(n: float) -> est.Tokens:
    from skillbank.preflight.vision import TYPICAL_TEXT_TOKENS

    return est.Tokens(n, max(0.0, n - TYPICAL_TEXT_TOKENS))


def memory_of(s: Setting, spec: Any, shard: int, count: ParamCount | None = None) -> tuple[est.Memory, est.Memory]:
    """(memory with the spec's gradient checkpointing, memory with the other setting) per GPU."""
    count = count or s.count
    par = spec.policy.parallelism
    b = est.DTYPE_BYTES[spec.train.param_dtype]

    def mem(checkpointing: bool) -> est.Memory:
        return est.memory(s.arch, total=count.total, trainable=count.trainable, adapters=count.lora, largest_unit=count.largest_unit, root=count.root,
                          shard=shard * par.tp_size * par.pp_size, b=b, tokens=tokens_of(s.tokens["memory_at"]), mini_batch=spec.train.train_policy.mini_batch,
                          checkpointing=checkpointing, sequence_split=par.tp_size * par.cp_size, fused_loss=spec.policy.enable_liger_fused_cross_entropy)

    ckpt = spec.policy.model_gradient_checkpointing
    return mem(ckpt), mem(not ckpt)


def step_seconds(s: Setting, spec: Any, shard: int, nodes: int, count: ParamCount | None = None) -> tuple[float, float]:
    """(step seconds, of which the all-reduce between nodes) of one optimizer step."""
    count = count or s.count
    par = spec.policy.parallelism
    model_parallel = par.tp_size * par.cp_size * par.pp_size
    flops = est.flops_per_sample(s.arch, count.total, tokens_of(s.tokens["time_at"]), lora=spec.policy.lora.enable, checkpointing=spec.policy.model_gradient_checkpointing)
    compute = est.step_seconds(spec.train.train_batch_per_replica * flops / model_parallel, s.gpu, s.mfu)
    comm = timing.allreduce_seconds(count.trainable, shard * par.tp_size * par.pp_size, nodes, s.rates)
    return compute + comm, comm


def run_shape(s: Setting, spec: Any, nodes: int, gpus: int, step_s: float, plan: steps.StepPlan | None, count: ParamCount | None = None) -> timing.RunShape:
    """What the time breakdown needs of a layout: saves, checkpoint bytes, validations."""
    from skillbank import modelref

    from skillbank.runs.disk import checkpoint_size

    count = count or s.count
    ckpts = steps.checkpoint_plan(spec, plan)
    size = checkpoint_size(spec, count, s.backend)
    exports = 1.0 if spec.train.ckpt.export_safetensors else 1.0 / max(1, ckpts.kept if ckpts else 1)  # as runs.disk.run_disk
    val = s.records.split if s.records and s.records.split else (s.val_records or 0)
    forward = est.forward_flops(s.arch, count.total, tokens_of(s.tokens["time_at"]))
    return timing.RunShape(
        params=float(count.total), trainable=float(count.trainable), hub_model=modelref.parse(spec.policy.model_name_or_path).kind == "hub",
        nodes=nodes, gpus=gpus, total_steps=plan.total_steps if plan else None, step_s=step_s, saves=ckpts.saved if ckpts else 0,
        state_bytes=size.state if ckpts else 0.0, export_bytes=size.export * exports if ckpts else 0.0, validations=timing.validations(spec, plan), val_records=val, val_flops_per_sample=forward,
    )


@dataclass(frozen=True)
class Timed:
    """A layout's spec, its step arithmetic and what its time depends on (planning.limit reads it too)."""

    spec: Any
    shard: int
    changed: str | None
    step_s: float
    comm_s: float
    plan: steps.StepPlan | None
    shape: timing.RunShape


def timed(s: Setting, nodes: int, per_node: int) -> Timed:
    par = s.spec.policy.parallelism
    shard = max(1, per_node // (par.tp_size * par.cp_size * par.pp_size))
    batch, mini, changed = batch_for(s.spec, shard * nodes, s.per_gpu_batch)
    spec = layout_spec(s.spec, shard, nodes, batch, mini)
    step_s, comm_s = step_seconds(s, spec, shard, nodes)
    plan = steps.step_plan(spec, s.records.train) if s.records else None
    return Timed(spec, shard, changed, step_s, comm_s, plan, run_shape(s, spec, nodes, nodes * per_node, step_s, plan))


def layout(s: Setting, nodes: int, per_node: int) -> dict[str, Any]:
    """Memory and time of the spec on `nodes` x `per_node` GPUs (one replica per node, FSDP within it)."""
    t = timed(s, nodes, per_node)
    spec, shard, changed, step_s, comm_s, plan = t.spec, t.shard, t.changed, t.step_s, t.comm_s, t.plan
    batch, mini = spec.train.train_batch_per_replica, spec.train.train_policy.mini_batch
    chosen, other = memory_of(s, spec, shard)
    times = timing.breakdown(t.shape, s.gpu, s.mfu, s.rates)
    hours = times["total"] if times else None
    ckpt = spec.policy.model_gradient_checkpointing
    return {
        "nodes": nodes,
        "gpus_per_node": per_node,
        "gpus": nodes * per_node,
        "dp_shard_size": shard,
        "dp_replicate_size": nodes,
        "train_batch_per_replica": batch,
        "mini_batch": mini,
        "global_batch": batch * shard * nodes,
        "batch_note": changed,
        "total_steps": plan.total_steps if plan else None,
        "step_time_s": round(step_s, 2),
        "allreduce_s": round(comm_s, 3),
        "time_breakdown_h": times,
        "total_time_h": hours,
        "gpu_hours": round(hours * nodes * per_node, 1) if hours is not None else None,
        "memory_per_gpu_gib": round(chosen.total / est.GIB, 2),
        "memory_breakdown_gib": chosen.gib(),
        "memory_other_checkpointing_gib": round(other.total / est.GIB, 2),
        "activations_gib": {"with_checkpointing": round((chosen if ckpt else other).parts["activations"] / est.GIB, 2),
                            "without_checkpointing": round((other if ckpt else chosen).parts["activations"] / est.GIB, 2)},
        "fits": chosen.total / est.GIB <= usable(s.gpu),
    }


def usable(gpu: est.Gpu) -> float:
    return gpu.memory_gib * (1 - est.RESERVE)


def recommend(rows: list[dict[str, Any]], gpu: est.Gpu, fits_with: list[dict[str, Any]], *, batch: int | None = None,
              stated: tuple[int, str] | None = None) -> dict[str, Any]:
    """The layout to train on: the nodes the user stated (`stated`: (nodes, who said so)) when that row fits and trains,
    else the fastest that fits at the spec's global batch `batch` (and the cheapest in GPU-hours when it differs). A row
    that changes the global batch is another recipe: never called "at the spec's global batch", and named only beside
    the pick when it would be faster."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        fixes = "; ".join(" ".join(f["set"]) + f" ({f['memory_per_gpu_gib']:.1f} GiB)" for f in fits_with) or "none of mini_batch 1, gradient checkpointing, the fused loss or LoRA is enough: more GPUs per replica (--gpus-per-node) or fewer tokens per sample (custom.vision.fps / total_pixels)"
        return {"nodes": None, "reason": f"no layout fits in {usable(gpu):.1f} GiB per GPU; settings that fit (fits_with): {fixes}"}
    timed = [r for r in fitting if r["total_steps"]]
    if not timed:
        known = any(r["total_steps"] is not None for r in fitting)
        why = "every layout that fits trains zero steps (fewer records per rank than train.train_batch_per_replica)" if known else \
            "the step count is unknown (no train records counted)"
        return {"nodes": fitting[0]["nodes"] if not known else None, "reason": f"fits in memory, but {why}"}
    same = [r for r in timed if batch is None or r["global_batch"] == batch]
    at = f"at the spec's global batch {batch}" if batch is not None else "at the spec's global batch"
    other = _faster_other_batch(timed, same, batch)
    if stated is not None:
        nodes, who = stated
        row = next((r for r in timed if r["nodes"] == nodes), None)
        if row is not None:
            batch_said = at if row in same else f"at global batch {row['global_batch']} ({row['batch_note']})"
            fastest = min(same or timed, key=lambda r: r["total_time_h"])
            also = "" if fastest is row else f"; {fastest['nodes']} node(s) would take {fastest['total_time_h']} h {at}"
            return {"nodes": nodes, "stated_by": who,
                    "reason": f"as {who} states: fits, {row['total_time_h']} h {batch_said}{also}{other}"}
    if not same:
        fastest = min(timed, key=lambda r: r["total_time_h"])
        return {"nodes": fastest["nodes"], "reason": f"no layout that fits trains {at}; fastest that fits: {fastest['nodes']} node(s) at global batch "
                                                     f"{fastest['global_batch']} ({fastest['batch_note']})"}
    fastest = min(same, key=lambda r: r["total_time_h"])
    cheapest = min(same, key=lambda r: (r["gpu_hours"], r["gpus"]))
    if fastest is cheapest:
        return {"nodes": fastest["nodes"], "reason": f"fits in memory, fastest and fewest GPU-hours {at}{other}"}
    return {"nodes": fastest["nodes"], "cheapest_nodes": cheapest["nodes"],
            "reason": f"fastest that fits {at} ({fastest['total_time_h']} h, all-reduce between nodes included); "
                      f"{cheapest['nodes']} node(s) cost fewest GPU-hours ({cheapest['gpu_hours']}){other}"}


def _faster_other_batch(timed: list[dict[str, Any]], same: list[dict[str, Any]], batch: int | None) -> str:
    """'; N node(s) would be faster but ...' for the fastest row that changes the global batch, when it beats every same-batch row."""
    others = [r for r in timed if r not in same]
    if not others or not same:
        return ""
    quick = min(others, key=lambda r: r["total_time_h"])
    if quick["total_time_h"] >= min(r["total_time_h"] for r in same):
        return ""
    return (f"; {quick['nodes']} node(s) would take {quick['total_time_h']} h but change the recipe: global batch {quick['global_batch']} "
            f"instead of {batch} ({quick['batch_note']})")
