"""Plan and launch `skillbank rl --backend local`: GRPO in one process on this machine (CPU or one GPU).

The launcher resolves the start (an SFT export, or hf_model://owner/repo downloaded first), counts the
policy steps, picks or creates the run folder (a resume continues the run of the newest complete
checkpoint), writes the validated rl spec there as spec.json and runs
`python -m skillbank.training.local.grpo`. The GPU split of the spec (policy.parallelism, rollout.num_gpus,
rollout.parallelism, gpu_memory_utilization) and redis are cosmos-rl's: here the policy samples its own
rollouts, and the plan says so.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from skillbank.errors import InputError
from skillbank.training import monitor
from skillbank.runs import layout
from skillbank.training.local.grpo import GrpoPlan
from skillbank.training.local.launch import LocalPlan, launch, pick_run_dir, resolve_model, run_outputs
from skillbank.training.local.process import process_args

WORKER = "skillbank.training.local.grpo"


def count_prompts(spec) -> int:
    from skillbank.data.records import load_records

    return len(load_records(spec.custom.train_dataset.annotation_path))


def plan_rl_local(spec, *, resume: bool = False, dry_run: bool = False) -> LocalPlan:
    """Everything short of launching (nothing is created or downloaded in a dry run)."""
    from skillbank.runs.steps import BATCH_KEY, no_step, split_groups

    g, batch = spec.rollout.n_generation, spec.train.train_batch_per_replica
    prompts = count_prompts(spec)
    for problem in (split_groups(spec), no_step(spec, prompts)):  # preflight's rules, for callers that skip it
        if problem:
            raise InputError(problem[0], where=BATCH_KEY, fix=problem[1])
    counted = GrpoPlan(spec, prompts)
    steps_per_epoch, total = counted.steps_per_epoch, counted.total_steps
    model_path, notes = resolve_model(spec.policy.model_name_or_path, download=not dry_run)
    notes.append(f"one process samples its own rollouts ({batch // g} prompts x {g} samples per step); policy.parallelism, "
                 "rollout.num_gpus, rollout.parallelism, rollout.gpu_memory_utilization and redis are cosmos-rl settings")
    if spec.train.param_dtype != "float32":
        notes.append(f"param_dtype {spec.train.param_dtype} applies on GPU (autocast); CPU computes in float32")
    if spec.train.ckpt.enable_checkpoint and spec.train.ckpt.save_mode == "async":
        notes.append("train.ckpt.save_mode async is a cosmos-rl setting: the local backend writes checkpoints synchronously")
    output_dir = Path(spec.train.output_dir)
    resume_from = layout.newest_complete_checkpoint(output_dir) if resume else None
    if resume and resume_from is None:
        notes.append(f"--resume: no complete checkpoint under {output_dir}; starting a new run")
    run_dir = pick_run_dir(output_dir, resume_from, dry_run=dry_run)
    argv = [sys.executable, *process_args(WORKER, run_dir, model_path, resume_from)]
    plan = {"prompts": prompts, "samples_per_step": batch, "prompts_per_step": batch // g, "n_generation": g,
            "steps_per_epoch": steps_per_epoch, "total_steps": total, "epochs": spec.train.epoch}
    return LocalPlan(argv, 1, run_dir, model_path, resume_from, prompts, steps_per_epoch, total, notes, plan)


def rl_summary(run_dir: Path) -> dict[str, Any]:
    rows = [r for r in layout.read_metrics(run_dir) if "reward_mean" in r]
    return {
        **run_outputs(run_dir),
        "last_step": rows[-1]["step"] if rows else 0,
        "first_reward": rows[0]["reward_mean"] if rows else None,
        "last_reward": rows[-1]["reward_mean"] if rows else None,
        "last_kl": rows[-1]["kl"] if rows else None,
    }


def rl_local(spec, *, resume: bool = False, dry_run: bool = False, job: Any = None, log: Callable[[str], None] = print,
             stdout: Any = None) -> dict[str, Any]:
    """Run (or plan, with dry_run) GRPO on this machine. Returns the plan (dry run) or a summary.
    Raises RunError when the process fails."""
    plan = plan_rl_local(spec, resume=resume, dry_run=dry_run)
    p = plan.plan
    log(f"local backend: GRPO in one process, {plan.total_steps} policy steps ({plan.steps_per_epoch} per epoch, "
        f"{p['prompts']} prompts, {p['prompts_per_step']} prompts x {p['n_generation']} samples per step)")
    log(f"  run folder : {plan.run_dir}")
    log(f"  model      : {plan.model_path}")
    log(f"  resume from: {plan.resume_from or '-'}")
    log(f"  command    : {' '.join(plan.argv)}")
    for line in [*(f"note       : {n}" for n in plan.notes), *monitor.where_to_look(plan.run_dir, spec.logging.logger)]:
        log(f"  {line}")
    if dry_run:
        return {"dry_run": True, **plan.to_dict()}
    launch(plan, spec, job=job, stdout=stdout, log=log, name="local GRPO", process="python")
    result = rl_summary(plan.run_dir)
    if job is not None:
        job.update(**{k: v for k, v in result.items() if k in ("last_step", "final_safetensors", "last_reward", "last_kl", "tensorboard")})
    log(f"local GRPO finished: step {result['last_step']}, reward {result['first_reward']} -> {result['last_reward']}, "
        f"final export {result['final_safetensors']}")
    return result

