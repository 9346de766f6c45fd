"""Local platform: `skillbank train` (or `skillbank automl`) as a detached process on this machine, its log in the job folder.

command.sh (for a run by hand, here or on another machine: `--dry-run` defers the environment
checks to where it runs) finds its job folder from its own location, works in it (it changes to no
folder outside it: the spec copy names its paths absolute, and a relative one starts at the job
folder), finds skillbank (SKILLBANK_VENV, `skillbank` on PATH, the rendering machine's interpreter:
base.skillbank_lines, saying which) and starts with the environment checks, like every rendered job.
The detached launch runs the same command in the job folder without that line: submit checked this
machine, and `skillbank train` checks it again. A CPU job (--gpus-per-node 0) runs with
CUDA_VISIBLE_DEVICES empty, so the local backend trains on CPU ranks even on a GPU machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from skillbank.platform.base import FIRST_STEP, SKILLBANK, Rendered, job_dir_lines, quote_argv, shell_script, skillbank_lines, tail_file
from skillbank.platform.context import JobContext
from skillbank.platform.runner import runner_argv
from skillbank.runs.record import TERMINAL, JobRecord

LOG_NAME = "train.log"
STATE_NAME = "state.json"


def render(ctx: JobContext) -> Rendered:
    notes: list[str] = []
    if ctx.action == "rl" and ctx.backend == "cosmos-rl":
        from skillbank.platform.grpo import render_grpo_tomls

        notes = render_grpo_tomls(ctx)[2]
    if ctx.cpu_only:
        notes.append(f"a CPU job: {ctx.ranks} CPU rank(s) (the spec's dp_shard_size*tp*cp*pp), CUDA_VISIBLE_DEVICES empty, no GPU check")
    python = ctx.node(ctx.python) if not ctx.paths or ctx.paths.covered(ctx.python) else None
    script = shell_script(
        ctx.job_dir / "command.sh",
        f"local job {ctx.job_id}",
        [
            *job_dir_lines(ctx.spec_copy.name, ctx.job_id),
            f'cd "{ctx.workdir(in_script=True)}"  # ' + ("the submit directory: a relative path in the spec copy starts here" if ctx.site_rel
                                                        else "the job works in its own folder: the spec copy names its paths absolute"),
            *skillbank_lines(python),
            *(['export CUDA_VISIBLE_DEVICES=""  # a CPU job: no GPU, whatever the machine has'] if ctx.cpu_only else []),
            f"{FIRST_STEP}\n# a finding exits 2 here, before training (or the study) starts.",
            quote_argv(in_script(ctx.preflight_argv(in_script=True))),
            f"exec {quote_argv(in_script(ctx.job_argv(in_script=True)))}",
        ],
    )
    fixed = ctx.automl is None and (ctx.action != "rl" or ctx.backend == "cosmos-rl")  # `skillbank rl --backend local` picks its own
    return Rendered(argv=ctx.job_argv(), script=script, log=ctx.job_dir / LOG_NAME, notes=notes, run_dir=ctx.run_dir if fixed else None)


def in_script(argv: list[str]) -> list[str]:
    """A skillbank command as command.sh runs it: `"${SKILLBANK[@]}" VERB ...` (the skillbank the script
    found) instead of this machine's `python -m skillbank.cli VERB ...`; other programs unchanged."""
    return [SKILLBANK, *argv[3:]] if argv[1:3] == ["-m", "skillbank.cli"] else argv


def launch(ctx: JobContext, rendered: Rendered) -> str:
    """Start the runner in its own session (it survives this command) and return its pid. The job runs
    where command.sh does (the submit directory or its job folder: ctx.workdir), marked as the job (SKILLBANK_JOB_DIR /
    SKILLBANK_JOB_ID: the run records its attempt in node.json); a CPU job sees no GPU."""
    runner = runner_argv(ctx.python, state=ctx.job_dir / STATE_NAME, log=rendered.log, cwd=Path(ctx.workdir(in_script=False)), command=rendered.argv)
    env = {**os.environ, "SKILLBANK_JOB_DIR": str(ctx.job_dir), "SKILLBANK_JOB_ID": ctx.job_id, **({"CUDA_VISIBLE_DEVICES": ""} if ctx.cpu_only else {})}
    with open(ctx.job_dir / "runner.log", "ab") as out:
        proc = subprocess.Popen(
            runner, cwd=ctx.job_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    return str(proc.pid)


def refresh(record: JobRecord) -> JobRecord:
    if record.dry_run or record.external_id is None:
        return record
    state = _state(record)
    if state:
        record.status = state.get("status", record.status)
        record.started = state.get("started", record.started)
        record.ended = state.get("ended", record.ended)
        record.exit_code = state.get("exit_code", record.exit_code)
    if record.status not in TERMINAL and not _alive(int(record.external_id), record.id):
        state = _state(record)  # it may have finished between the two reads
        if state.get("status") in TERMINAL:
            return refresh(record)
        record.status = "unknown"
        if "runner gone" not in " ".join(record.notes):
            record.notes.append("runner gone without writing an end state (killed with SIGKILL, or the machine restarted)")
    return record


def logs(record: JobRecord, tail: int) -> str:
    return tail_file(Path(record.outputs.log or Path(record.outputs.job_dir) / LOG_NAME), tail)


def cancel(record: JobRecord, wait_s: float = 30.0) -> JobRecord:
    """SIGTERM the runner (it stops the whole process tree and records `cancelled`); wait for its end state."""
    record = refresh(record)
    if record.status in TERMINAL or record.external_id is None:
        return record
    pid = int(record.external_id)
    if _alive(pid, record.id):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        record = refresh(record)
        if record.status in TERMINAL or record.status == "unknown":
            break
        time.sleep(0.2)
    return record


def _state(record: JobRecord) -> dict:
    path = Path(record.outputs.job_dir) / STATE_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _alive(pid: int, job_id: str) -> bool:
    """The runner still runs (and the pid was not reused: its command line names this job)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.is_file():
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return True
        if "zombie" in _proc_state(pid):
            return False
        return job_id in text
    return True


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return ""


def require_engine() -> None:
    """Nothing to check: this machine runs the job."""
