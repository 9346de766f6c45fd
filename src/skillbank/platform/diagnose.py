"""`skillbank jobs diagnose DIR`: what happened to a training run, launched by skillbank or not.

DIR is whatever the user has: a cosmos-rl run folder (`<output_dir>/<timestamp>` with checkpoints/),
an output_dir holding such folders (the newest is read), a `--log-dir` folder (logs_latest/,
logs_<time>/), one logs_<time> folder, or a skillbank run folder (either backend; a Slurm job's
`<run>/cosmos-rl-logs` with node_<i>/logs_latest/ per node, one node_<i>, a logs_latest). Every node's
logs are read together. A job id, a job folder or its record is read by platform.diagnose_job, which
reads the job record first and then this. The logs go through
the same watcher that follows a live run (its failure table, steps, saves); checkpoints are judged by
cosmos-rl's own markers (`step_N/policy/cosmos_config` and one `.rank_R_complete` per saving rank),
never by a "checkpoint saved" line, since saves are asynchronous. Nothing is written.

A failed run's cause is the known cause its logs show (training/cosmos_rl/causes.py: vision tokens
cut at model_max_length, CUDA OOM with the plan's memory figure for the run's spec, NCCL timeout, a
record without video_fps, redis-server missing, the hub's 401/403, a full disk), each with its fix;
only without one is it what the watcher saw last (an exception, a process exit). The loss is the
last step's (raw), a smoothed one (the median of the last LOSS_WINDOW logged steps: one spike does
not move it) and the last validation loss.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skillbank.redaction import redact
from skillbank.runs import layout
from skillbank.platform import diagnose_plan
from skillbank.training.cosmos_rl import causes
from skillbank.training.cosmos_rl.watcher import CHECKPOINT, EXCEPTION_LINE, NODE_DIR, RANK_PREFIX, TRACEBACK, LogWatcher

STALE_AFTER_S = 600.0  # a run whose logs have not moved for this long is not running
TRACEBACK_LINES = 40  # the tail of the last traceback that is shown
LOSS_WINDOW = 20  # logged steps the smoothed loss is the median of


@dataclass
class Diagnosis:
    path: str
    state: str  # running | failed | finished | cancelled | unknown
    cause: str | None
    last_step: int | None
    total_steps: int | None
    last_complete_checkpoint: str | None
    resume_command: str | None
    run_dir: str | None = None
    log_files: list[str] = field(default_factory=list)
    launched_by: str = "cosmos-rl"  # skillbank-cosmos-rl | skillbank-local | cosmos-rl
    fix: str | None = None  # what to do about the cause, when it is a known one
    known_causes: list[dict[str, Any]] = field(default_factory=list)  # every known cause the logs show: {name, cause, fix, evidence}
    oom_plan: dict[str, Any] | None = None  # CUDA OOM: `skillbank plan` of the run's spec (memory per GPU, parts) or {unavailable}
    last_loss: float | None = None  # the last logged step's loss, raw
    last_loss_smoothed: float | None = None
    loss_smoothing: str | None = None  # how last_loss_smoothed was taken
    last_val_loss: float | None = None
    last_val_step: int | None = None
    last_traceback: str | None = None
    failures: list[str] = field(default_factory=list)
    incomplete_checkpoints: list[dict[str, Any]] = field(default_factory=list)
    checkpoints_logged: list[str] = field(default_factory=list)
    final_safetensors: str | None = None
    log_age_s: float | None = None
    notes: list[str] = field(default_factory=list)
    job_id: str | None = None  # the job whose record was read first (a job id, job folder or run folder of a submitted job)
    record_status: str | None = None  # that record's status after the platform answered
    scheduler: dict[str, Any] | None = None  # Slurm's own view {source: squeue|scontrol|sacct, state, exit_code, restarts}
    exit_code: int = 0  # `jobs diagnose`'s exit code (EXIT_CODES)
    bad_nodes: list[dict[str, Any]] = field(default_factory=list)  # nodes the logs blame (platform.bad_nodes): {node, why, evidence, log}; submit --retry-of excludes them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        step = f"{self.last_step}/{self.total_steps}" if self.last_step is not None else "none logged"
        out = [
            f"diagnosis of {self.path}",
            f"  state      : {self.state}" + (f" ({self.cause})" if self.cause else ""),
            *([f"  fix        : {self.fix}"] if self.fix else []),
            *[f"  also seen  : {c['name']}: {c['cause']}" for c in self.known_causes[1:]],
            *([f"  job        : {self.job_id} (record: {self.record_status})"] if self.job_id else []),
            *([f"  scheduler  : {self.scheduler.get('state')} ({self.scheduler.get('source')})"] if self.scheduler else []),
            *[f"  bad node   : {n['node']} ({n['why']}: {n['evidence'][:120]})" for n in self.bad_nodes],
            f"  launched by: {self.launched_by}",
            f"  run folder : {self.run_dir or '-'}",
            f"  last step  : {step}" + (f", loss {self.last_loss:g} (raw)" if self.last_loss is not None else ""),
        ]
        if self.last_loss_smoothed is not None:
            out.append(f"  loss       : {self.last_loss_smoothed:g} smoothed ({self.loss_smoothing})")
        if self.last_val_loss is not None or self.last_val_step is not None:
            val = "nan" if self.last_val_loss is None else f"{self.last_val_loss:g}"
            out.append(f"  val loss   : {val} at step {self.last_val_step} (the last validation)")
        out.append(f"  checkpoint : {self.last_complete_checkpoint or 'no complete checkpoint'}")
        out += [f"  incomplete : step {c['step']} ({c['why']})" for c in self.incomplete_checkpoints]
        if self.final_safetensors:
            out.append(f"  export     : {self.final_safetensors}")
        if self.last_traceback:
            out += ["  last traceback (tail):", *(f"    {line}" for line in self.last_traceback.splitlines()[-8:])]
        out += [f"  note       : {n}" for n in self.notes]
        if self.resume_command:
            out.append(f"  resume     : {self.resume_command}")
        return out


# --- where things are ----------------------------------------------------------------------------


@dataclass
class _Found:
    run_dir: Path | None
    logs: list[Path]
    launched_by: str
    notes: list[str]


def _log_files(folder: Path) -> list[Path]:
    """The logs of one cosmos-rl launch folder (controller, policy ranks, ...)."""
    return sorted(p for p in folder.glob("*.log") if p.is_file())


def _launch_logs(log_dir: Path) -> list[Path]:
    """A --log-dir folder: logs_latest, else the newest logs_<time>; a Slurm job's folder of node_<i>
    folders (or one of them): every node's."""
    nodes = sorted((p for p in log_dir.glob("node_*") if p.is_dir() and NODE_DIR.match(p.name)), key=lambda p: int(p.name[5:]))
    if nodes:
        return [log for node in nodes for log in _launch_logs(node)]
    latest = log_dir / "logs_latest"
    if latest.is_dir():
        return _log_files(latest)
    stamped = sorted(p for p in log_dir.glob("logs_*") if p.is_dir())
    return _log_files(stamped[-1]) if stamped else []


SLURM_LOGS = "cosmos-rl-logs"  # a Slurm job's --log-dir under its run folder: node_<i>/ per node


def run_log_files(run: Path) -> list[Path]:
    """A skillbank cosmos-rl run's logs: the launcher's output and cosmos-rl's (<run>/logs, or a Slurm job's <run>/cosmos-rl-logs/node_<i>)."""
    return [p for p in [run / "launcher.log"] if p.is_file()] + _launch_logs(run / "logs") + _launch_logs(run / SLURM_LOGS)


def _log_folder(path: Path) -> tuple[Path, Path | None] | None:
    """A log folder inside a run (cosmos-rl-logs, node_<i>, logs_latest or logs_<time> under either): (the folder whose
    logs to read: every node's, the run folder when it is one); None for any other folder."""
    parts = [path, *path.parents][:4]
    for depth, folder in enumerate(parts):
        if folder.name == SLURM_LOGS:
            run = folder.parent
            return folder, run if _is_run(run) else None
        if folder.name == "logs" and depth and _is_run(folder.parent):
            return folder, folder.parent
    if NODE_DIR.match(path.name):
        return path.parent, None
    if (path.name == "logs_latest" or path.name.startswith("logs_")) and NODE_DIR.match(path.parent.name):
        return path.parent.parent, None
    return None


def _is_run(folder: Path) -> bool:
    return any((folder / name).exists() for name in ("checkpoints", layout.TOML_FILE, "launcher.log", layout.METRICS_FILE, layout.SPEC_FILE))


def locate(path: Path) -> _Found:
    """Sort out what DIR is. Raises ValueError when it holds neither a run nor logs."""
    notes: list[str] = []
    if not path.is_dir():
        raise ValueError(f"{path} is not a folder")
    inside = _log_folder(path)
    if inside is not None:  # a log folder of a run: every node's logs, and the run's checkpoints when the run folder is known
        folder, run = inside
        logs = _launch_logs(folder) or _log_files(path)
        if run is not None:
            logs = [p for p in [run / "launcher.log"] if p.is_file()] + logs
            return _Found(run, logs, "skillbank-cosmos-rl" if (run / layout.TOML_FILE).is_file() or (run / "launcher.log").is_file() else "cosmos-rl", notes)
        run = _run_from_logs(logs)
        return _Found(run, logs, "cosmos-rl", notes if run else [*notes, "no run folder found from these logs: pass the run folder to judge its checkpoints"])
    if not (path / "checkpoints").is_dir() and not (path / layout.SPEC_FILE).is_file():
        runs = layout.run_dirs(path)
        if runs and not _launch_logs(path) and not _log_files(path):
            if len(runs) > 1:
                notes.append(f"{path} holds {len(runs)} runs; this is the newest ({runs[-1].name}); pass a run folder to read another")
            path = runs[-1]
    if (path / layout.SPEC_FILE).is_file() or (path / layout.LOG_FILE).is_file():  # the local backend's run
        logs = [p for p in [path / layout.LOG_FILE, *sorted(path.glob("error_rank_*.txt"))] if p.is_file()]
        return _Found(path, logs, "skillbank-local", notes)
    if (path / layout.TOML_FILE).is_file() or (path / "launcher.log").is_file() or (path / SLURM_LOGS).is_dir():  # skillbank launched cosmos-rl here
        return _Found(path, run_log_files(path), "skillbank-cosmos-rl", notes)
    logs = _launch_logs(path) or _log_files(path)
    run_dir = path if (path / "checkpoints").is_dir() else None
    if run_dir is None:
        run_dir = _run_from_logs(logs)
        if run_dir is None:
            notes.append("no run folder found: the logs name no checkpoint that exists here; pass the run folder "
                         "(<output_dir>/<timestamp>) to judge its checkpoints")
    elif not logs:
        logs = _launch_logs(run_dir / "logs")
    if not logs and run_dir is None:
        raise ValueError(f"{path} holds no cosmos-rl run (checkpoints/) and no logs (logs_latest/, logs_<time>/, *.log)")
    return _Found(run_dir, logs, "cosmos-rl", notes)


def _run_from_logs(logs: list[Path]) -> Path | None:
    """The run folder from the logs' own "checkpoint saved successfully at <run>/checkpoints/step_N/policy" lines."""
    for log in logs:
        for line in _read_lines(log):
            if (m := CHECKPOINT.search(line)) and "checkpoints" in Path(m[1]).parts:
                parts = Path(m[1]).parts
                run = Path(*parts[: len(parts) - 1 - parts[::-1].index("checkpoints")])
                if (run / "checkpoints").is_dir():
                    return run
    return None


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [seg for line in text.splitlines() for seg in line.split("\r") if seg.strip()]


# --- what the files say --------------------------------------------------------------------------


def last_traceback(logs: list[Path]) -> str | None:
    """The last traceback of the most recently written log that has one, up to its exception line
    (torchrun's `[rankN]:` prefixes dropped, secrets masked, at most TRACEBACK_LINES lines)."""
    found: tuple[float, list[str]] | None = None
    for log in logs:
        lines = [RANK_PREFIX.sub("", line, count=1) for line in _read_lines(log)]
        starts = [i for i, line in enumerate(lines) if TRACEBACK in line]
        if not starts:
            continue
        block = [lines[starts[-1]]]
        for line in lines[starts[-1] + 1 :]:
            block.append(line)
            if not line[:1].isspace() and EXCEPTION_LINE.match(line.rstrip()):
                break  # "ValueError: ..." ends it
        mtime = log.stat().st_mtime
        if found is None or mtime >= found[0]:
            found = (mtime, block)
    return redact("\n".join(found[1][-TRACEBACK_LINES:])) if found else None


def incomplete(run_dir: Path) -> list[dict[str, Any]]:
    """Checkpoints that exist but are not complete, with what is missing."""
    out = []
    for step in layout.list_checkpoint_steps(run_dir, complete_only=False):
        policy = layout.checkpoint_dir(run_dir, step)
        if layout.is_complete(policy):
            continue
        try:
            layout.resolve_checkpoint(policy)
        except ValueError as exc:
            why = str(exc).split("(", 1)[-1].split(")", 1)[0]
            out.append({"step": step, "path": str(policy), "why": why})
    return out


def _watch(lines: dict[Path, list[str]], run_dir: Path | None) -> LogWatcher:
    watcher = LogWatcher(Path("/nonexistent-log-dir"), run_dir or Path("/nonexistent-run"), progress=False, log=lambda _line: None, stamp_exports=False)
    for log, text in lines.items():
        source = "policy_0.log" if log.name in (layout.LOG_FILE,) or log.name.startswith("error_rank_") else log.name
        for line in text:
            watcher.feed(line, source=source)
    return watcher


def smoothed_loss(losses: list[tuple[int, float | None]], window: int = LOSS_WINDOW) -> tuple[float | None, str | None]:
    """(median of the last `window` finite logged losses, how it was taken): a last-step spike does not move it."""
    import statistics

    finite = [(s, v) for s, v in losses if v is not None][-window:]
    if not finite:
        return None, None
    value = statistics.median(v for _, v in finite)
    return round(value, 6), f"median of the last {len(finite)} logged training steps ({finite[0][0]}-{finite[-1][0]})"


def known_causes(lines: dict[Path, list[str]], config: dict[str, Any]) -> list[causes.Found]:
    """Every known cause the logs show (frames and launcher output included), secrets masked."""
    shown = causes.scan({log.name: [RANK_PREFIX.sub("", line, count=1) for line in text] for log, text in lines.items()}, config)
    return [causes.Found(f.name, f.cause, f.fix, redact(f.evidence)) for f in shown]


def diagnose(path: str | Path, *, stale_after_s: float = STALE_AFTER_S, now: float | None = None, hosts: list[str] | None = None,
             gpus_per_node: int | None = None, extra_logs: list[Path] | None = None) -> Diagnosis:
    """Read a run or log folder and say its state, cause, last step, last complete checkpoint and how to resume.
    hosts / gpus_per_node / extra_logs (a job's node list, its shape, its batch log): the nodes the logs blame get their names."""
    from skillbank.platform import bad_nodes

    folder = Path(path).expanduser().resolve()
    found = locate(folder)
    run_dir = found.run_dir
    lines = {log: _read_lines(log) for log in found.logs}
    blamed = bad_nodes.blame({**lines, **{p: _read_lines(p) for p in extra_logs or [] if p.is_file()}}, hosts or [], gpus_per_node)
    watcher = _watch(lines, run_dir)
    result = watcher.finish()
    newest = layout.newest_complete_checkpoint(run_dir) if run_dir is not None else None
    config_path = diagnose_plan.config_file(run_dir, newest)
    config = diagnose_plan.read_config(config_path)
    known = known_causes(lines, config)
    now = time.time() if now is None else now
    mtimes = [p.stat().st_mtime for p in found.logs] + ([(run_dir / layout.METRICS_FILE).stat().st_mtime] if run_dir and (run_dir / layout.METRICS_FILE).is_file() else [])
    age = round(now - max(mtimes), 1) if mtimes else None
    state, cause = _state(watcher, result, run_dir, age, stale_after_s)
    fix, oom = None, None
    if state == "failed" and known:
        cause, fix = known[0].cause, known[0].fix  # a known cause says more than the exit or the last exception
    if state == "failed" and any(k.name == causes.OOM.name for k in known):
        oom = diagnose_plan.oom_plan(config_path, config)
        said = diagnose_plan.plan_sentence(oom)
        if said and known[0].name == causes.OOM.name:
            cause = f"{cause}; {said}"
    smoothed, how = smoothed_loss(watcher.losses)
    notes = list(found.notes)
    logged = list(watcher.checkpoints)
    if newest is not None and logged and str(newest) not in logged and str(newest.parent) not in logged:
        notes.append("the newest complete checkpoint was not announced in the logs (an asynchronous save finished after the last line)")
    diag = Diagnosis(
        path=str(folder),
        state=state,
        cause=cause,
        last_step=watcher.last_step,
        total_steps=watcher.total_steps,
        last_complete_checkpoint=str(newest) if newest else None,
        resume_command=None,
        run_dir=str(run_dir) if run_dir else None,
        log_files=[str(p) for p in found.logs],
        launched_by=found.launched_by,
        fix=fix,
        known_causes=[k.to_dict() for k in known],
        oom_plan=oom,
        last_loss=watcher.last_loss,
        last_loss_smoothed=smoothed,
        loss_smoothing=how,
        last_val_loss=watcher.last_val_loss,
        last_val_step=watcher.last_val_step,
        last_traceback=last_traceback(found.logs),
        failures=list(watcher.failures),
        incomplete_checkpoints=incomplete(run_dir) if run_dir else [],
        checkpoints_logged=logged,
        final_safetensors=result.final_safetensors if run_dir else None,
        log_age_s=age,
        notes=notes,
        bad_nodes=blamed,
    )
    diag.resume_command = resume_command(found, newest, state)
    return diag


def _state(watcher: LogWatcher, result: Any, run_dir: Path | None, age: float | None, stale_after_s: float) -> tuple[str, str | None]:
    """running | failed | finished, and why; a skillbank run's result.json decides when it has one."""
    if run_dir is not None and (run_dir / "result.json").is_file():
        try:
            saved = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
        except ValueError:
            saved = {}
        if saved.get("status") == "succeeded":
            return "finished", None
        if saved.get("status") == "failed":
            return "failed", redact(str(saved.get("reason") or "the run failed"))
    if watcher.failures:
        return "failed", watcher.reason
    done = watcher.last_step is not None and watcher.total_steps is not None and watcher.last_step >= watcher.total_steps
    if done and not _last_step_saved(run_dir, watcher.total_steps):
        return "failed", (f"step {watcher.total_steps}/{watcher.total_steps} was logged but its checkpoint and export are not complete: "
                          "the run stopped while saving")
    if done:
        return "finished", None
    if age is not None and age < stale_after_s:
        return "running", None
    if watcher.last_step is None:
        return ("unknown", "no training step was logged") if age is None else ("failed", f"no training step was logged and the logs stopped {age:.0f} s ago")
    return "failed", (f"stopped at step {watcher.last_step}/{watcher.total_steps} without an error in the logs, which last moved {age:.0f} s ago "
                      "(killed: a time limit, the OOM killer, a lost node or a preempted job)")


def _last_step_saved(run_dir: Path | None, total: int | None) -> bool:
    """A run that checkpoints saves its last step: a complete checkpoint or a whole export of step `total`
    (a run folder without checkpoints/ saved nothing to check)."""
    if run_dir is None or total is None or not (run_dir / "checkpoints").is_dir():
        return True
    return total in layout.list_checkpoint_steps(run_dir) or total in layout.list_safetensors_steps(run_dir)


def resume_command(found: _Found, checkpoint: Path | None, state: str) -> str | None:
    """How to go on: skillbank train --resume-from for our runs (spec kept in the run folder); for a
    run skillbank did not launch, its config as a spec first (cosmos-rl's defaults kept)."""
    if state in ("finished", "running"):
        return None
    run = found.run_dir
    frm = f" --resume-from {shlex.quote(str(checkpoint))}" if checkpoint else ""
    if found.launched_by == "skillbank-local" and run is not None:
        return f"skillbank train --spec {shlex.quote(str(run / layout.SPEC_FILE))} --backend local --automl-policy off{frm}"
    config = None
    if found.launched_by == "skillbank-cosmos-rl" and run is not None:
        config = run / layout.TOML_FILE
    elif checkpoint is not None and (checkpoint / layout.CONFIG_FILE).is_file():
        config = checkpoint / layout.CONFIG_FILE  # cosmos-rl's whole config as run (JSON)
    if config is None:
        return None
    return (f"skillbank spec --from {shlex.quote(str(config))} --from-format cosmos-rl -o resume.yaml && "
            f"skillbank train --spec resume.yaml --backend cosmos-rl --automl-policy off{frm}")
