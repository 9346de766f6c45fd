"""`skillbank rl`: prepare a GRPO run (the rl action) for cosmos-rl: preflight, the TOML, the command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SKILL = "tao-finetune-cosmos-reason"
DESCRIPTION = """\
Prepare reinforcement learning (GRPO) after SFT, from an rl spec
(skillbank spec --skill tao-finetune-cosmos-reason --action rl --set start=<SFT run>/safetensors/step_N ...):
preflight (spec and data must pass; GPUs, redis-server and the token are listed as "check on the node"),
then a run folder <train.output_dir>/<YYYYmmddHHMMSS>/ with cosmos_rl.toml, and the command that
launches it on the training machine:

  cosmos-rl --config <run>/cosmos_rl.toml --log-dir <run>/logs <skillbank>/training/cosmos_rl/grpo_script.py

Nothing is launched. hf_model://owner/repo is written as the bare id (cosmos-rl downloads it).
Checkpoints land in <run>/checkpoints/step_N and exports in <run>/safetensors/step_N (evaluate reads those).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rl", help="prepare a GRPO (RL) run after SFT: preflight, cosmos-rl TOML, launch command",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True, help="rl spec file (YAML or JSON)")
    p.add_argument("--gpus-per-node", type=int, help="GPUs the training machine has (policy + rollout GPUs must fit)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def prepare(spec_path: str | Path, *, gpus_per_node: int | None = None) -> dict[str, Any]:
    """Preflight, then the run folder and its TOML; returns what the command prints."""
    from skillbank.preflight.run import run_preflight
    from skillbank.spec.io import load_spec
    from skillbank.spec.rl import RlSpec
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.grpo import build_grpo_toml
    from skillbank.training.cosmos_rl.launch import RunLayout, resolve_model
    from skillbank.training.cosmos_rl.toml import write_toml

    spec = load_spec(spec_path, RlSpec)
    report = run_preflight(skill=SKILL, action="rl", spec_path=spec_path, gpus_per_node=gpus_per_node, runs_on="node")
    report.require_ok(skill=SKILL, action="rl", spec_path=spec_path)
    model, notes = resolve_model(spec.policy.model_name_or_path, dry_run=True)
    family = family_of(model)
    layout = RunLayout.new(spec.train.output_dir)
    built = build_grpo_toml(spec, model=model, family=family, run_dir=layout.run_dir, run_id=layout.run_id)
    write_toml(layout.toml_path, built.data)
    script = Path(__file__).with_name("cosmos_rl") / "grpo_script.py"
    summary = report.summary()
    return {
        "ok": True,
        "run_dir": str(layout.run_dir),
        "toml": str(layout.toml_path),
        "command": ["cosmos-rl", "--config", str(layout.toml_path), "--log-dir", str(layout.log_dir), str(script)],
        "model": model,
        "family": family.model_type,
        "gpus": {"policy": built.policy_gpus, "rollout": built.rollout_gpus, "total": built.gpus},
        "rewards": dict(spec.train.train_policy.reward_function),
        "plan": report.stats.get("rl_plan"),
        "warnings": [f"{f.where}: {f.message}" for f in report.warnings],
        "check_on_node": summary["check_on_node"],
        "notes": [*notes, *built.notes],
    }


def run(args: argparse.Namespace) -> int:
    out = prepare(args.spec, gpus_per_node=args.gpus_per_node)
    if args.json:
        print(json.dumps(out))
        return 0
    gpus = out["gpus"]
    lines = [
        "GRPO run prepared (nothing launched)",
        f"  run folder : {out['run_dir']}",
        f"  TOML       : {out['toml']}",
        f"  model      : {out['model']} ({out['family']})",
        f"  GPUs       : policy {gpus['policy']} + rollout {gpus['rollout']} = {gpus['total']}",
        f"  rewards    : {', '.join(f'{k} x {v:g}' for k, v in out['rewards'].items())}",
        *(f"  plan       : {k} {v}" for k, v in (out["plan"] or {}).items()),
        *(f"  warning    : {w}" for w in out["warnings"]),
        *(f"  on node    : {c}" for c in out["check_on_node"]),
        *(f"  note       : {n}" for n in out["notes"]),
        "launch on the training machine:",
        "  " + " ".join(out["command"]),
    ]
    print("\n".join(lines))
    return 0
