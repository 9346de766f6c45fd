"""Train with cosmos-rl: resolve the model, write the TOML, launch, watch the logs.

    cosmos-rl --config <run>/cosmos_rl.toml --log-dir <run>/logs <this package>/script.py

`hf_model://owner/repo` is downloaded (skillbank.modelref.download, HF_TOKEN read by name)
before the launch: cosmos-rl knows no such scheme. The launcher's exit code cannot be trusted, so
the outcome comes from the log watcher. A dry run prints the plan and writes one file: the TOML, in a
job folder <results_dir>/jobs/<train-...>/ that it prints (no run folder under output_dir, nothing
under the cache); under --path-map the TOML names the node's paths (REMOTE), the records are counted
and the model's family read at LOCAL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic, procs
from skillbank.errors import InputError, RunError
from skillbank.modelref import HF_SCHEME, download, parse
from skillbank.specification.train import TrainSpec
from skillbank.runs import layout as run_layout
from skillbank.training import monitor
from skillbank.training.cosmos_rl.family import MODEL_KEY, family_of
from skillbank.training.cosmos_rl.toml import build_toml, train_steps, write_toml
from skillbank.training.cosmos_rl.watcher import LogWatcher, WatchResult, stop, watch
from skillbank.runs.steps import plan_lines
from skillbank.redaction import redact

SCRIPT = Path(__file__).with_name("script.py")
GRPO_SCRIPT = Path(__file__).with_name("grpo_script.py")  # the rl action's (skillbank rl)
# Set for the launcher: its shell scripts run `python` (ours must come first on PATH); unbuffered
# output lets the watcher see lines as they happen; with one trainer and no respawn, the controller
# should end when the policy does instead of waiting for replicas forever.
SET_BY_US = {"PYTHONUNBUFFERED": "1", "COSMOS_SHUTDOWN_ON_NO_POLICY_REPLICAS": "1"}
POLL_INTERVAL_S = 1.0  # how often the watcher reads the logs
PASSED_ON = ("HF_", "HUGGING_FACE_", "WANDB_", "AWS_", "CUDA_", "NCCL_", "COSMOS_", "TORCH", "PYTORCH_", "OMP_")


@dataclass(frozen=True)
class RunLayout:
    """One run's folder: cosmos-rl's output_dir (checkpoints/, safetensors/) plus our files beside them."""

    run_id: str
    run_dir: Path
    job_dir: Path | None = None  # a dry run: the TOML goes here, the run folder is only named
    logs: Path | None = None  # cosmos-rl's --log-dir when not <run>/logs (a Slurm job: <run>/cosmos-rl-logs/node_<i>)

    @classmethod
    def new(cls, output_dir: str | Path, *, run_dir: str | Path | None = None, log_dir: str | Path | None = None) -> RunLayout:
        """A fresh <output_dir>/<YYYYmmddHHMMSS>[-N] folder, named as cosmos-rl names its runs; or the run
        folder given (--run-dir: a submitted job's, fixed at submit), created when missing."""
        if run_dir is None:
            folder = run_layout.new_run_dir(Path(output_dir).expanduser().resolve())
        else:
            folder = Path(run_dir).expanduser().resolve()
            folder.mkdir(parents=True, exist_ok=True)
        return cls(folder.name, folder, logs=Path(log_dir).expanduser().resolve() if log_dir else None)

    @property
    def toml_path(self) -> Path:
        return (self.job_dir or self.run_dir) / run_layout.TOML_FILE

    @property
    def log_dir(self) -> Path:
        return self.logs or self.run_dir / "logs"  # cosmos-rl writes logs_<time>/ and the logs_latest link here

    @property
    def launcher_log(self) -> Path:
        return self.run_dir / "launcher.log"

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / run_layout.METRICS_FILE

    @property
    def result_path(self) -> Path:
        return self.run_dir / "result.json"

    def paths(self) -> dict[str, str]:
        return {
            "run_dir": str(self.run_dir),
            "toml": str(self.toml_path),
            "log_dir": str(self.log_dir),
            "launcher_log": str(self.launcher_log),
            "metrics": str(self.metrics_path),
            "checkpoints": str(self.run_dir / "checkpoints"),
            "safetensors": str(self.run_dir / "safetensors"),
        }


@dataclass
class LaunchPlan:
    layout: RunLayout
    argv: list[str]
    env_names: list[str]
    model: str
    family: str
    gpus_per_replica: int
    train_records: int
    steps_per_epoch: int
    notes: list[str] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # skillbank.runs.steps.run_plan
    resume: bool | str = False  # train.resume as written: a checkpoint path, true (newest), false

    def lines(self, *, dry_run: bool, spec_path: Path | None = None) -> list[str]:
        """What is launched; a dry run names the command to launch with (`skillbank train`: it fetches the weights
        and watches the run) apart from the raw cosmos-rl line that command runs, which alone skips both."""
        head = "cosmos-rl plan (dry run: nothing launched)" if dry_run else "cosmos-rl launch"
        launch = ([f"  launch with: skillbank train --spec {spec_path} --backend cosmos-rl --automl-policy off "
                   "(fetches the weights, runs the line below, writes metrics / result / recipe)"]
                  if dry_run and spec_path is not None else [])
        return [
            head,
            f"  run folder : {self.layout.run_dir}",
            f"  TOML       : {self.layout.toml_path}",
            f"  logs       : {self.layout.log_dir}/logs_latest (launcher output: {self.layout.launcher_log})",
            *launch,
            f"  job runs   : {' '.join(self.argv)}" + ("  (what skillbank train starts; not a launch command alone)" if dry_run else ""),
            f"  env names  : {', '.join(self.env_names)}",
            f"  model      : {self.model} ({self.family})",
            f"  GPUs       : {self.gpus_per_replica} per replica",
            f"  resume     : {self.resume}",
            *(f"  {line}" for line in (plan_lines(self.plan) if self.plan else [])),
            *(f"  note       : {redact(n)}" for n in self.notes),
        ]


def train_cosmos_rl(
    spec: TrainSpec,
    *,
    spec_path: Path,
    resume: bool,
    dry_run: bool,
    job: Any | None = None,
    log: Callable[[str], None] = print,
    resume_from: Path | None = None,
    paths: Any = None,
    run_dir: Path | None = None,
    log_dir: Path | None = None,
    launcher_args: list[str] | None = None,
) -> int:
    """Run (or, with dry_run, plan) one cosmos-rl SFT run. Returns 0; a failed run raises RunError.

    resume_from: a step_N/policy folder: the new run starts from it (train.resume = its path); with
    resume too, the newest complete checkpoint under output_dir wins when there is one.
    `paths` (a dry run's --path-map): `spec` names the node's paths; they are read at LOCAL here.
    run_dir / log_dir / launcher_args: a submitted job's run folder (fixed at submit; a resume looks only
    in it), its --log-dir, and the launcher flags of a multi-node job (--num-workers, --worker-idx,
    --node-ip-list, --port, --rdzv-port): node 0 runs this, the other nodes the launcher alone."""
    if dry_run:
        layout = _planned_layout(spec, paths, spec_path)
    else:
        _check_fixed_run(run_dir, resume)
        layout = RunLayout.new(spec.train.output_dir, run_dir=run_dir, log_dir=log_dir)
    plan = prepare(spec, layout=layout, resume=resume_setting(spec, resume, resume_from, run_dir=run_dir if not dry_run else None),
                   dry_run=dry_run, log=log, paths=paths, launcher_args=launcher_args)
    if layout.job_dir is not None:
        log(f"job folder: {layout.job_dir} (the only thing this dry run wrote: {run_layout.TOML_FILE})")
    for line in plan.lines(dry_run=dry_run, spec_path=spec_path):
        log(line)
    log(f"  {monitor.where_to_look(layout.run_dir)[0]}")  # wandb, when logging.logger has it, is cosmos-rl's own
    fields = {"backend": "cosmos-rl", "spec": str(spec_path), "argv": plan.argv, **layout.paths()}
    if dry_run:
        from skillbank.training.cosmos_rl.chats import dry_run_lines

        for line in dry_run_lines(layout.toml_path):
            log(f"  {line}")
        _update(job, status="dry_run", **fields)
        return 0
    return run_watched(plan.argv, layout, expect_export=spec.train.ckpt.enable_checkpoint and spec.train.ckpt.export_safetensors,
                       job=job, fields=fields, log=log)


def run_watched(argv: list[str], layout: RunLayout, *, expect_export: bool, job: Any, fields: dict[str, Any],
                log: Callable[[str], None]) -> int:
    """Start the launcher `argv` and watch its logs (SFT or GRPO: the watcher reads both): metrics.jsonl, tensorboard/,
    the recipe in every export, result.json, the job record; returns 0, a failed run raises RunError."""
    watcher = LogWatcher(  # before the launch: its TensorBoard writer imports torch, seconds in which a signal would find no launcher to stop
        layout.log_dir,
        layout.run_dir,
        metrics_path=layout.metrics_path,
        launcher_log=layout.launcher_log,
        expect_export=expect_export,
        log=lambda line: log(redact(line)),
        monitor=monitor.Monitor(layout.run_dir, log=lambda line: log(redact(line))),  # TensorBoard from the step lines
    )
    process = _start(argv, layout)
    try:
        _update(job, status="running", pid=process.pid, **fields)
        result = watch(process, watcher, interval=POLL_INTERVAL_S, tick=getattr(job, "tick", None))
    except BaseException as exc:  # Ctrl-C, SIGTERM (skillbank.procs.stop_on_signals) or a watcher error
        stop(process)
        if isinstance(exc, KeyboardInterrupt):
            _update(job, status="cancelled", reason="interrupted", **fields)
        raise
    return _report(result, layout=layout, job=job, fields=fields, log=log)


def _planned_layout(spec: TrainSpec, paths: Any = None, spec_path: Path | None = None) -> RunLayout:
    """A dry run's layout: the run folder it would create, named, not created (<output_dir>/<timestamp>,
    as the node sees it), and a job folder <results_dir>/jobs/<id>/ here for the TOML: a relative
    results_dir is the spec file's (taken from its folder), so a dry run never writes into whatever
    folder it was started from."""
    from skillbank.runs.record import job_dir, new_job_id

    output_dir = Path(spec.train.output_dir).expanduser()
    results = Path(paths.to_local(spec.results_dir) if paths else spec.results_dir).expanduser()
    if not results.is_absolute() and spec_path is not None:
        results = Path(spec_path).expanduser().resolve().parent / results
    results = results.resolve()
    stamp = run_layout.timestamp()
    return RunLayout(stamp, (output_dir if output_dir.is_absolute() else output_dir.resolve()) / stamp, job_dir(results, new_job_id("train")))


def _check_fixed_run(run_dir: Path | None, resume: bool) -> None:
    """--run-dir holding checkpoints continues only with --resume (else they would be overwritten)."""
    newest = run_layout.newest_complete_checkpoint(run_dir) if run_dir is not None and (Path(run_dir) / "checkpoints").is_dir() else None
    if newest is not None and not resume:
        raise InputError(f"--run-dir {run_dir} already holds checkpoints (newest {newest})", where="--run-dir",
                         fix="add --resume to continue it, or name a new run folder")


def resume_setting(spec: TrainSpec, resume: bool, resume_from: Path | None, *, run_dir: Path | None = None) -> bool | str:
    """cosmos-rl's train.resume for --resume / --resume-from. A chosen checkpoint must have been
    written by as many ranks as this spec saves with (one shard file per rank). With a fixed run folder
    (--run-dir), --resume names that run's own newest complete checkpoint (cosmos-rl's `true` would scan
    every sibling run under output_dir), or starts fresh when it has none."""
    if resume and run_dir is not None:
        newest = run_layout.newest_complete_checkpoint(run_dir) if (Path(run_dir) / "checkpoints").is_dir() else None
        if newest is not None:
            return str(newest)
        resume = False
    if resume_from is None:
        newest = run_layout.newest_complete_checkpoint(spec.train.output_dir) if resume else None
        return str(newest) if newest is not None else False  # named, never `true` (see below); nothing to resume: a new start
    if resume:
        newest = run_layout.newest_complete_checkpoint(spec.train.output_dir)
        if newest is not None:
            return str(newest)  # named, never `true`: cosmos-rl's scan takes the highest step of any run under the root (and prunes there)
    if resume_from.exists():
        par = spec.policy.parallelism
        want, have = par.tp_size * par.cp_size * par.pp_size * par.dp_shard_size, run_layout.saving_ranks(resume_from)
        if have != want:
            raise InputError(
                f"checkpoint {resume_from} was written by {have} saving rank(s); this spec saves with {want} (tp x cp x pp x dp_shard)",
                where="--resume-from",
                fix=f"set policy.parallelism to the checkpoint's shape ({have} saving ranks), or start without --resume-from",
            )
    return str(resume_from)


def prepare(spec: TrainSpec, *, layout: RunLayout, resume: bool | str, dry_run: bool, log: Callable[[str], None] = print, paths: Any = None,
            launcher_args: list[str] | None = None) -> LaunchPlan:
    """Everything short of launching: checks, model download (not in a dry run), the TOML on disk.
    With `paths`, `spec` names the node's paths: the records and the model's config are read at LOCAL."""
    env = launch_env()
    missing = missing_tools(env)
    if missing and not dry_run:
        why, fix = TOOLS[missing[0]]
        raise InputError(f"{missing[0]} is not on PATH ({why})", where="PATH", fix=fix)
    notes = [f"{tool} is not on PATH ({TOOLS[tool][0]}): a real launch would stop here" for tool in missing]
    here = spec if not paths else TrainSpec.model_validate(paths.local(spec.model_dump(mode="json"), TrainSpec))
    counts = train_steps(here)  # bad data paths fail here, before a long download
    model, model_notes = resolve_model(spec.policy.model_name_or_path, dry_run=dry_run, log=log)
    local_model = Path(paths.to_local(model)) if paths else None
    family = family_of(str(local_model) if local_model is not None and local_model.exists() else model)
    built = build_toml(spec, model=model, family=family, run_dir=layout.run_dir, run_id=layout.run_id, resume=resume, counts=counts)
    write_toml(layout.toml_path, built.data)
    argv = [launcher(env), "--config", str(layout.toml_path), "--log-dir", str(layout.log_dir), *(launcher_args or []), str(SCRIPT)]
    return LaunchPlan(
        layout=layout,
        argv=argv,
        env_names=env_names(env),
        model=model,
        family=family.model_type,
        gpus_per_replica=built.gpus_per_replica,
        train_records=built.train_records,
        steps_per_epoch=built.steps_per_epoch,
        notes=[*model_notes, *built.notes, *notes],
        plan=built.plan,
        resume=resume,
    )


def resolve_model(ref: str, *, dry_run: bool, log: Callable[[str], None] = print) -> tuple[str, list[str]]:
    """What cosmos-rl should load: a local snapshot for hf_model://, an absolute path for a folder,
    else the reference as given (cosmos-rl downloads plain hub ids itself)."""
    model = parse(ref)
    if model.kind == "local":
        return str(model.path.resolve()), []
    if not model.value.startswith(HF_SCHEME):  # a plain id, or a path only the training machine has
        return ref, []
    if model.kind == "invalid":
        raise InputError(f"{ref!r} {model.problem}", where=MODEL_KEY, fix="write it as hf_model://nvidia/Cosmos-Reason2-8B")
    if dry_run:
        return model.repo, [f"{MODEL_KEY}: {ref} is downloaded before a real launch; this TOML names the bare id {model.repo} instead of the local snapshot"]
    log(f"downloading {model.repo} (huggingface_hub.snapshot_download{', HF_TOKEN set' if os.environ.get('HF_TOKEN') else ''})")
    path = download(model.repo, where=MODEL_KEY)
    return path, [f"{MODEL_KEY}: {ref} -> {path}"]


def launch_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(SET_BY_US)
    return env


def env_names(env: dict[str, str]) -> list[str]:
    """The names (never the values) the launch sets or passes on that matter to cosmos-rl."""
    return sorted({"PATH", *SET_BY_US, *(n for n in env if n.startswith(PASSED_ON))})


# What the launch needs on PATH, why, and how to get it.
TOOLS = {
    "cosmos-rl": ("the launcher", "pip install cosmos-rl into this Python environment"),
    "redis-server": (
        "cosmos-rl's controller starts it",
        "install redis (apt-get install redis-server, or conda install -c conda-forge redis) so redis-server is on PATH",
    ),
}


def launcher(env: dict[str, str]) -> str:
    """The cosmos-rl launcher to run: the first on the caller's PATH (a job's environment puts its own first), else the
    one beside this interpreter (a venv run without activating it); its name alone when neither has one (a dry run)."""
    return shutil.which("cosmos-rl") or shutil.which("cosmos-rl", path=env.get("PATH", "")) or "cosmos-rl"


def missing_tools(env: dict[str, str]) -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool, path=env.get("PATH", "")) is None]


def _start(argv: list[str], layout: RunLayout) -> subprocess.Popen[bytes]:
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    with open(layout.launcher_log, "ab") as out:
        # its own session: a terminal's Ctrl-C reaches skillbank, which stops the launcher's whole tree (watcher.stop)
        procs.stop_leftovers(layout.run_dir.parent)  # what a killed predecessor in this output_dir left running
        return procs.start(argv, pid_file=layout.run_dir / procs.PID_FILE, stdout=out, stderr=subprocess.STDOUT,
                           env=launch_env(), start_new_session=True)


def _report(result: WatchResult, *, layout: RunLayout, job: Any, fields: dict[str, Any], log: Callable[[str], None]) -> int:
    atomic.write_json(layout.result_path, redact(result.as_dict()))
    _update(job, status=result.status, reason=redact(result.reason) if result.status != "succeeded" else None, **fields)
    for warning in result.warnings:
        log(f"warning: {redact(warning)}")
    if result.status != "succeeded":
        raise RunError(f"cosmos-rl run failed: {redact(result.reason)} (logs: {layout.log_dir / 'logs_latest'}, {layout.launcher_log})")
    log(f"cosmos-rl run succeeded: {result.reason}; final safetensors: {result.final_safetensors}")
    from skillbank.runs.progress import final_validation_line

    if result.last_reward_mean is not None:  # GRPO: its validation is rollouts, off in skillbank's TOML
        log(f"final reward mean: {result.last_reward_mean} at step {result.last_step}")
    else:
        log(final_validation_line(result.as_dict()))
    return 0


def _update(job: Any, **fields: Any) -> None:
    update = getattr(job, "update", None)
    if callable(update):
        update(**fields)
