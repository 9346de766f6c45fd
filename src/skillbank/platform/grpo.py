"""An rl (GRPO) job's cosmos-rl TOMLs, rendered into its job folder at submit (fresh, and with
train.resume for a requeued or re-submitted attempt), as the node sees every path.

The start checkpoint may exist only on the node: its family (the data packer, the pixels per
token) comes from --model-family, its config.json read at LOCAL under --path-map, or its name
(skillbank.training.cosmos_rl.family.node_family).
"""

from __future__ import annotations

from pathlib import Path

from skillbank.platform.context import RL_TOMLS, JobContext


def render_grpo_tomls(ctx: JobContext) -> tuple[Path, Path, list[str]]:
    """Write <job>/cosmos-rl.toml and <job>/cosmos-rl-resume.toml; returns their paths and the notes."""
    from skillbank.training.cosmos_rl.family import node_family
    from skillbank.training.cosmos_rl.grpo import build_grpo_toml
    from skillbank.training.cosmos_rl.launch import resolve_model
    from skillbank.training.cosmos_rl.toml import write_toml

    model, notes = resolve_model(ctx.spec.policy.model_name_or_path, dry_run=True)  # the node loads the path (or downloads the id) itself
    here = ctx.here(model) if model.startswith("/") else None
    family = node_family(model, here=here, given=ctx.model_family)
    out = []
    for name, resume in zip(RL_TOMLS, (False, True)):
        built = build_grpo_toml(ctx.spec, model=model, family=family, run_dir=ctx.run_dir, run_id=ctx.job_id, resume=resume)  # type: ignore[arg-type]
        out.append(write_toml(ctx.job_dir / name, built.data))
    return out[0], out[1], [*notes, *built.notes, f"GRPO on {family.model_type}: policy {built.policy_gpus} + rollout {built.rollout_gpus} GPUs"]
