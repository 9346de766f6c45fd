"""Plan and launch `skillbank train --backend local`: torchrun over the worker module, no shell.

The launcher resolves the model (hf_model://owner/repo is downloaded first), counts the steps,
picks or creates the run folder (a resume continues the run folder of the newest complete
checkpoint), writes the validated spec there as spec.json, and runs
`python -m skillbank.training.local.torchrun --standalone --nproc_per_node=W -m skillbank.training.local.worker`
(torchrun, quiet on a requested stop: `torchrun`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic, modelref, procs
from skillbank.errors import InputError, RunError
from skillbank.data.examples import pixels_per_token
from skillbank.data.video import default_total_pixels
from skillbank.training import monitor, upload
from skillbank.runs import layout
from skillbank.runs import steps
from skillbank.training.local.process import process_args

WORKER = "skillbank.training.local.worker"
MODEL_KEY = "policy.model_name_or_path"


@dataclass
class LocalPlan:
    argv: list[str]
    world: int
    run_dir: Path
    model_path: str
    resume_from: Path | None
    train_records: int
    steps_per_epoch: int
    total_steps: int
    notes: list[str] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # skillbank.runs.steps.run_plan

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": "local",
            "argv": self.argv,
            "world_size": self.world,
            "run_dir": str(self.run_dir),
            "model_path": self.model_path,
            "resume_from": str(self.resume_from) if self.resume_from else None,
            "train_records": self.train_records,
            "steps_per_epoch": self.steps_per_epoch,
            "total_steps": self.total_steps,
            "plan": self.plan,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        return [
            f"local backend: {self.world} rank(s), {self.total_steps} steps ({self.steps_per_epoch} per epoch, {self.train_records} train records)",
            f"  run folder : {self.run_dir}",
            f"  model      : {self.model_path}",
            f"  resume from: {self.resume_from or '-'}",
            f"  command    : {' '.join(self.argv)}",
            *(f"  {line}" for line in (steps.plan_lines(self.plan) if self.plan else [])),
            *(f"  note       : {n}" for n in self.notes),
        ]


def resolve_model(ref: str, *, download: bool) -> tuple[str, list[str]]:
    """A local folder with config.json; hf_model://owner/repo or owner/repo is snapshot-downloaded
    (a dry run names the id and says so)."""
    path = modelref.local_folder(ref, where=MODEL_KEY, fetch=download)
    hub = modelref.parse(ref).kind == "hub"
    return path, [f"{ref} would be downloaded with huggingface_hub.snapshot_download before launch"] if hub and not download else []


def pick_run_dir(output_dir: Path, resume_from: Path | None, *, dry_run: bool, fixed: Path | None = None) -> Path:
    """The run a resume continues; else the fixed run folder (--run-dir: a submitted job's), else a new
    timestamped one (a dry run only names it)."""
    if resume_from is not None:
        return layout.run_of(resume_from).resolve()
    if fixed is not None:
        if not dry_run:
            fixed.mkdir(parents=True, exist_ok=True)
        return fixed.resolve()
    if dry_run:
        return (output_dir / layout.timestamp()).resolve()
    return layout.new_run_dir(output_dir).resolve()


def check_fixed_run(run_dir: Path | None, resume: bool) -> Path | None:
    """--run-dir: the newest complete checkpoint a --resume continues (only this run's, never a sibling's);
    a folder holding checkpoints without --resume is refused (it would be overwritten)."""
    if run_dir is None:
        return None
    newest = layout.newest_complete_checkpoint(run_dir) if (run_dir / "checkpoints").is_dir() else None
    if newest is not None and not resume:
        raise InputError(f"--run-dir {run_dir} already holds checkpoints (newest {newest})", where="--run-dir",
                         fix="add --resume to continue it, or name a new run folder")
    return newest


def check_ranks(checkpoint: Path, world: int, *, flag: str) -> None:
    """A checkpoint holds one shard per saving rank: it loads only into the same number of ranks."""
    ranks = layout.saving_ranks(checkpoint)
    if ranks != world:
        raise InputError(
            f"checkpoint {checkpoint} was written by {ranks} rank(s); this spec runs {world}",
            where="policy.parallelism.dp_shard_size",
            fix=f"set policy.parallelism.dp_shard_size to {ranks} (the checkpoint's ranks), or start a new run without {flag}",
        )


def plan_local(spec, *, resume: bool = False, dry_run: bool = False, resume_from: Path | None = None, run_dir: Path | None = None) -> LocalPlan:
    """Everything short of launching (nothing is created or downloaded in a dry run).

    resume: continue the run of the newest complete checkpoint under train.output_dir (its folder).
    resume_from: a complete step_N/policy folder (`skillbank.runs.layout.resolve_checkpoint`) of this
    run or another; a NEW run folder starts from its weights, optimizer, schedule and step. With both,
    the newest checkpoint under output_dir wins when there is one (a requeued job continues its own run).
    run_dir: the run folder is this one (a submitted job's, fixed at submit); resume looks only in it.
    """
    par = spec.policy.parallelism
    for key in ("tp_size", "cp_size", "pp_size"):
        if getattr(par, key) != 1:
            raise InputError(f"the local backend shards with FSDP only; policy.parallelism.{key} is {getattr(par, key)}", where=f"policy.parallelism.{key}", fix="set it to 1, or use --backend cosmos-rl")
    world = steps.data_parallel_ranks(spec)
    count = steps.read_train_count(spec)  # without torch
    plan = steps.step_plan(spec, count.train)
    problem = steps.steps_problem(spec, count)
    if problem is not None and problem.severity == "error":
        raise InputError(f"zero training steps: {problem.message}", where=problem.where, fix=problem.fix)
    model_path, notes = resolve_model(spec.policy.model_name_or_path, download=not dry_run)
    if spec.train.param_dtype != "float32":
        notes.append(f"param_dtype {spec.train.param_dtype} applies on GPU; CPU ranks compute in float32")
    if spec.train.train_policy.dataloader_num_workers:
        notes.append("train.train_policy.dataloader_num_workers is a cosmos-rl setting: each local rank builds its examples "
                     "in-process and caches them after the first epoch")
    if spec.train.ckpt.enable_checkpoint and spec.train.ckpt.save_mode == "async":
        notes.append("train.ckpt.save_mode async is a cosmos-rl setting: the local backend writes checkpoints synchronously")
    output_dir = Path(spec.train.output_dir)
    chosen, continue_run = resume_from, False
    fixed = Path(run_dir).expanduser() if run_dir is not None else None
    if resume:
        newest = check_fixed_run(fixed, resume) if fixed is not None else layout.newest_complete_checkpoint(output_dir)
        if newest is not None:
            chosen, continue_run = newest, True
        elif resume_from is None:
            notes.append(f"--resume: no complete checkpoint under {fixed or output_dir}; starting a new run")
        else:
            notes.append(f"--resume: no complete checkpoint under {output_dir} yet; starting from --resume-from {resume_from}")
    if chosen is not None and chosen.exists():
        check_ranks(chosen, world, flag="--resume" if continue_run else "--resume-from")
    elif chosen is not None:
        notes.append(f"--resume-from {chosen} is not on this machine: it must be a complete checkpoint on the machine that trains")
    if fixed is not None and not resume:
        check_fixed_run(fixed, resume)
    run_dir = pick_run_dir(output_dir, chosen if continue_run else None, dry_run=dry_run, fixed=fixed)
    resume_from = chosen
    argv = [sys.executable, "-m", "skillbank.training.local.torchrun", "--standalone", f"--nproc_per_node={world}",
            *process_args(WORKER, run_dir, model_path, resume_from)]
    return LocalPlan(argv, world, run_dir, model_path, resume_from, count.train, plan.steps_per_epoch, plan.total_steps, notes,
                     steps.run_plan(spec, count))


def _error_summary(run_dir: Path) -> str:
    """The first rank error's last line and its file; else the run's log, when it was written (a crash before
    the first log line leaves only torchrun's output, printed above)."""
    for path in sorted(run_dir.glob("error_rank_*.txt")):
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        if lines:
            return f"{lines[-1]} (traceback: {path})"
    log = run_dir / layout.LOG_FILE
    return f"see {log}" if log.is_file() else "no rank wrote an error file or a log line: see torchrun's output above"


def _how_to_go_on(run_dir: Path) -> str:
    """What to do after a failure: resume only when a complete checkpoint exists to resume from."""
    newest = layout.newest_complete_checkpoint(run_dir) if (run_dir / "checkpoints").is_dir() else None
    if newest is None:
        return "no checkpoint was written: fix the cause and train again (a new run)"
    return f"resume with --resume (from {newest})"


def write_result(run_dir: Path, status: str, reason: str, returncode: int | None) -> dict[str, Any]:
    """result.json with the fields the cosmos-rl watcher writes (training.cosmos_rl.watcher.WatchResult), from the run's files."""
    from skillbank.runs import progress

    seen = progress.read(run_dir)
    ended = status in ("succeeded", "failed")
    rows = layout.read_metrics(run_dir)
    epochs = [r["epoch"] for r in rows if r.get("epoch") is not None]
    doc = {
        "status": status, "reason": reason, "last_step": seen.last_step, "total_steps": seen.total_steps,
        "epoch": epochs[-1] if epochs else None, "total_epochs": None, "last_loss": seen.last_loss,
        "last_val_loss": seen.last_val_loss, "last_val_step": seen.last_val_step,
        "val_at_final_step": None if seen.last_val_step is None or not ended else seen.last_val_step == (seen.total_steps or seen.last_step),
        "final_safetensors": seen.export, "checkpoints": [str(layout.checkpoint_dir(run_dir, s)) for s in layout.list_checkpoint_steps(run_dir)],
        "warnings": [], "launcher_returncode": returncode,
    }
    atomic.write_json(run_dir / progress.RESULT_FILE, doc)
    return doc


def prepare_run_dir(run_dir: Path, spec, model_path: str, *, resumed: bool, log: Callable[[str], None]) -> None:
    """Before a launch: half-written checkpoints of a resumed run and stale rank errors go; the spec as
    run (vision budget resolved) is written as spec.json, which the process reads."""
    if resumed:
        removed = layout.remove_incomplete(run_dir)
        if removed:
            log(f"removed half-written checkpoints of steps {removed}")
    for stale in run_dir.glob("error_rank_*.txt"):
        stale.unlink()
    atomic.write_text(run_dir / layout.SPEC_FILE, _as_run(spec, model_path).model_dump_json(indent=2))


def launch(plan: LocalPlan, spec, *, job: Any, stdout: Any, log: Callable[[str], None], name: str, process: str) -> None:
    """Prepare the run folder, record it in the job, run the training process tree offline and wait;
    Ctrl-C / SIGTERM stop every process of it. A non-zero exit raises RunError with the first rank
    error's last line."""
    run_dir = plan.run_dir
    prepare_run_dir(run_dir, spec, plan.model_path, resumed=plan.resume_from is not None, log=log)
    (run_dir / "result.json").unlink(missing_ok=True)  # a resumed run's previous end is not this one's
    if job is not None:
        job.update(run_dir=run_dir, log=run_dir / layout.LOG_FILE, resume_from=str(plan.resume_from) if plan.resume_from else None)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    proc = None
    try:
        procs.stop_leftovers(run_dir.parent)  # what a killed predecessor in this output_dir left running
        proc = procs.start(plan.argv, pid_file=run_dir / procs.PID_FILE, env=env, stdout=stdout, stderr=None)
        if job is not None:
            job.update(pid=proc.pid)
        rc = procs.wait(proc, tick=getattr(job, "tick", None))  # a safe point: Interrupted once SIGTERM / Ctrl-C asked to stop
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM under skillbank.procs.stop_on_signals
        if proc is None:
            raise
        procs.stop(proc.pid)  # torchrun and its ranks: each rank runs in a session of its own
        proc.wait()
        raise
    if rc != 0:
        reason = f"{name} failed ({process} exit {rc}): {_error_summary(run_dir)}"
        write_result(run_dir, "failed", reason, rc)
        raise RunError(f"{reason}; {_how_to_go_on(run_dir)}")


def run_outputs(run_dir: Path) -> dict[str, Any]:
    """Where a finished local run's files are (both local trainers write the same layout)."""
    exports = layout.list_safetensors_steps(run_dir)
    return {
        "run_dir": str(run_dir),
        "metrics": str(run_dir / layout.METRICS_FILE),
        "checkpoints": [str(layout.checkpoint_dir(run_dir, s)) for s in layout.list_checkpoint_steps(run_dir)],
        "safetensors": [str(layout.safetensors_dir(run_dir, s)) for s in exports],
        "final_safetensors": str(layout.safetensors_dir(run_dir, exports[-1])) if exports else None,
        "tensorboard": str(monitor.tensorboard_dir(run_dir)),
    }


def summary(run_dir: Path) -> dict[str, Any]:
    rows = layout.read_metrics(run_dir)
    train_rows = [r for r in rows if "loss" in r]
    val_rows = [r for r in rows if r.get("val_loss") is not None]
    return {
        **run_outputs(run_dir),
        "last_step": train_rows[-1]["step"] if train_rows else 0,
        "first_loss": train_rows[0]["loss"] if train_rows else None,
        "last_loss": train_rows[-1]["loss"] if train_rows else None,
        "val_loss_first": val_rows[0]["val_loss"] if val_rows else None,
        "val_loss_last": val_rows[-1]["val_loss"] if val_rows else None,
        "uploads": upload.read_uploads(run_dir),
    }


def _as_run(spec, model_path: str):
    """The spec the run keeps (and its ranks read): a null custom.vision.total_pixels resolved for
    this model, as the cosmos-rl TOML writes it, so evaluating the run later sees training's budget."""
    ppt = pixels_per_token(model_path)
    if spec.custom.vision.total_pixels is not None or ppt is None:
        return spec
    run_spec = spec.model_copy(deep=True)
    run_spec.custom.vision.total_pixels = default_total_pixels(spec.policy.model_max_length, ppt)
    return run_spec


def train_local(
    spec,
    *,
    spec_path: str | os.PathLike[str] | None = None,
    resume: bool = False,
    dry_run: bool = False,
    job: Any = None,
    log: Callable[[str], None] = print,
    stdout: Any = None,
    resume_from: Path | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Run (or plan, with dry_run) a local FSDP2 training. Returns the plan (dry run) or a summary.
    run_dir: the run folder to create or continue (--run-dir) instead of a new <output_dir>/<timestamp>.

    stdout: where the ranks' output goes (None: inherit; the CLI passes stderr under --json).
    Raises RunError when a rank fails.
    """
    plan = plan_local(spec, resume=resume, dry_run=dry_run, resume_from=resume_from, run_dir=run_dir)
    for line in plan.lines():
        log(line)
    for line in [*monitor.where_to_look(plan.run_dir, spec.logging.logger), *(f"upload     : {n}" for n in upload.credential_notes(spec))]:
        log(f"  {line}")
    if dry_run:
        log("  first chat : the local backend builds the chat cosmos-rl's trainer gets (skillbank.data.chat; the pixel budget goes to "
            "the processor, not the video entry): `skillbank train --backend cosmos-rl --dry-run` prints the first one")
        return {"dry_run": True, **plan.to_dict()}
    run_dir = plan.run_dir
    launch(plan, spec, job=job, stdout=stdout, log=log, name="local training", process="torchrun")
    upload.after_run(spec, run_dir, log=log)  # upload_hf: the final export (the ranks ran offline)
    result = summary(run_dir)
    done = write_result(run_dir, "succeeded", f"trained {result['last_step']}/{plan.total_steps} steps", 0)
    result.update(last_val_step=done["last_val_step"], val_at_final_step=done["val_at_final_step"], total_steps=done["total_steps"])
    if job is not None:
        job.update(uploads=result["uploads"])
    log(f"local training finished: step {result['last_step']}, loss {result['last_loss']}, final export {result['final_safetensors']}")
    from skillbank.runs.progress import final_validation_line

    log(final_validation_line(done))
    for row in upload.failed_uploads(run_dir):
        log(f"WARNING: upload of {row['what']} step {row['step']} to {row['destination']} failed ({row['error']}); the local copy is kept: {row['source'] or run_dir}")
    return result
