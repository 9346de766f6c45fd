"""What a diagnosed run was configured as, and what `skillbank plan` says that configuration needs.

A run folder keeps its configuration: the local backend's spec.json (a train spec), the cosmos-rl
backend's cosmos_rl.toml, and in every checkpoint cosmos-rl's whole config (`cosmos_config`, JSON).
Diagnose reads it for the numbers of a cause (policy.model_max_length, mini_batch) and, when the run
died of CUDA OOM, asks the planner (planning.plan.build_plan, its public function, keyword arguments
only) for the memory per GPU of that spec: the figure to compare with the GPU, and its parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbank.runs import layout

SKILL = "tao-finetune-cosmos-reason"
PLAN_GPU = "h100-80gb"  # the planner's default GPU: a run folder does not say which GPU it ran on


def config_file(run_dir: Path | None, checkpoint: Path | None) -> Path | None:
    """The run's own configuration: spec.json / cosmos_rl.toml in the run folder, else the newest
    complete checkpoint's cosmos_config (a run skillbank did not launch)."""
    kept = layout.run_spec_file(run_dir) if run_dir is not None else None
    if kept is not None:
        return kept
    if checkpoint is not None and (checkpoint / layout.CONFIG_FILE).is_file():
        return checkpoint / layout.CONFIG_FILE
    return None


def read_config(path: Path | None) -> dict[str, Any]:
    """The configuration as a dict ({} when there is none or it cannot be read)."""
    if path is None:
        return {}
    from skillbank.errors import InputError
    from skillbank.specification.io import read_spec_file

    try:
        return read_spec_file(path)
    except InputError:
        return {}


def train_spec(path: Path, data: dict[str, Any]) -> Any:
    """The configuration as the skill's train spec: a cosmos-rl config through `spec --from`'s
    conversion (cosmos-rl's defaults kept for the keys it leaves out). Raises InputError."""
    from skillbank.specification.build import load_template
    from skillbank.specification.cosmos_config import from_cosmos, is_cosmos_config
    from skillbank.specification.registry import spec_model
    from skillbank.specification.validation import validate

    model = spec_model(SKILL, "train")
    if is_cosmos_config(data, path):
        data = from_cosmos(model, data, load_template(SKILL, "train"), where=str(path)).data
    return validate(model, data, source=str(path))


def oom_plan(path: Path | None, data: dict[str, Any]) -> dict[str, Any]:
    """{memory_per_gpu_gib, usable, fits, gpu, memory_breakdown_gib, fits_with?, assumptions, spec} of
    the run's spec from `skillbank plan`, or {"unavailable": why}."""
    if path is None or not data:
        return {"unavailable": "the run folder keeps no spec or config (spec.json, cosmos_rl.toml, a checkpoint's cosmos_config)"}
    try:
        from skillbank.planning.inputs import Inputs
        from skillbank.planning.plan import build_plan

        spec = train_spec(path, data)
        plan = build_plan(Inputs(spec=spec, skill=SKILL, gpu=PLAN_GPU, has_data=bool(spec.custom.train_dataset.annotation_path)))
    except Exception as exc:  # noqa: BLE001 - a figure we cannot get must not hide the diagnosis
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return {"unavailable": f"`skillbank plan` could not size this run's spec: {message}"}
    keep = ("memory_per_gpu_gib", "memory_breakdown_gib", "fits", "gpu", "gpus_per_node", "nodes", "fits_with", "assumptions")
    return {**{k: plan[k] for k in keep if k in plan}, "spec": str(path)}


def plan_sentence(plan: dict[str, Any]) -> str:
    """One sentence of the plan's figure for the cause line."""
    if "memory_per_gpu_gib" not in plan:
        return plan.get("unavailable", "")
    parts = plan.get("memory_breakdown_gib") or {}
    largest = ", ".join(f"{k} {v:.1f}" for k, v in sorted(parts.items(), key=lambda kv: kv[1], reverse=True)[:3])
    verdict = "fits" if plan.get("fits") else "does NOT fit"
    return (f"`skillbank plan` of this run's spec: ~{plan['memory_per_gpu_gib']:.1f} GiB per GPU on {plan.get('gpu', PLAN_GPU)} "
            f"(assumed: the run folder does not say which GPU), which {verdict}; largest parts (GiB): {largest}")
