"""How long a run takes, with what dominates short runs: start-up, checkpoint writes and validation beside the steps.

`time_breakdown_h`:
- compute: optimizer steps x step time (FLOPs at a stated MFU, plus the gradient all-reduce between nodes);
- startup: launching (a stated constant: controller, redis, torchrun, NCCL init, building the model) plus
  the weights downloaded from the Hub (a hub model; 0 for a local folder) and read by every node, each at a stated bandwidth;
- checkpoint: each save writes the sharded model and optimizer state (every node its share, in parallel)
  and the export (one writer), at a stated write bandwidth per node, counted in full (async saves overlap
  training only partly);
- validation: a forward pass over the validation records at each validation, on every GPU at the same MFU.
`total_time_h` is their sum. Every bandwidth is in `Rates` (flags of `skillbank plan`) and said in the
assumptions. `slurm_time`: the total with a margin, as `sbatch --time` reads it (`skillbank submit` uses it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from skillbank.planning import estimate as est

GIB = est.GIB
MARGIN = 0.25  # of the total, for restarts, slow nodes and a slower MFU than planned
MARGIN_MIN = 15  # minutes added on top
SLURM_STEP_MIN = 15  # the suggestion is rounded up to this


@dataclass(frozen=True)
class Rates:
    """Bandwidths and fixed costs a plan assumes (GiB/s, minutes); each has a `skillbank plan` flag."""

    download_gibps: float = 0.25  # Hugging Face Hub download of the weights, per node
    read_gibps: float = 2.0  # reading the weights from the node's file system into the GPUs
    write_gibps: float = 1.0  # checkpoint writes, per node, to the shared file system
    internode_gibps: float = 45.0  # per GPU between nodes (one 400 Gb/s InfiniBand link per GPU)
    launch_min: float = 3.0  # processes, redis, NCCL init, building the sharded model

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def said(self) -> str:
        return (f"bandwidths (GiB/s): Hub download {self.download_gibps:g} per node (--download-gibps), weights read {self.read_gibps:g} per node "
                f"(--read-gibps), checkpoint writes {self.write_gibps:g} per node (--write-gibps), between nodes {self.internode_gibps:g} per GPU "
                f"(--internode-gibps); launch {self.launch_min:g} min (--launch-minutes)")


def allreduce_seconds(trainable: float, shard_gpus: int, nodes: int, rates: Rates) -> float:
    """The gradient all-reduce between a node's replicas (HSDP: each GPU its fp32 shard, a ring over the nodes),
    not overlapped with compute (an upper bound); inside a node FSDP's collectives go over NVLink and overlap."""
    if nodes <= 1:
        return 0.0
    shard_bytes = trainable * est.GRAD_BYTES / shard_gpus
    return 2 * (nodes - 1) / nodes * shard_bytes / (rates.internode_gibps * GIB)


@dataclass(frozen=True)
class RunShape:
    """What the time of a run depends on beyond the step time."""

    params: float
    trainable: float
    hub_model: bool  # the weights come from the Hub (downloaded before launch)
    nodes: int
    gpus: int
    total_steps: int | None
    step_s: float
    saves: int  # checkpoints written over the run
    state_bytes: float  # one checkpoint's sharded model + optimizer state
    export_bytes: float  # one checkpoint's safetensors export
    validations: int
    val_records: int
    val_flops_per_sample: float


def startup_seconds(shape: RunShape, rates: Rates) -> float:
    """Launching, plus the bf16 weights the run starts from downloaded (a Hub model) and read."""
    weights = shape.params * 2
    return rates.launch_min * 60 + weights / (rates.read_gibps * GIB) + (weights / (rates.download_gibps * GIB) if shape.hub_model else 0.0)


def save_seconds(shape: RunShape, rates: Rates) -> float:
    """One save: the sharded state over the nodes (in parallel) + the export (one writer)."""
    return shape.state_bytes / (rates.write_gibps * GIB * shape.nodes) + shape.export_bytes / (rates.write_gibps * GIB)


def seconds(shape: RunShape, gpu: est.Gpu, mfu: float, rates: Rates) -> dict[str, float]:
    """The time breakdown in seconds (the step count must be known)."""
    validation = shape.validations * shape.val_records * shape.val_flops_per_sample / (shape.gpus * gpu.bf16_tflops * 1e12 * mfu)
    return {"compute": (shape.total_steps or 0) * shape.step_s, "startup": startup_seconds(shape, rates),
            "checkpoint": shape.saves * save_seconds(shape, rates), "validation": validation}


def breakdown(shape: RunShape, gpu: est.Gpu, mfu: float, rates: Rates) -> dict[str, float] | None:
    """time_breakdown_h (hours per part, and total); None when the step count is unknown."""
    if shape.total_steps is None:
        return None
    parts = seconds(shape, gpu, mfu, rates)
    hours = {k: round(v / 3600, 3) for k, v in parts.items()}
    return {**hours, "total": round(sum(parts.values()) / 3600, 3)}


def slurm_format(minutes: int) -> str:
    """Minutes as `sbatch --time` reads them: HH:MM:SS, D-HH:MM:SS past a day."""
    days, rest = divmod(int(minutes), 24 * 60)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


def slurm_time(total_h: float | None) -> dict[str, Any] | None:
    """The total with a margin, rounded up, as `sbatch --time` reads it (D-HH:MM:SS past a day)."""
    if total_h is None:
        return None
    minutes = total_h * 60 * (1 + MARGIN) + MARGIN_MIN
    minutes = int(math.ceil(minutes / SLURM_STEP_MIN) * SLURM_STEP_MIN)
    return {"value": slurm_format(minutes), "hours": round(minutes / 60, 2),
            "margin": f"{MARGIN:.0%} of {total_h:.2f} h + {MARGIN_MIN} min, rounded up to {SLURM_STEP_MIN} min"}


def validations(spec: Any, plan: Any) -> int:
    """How often cosmos-rl validates: every validation.freq_in_epoch x steps-per-epoch steps (the TOML's validation.freq)."""
    if plan is None or not spec.validation.enable or not plan.steps_per_epoch:
        return 0
    return plan.total_steps // max(1, spec.validation.freq_in_epoch * plan.steps_per_epoch)
