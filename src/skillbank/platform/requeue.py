"""A Slurm job that outlives its time limit: it requeues itself, and each attempt says why it ended.

Slurm never requeues a job that reaches its --time (only a preempted or failed node's job, with
--requeue). So job.sbatch asks for a signal shortly before the limit (`--signal=B:USR1@<lead>`: to the
batch shell alone), runs its training step in the background (`cmd & wait`, so the trap runs while it
trains) and traps USR1: the no-progress guard (`signal` below) decides, then `scontrol requeue
$SLURM_JOB_ID` puts the same job id back in the queue and the next attempt resumes from the run's newest
complete checkpoint (`skillbank train --resume --run-dir`: this job's run alone). Learnt from submitit
(`slurm_signal_delay_s`, requeue on the timeout signal, a cap of `slurm_max_num_timeout`) and Lightning's
SLURMEnvironment (auto-requeue on SIGUSR1); past them: the guard and the attempt history below.

The guard: an attempt whose run wrote no new complete checkpoint since the attempt began would only
repeat itself, so the job ends failed with the reason (lower train.ckpt.save_freq or raise --time).

Why each attempt ended goes into the job folder's node.json (runs.node; `jobs status` / `wait` merge it):
  time_limit        USR1 within the lead (plus Slurm's up-to-a-minute slack) of the attempt's --time
  preempted         USR1 earlier than that (Slurm signals a preempted job only where the cluster sets
                    SlurmctldParameters=preempt_send_user_signal), or the job's PreemptTime is set
  requeued_by_hand  the next attempt began and the previous one recorded no end (`scontrol requeue`, a
                    preemption without the signal, a node failure)
Run on the node by job.sbatch: `skillbank jobs attempt begin|signal --job-dir ...` (commands.jobs).
Light: no torch.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.planning.limit import SIGNAL_BEFORE_LIMIT_S  # the one figure: plan --time-limit counts the same lead
from skillbank.runs import layout, node

MIN_LEAD_S = 30  # a short --time: the lead is a quarter of it, never under this (Slurm may signal up to a minute early)
SLURM_SLACK_S = 90  # Slurm checks time limits about once a minute: a USR1 this much before the lead still counts as the limit's
WHY = ("time_limit", "preempted", "requeued_by_hand")
TRAP = "trap on_usr1 USR1"  # a body with this line asks for the signal (slurm.sbatch_header): an untrapped USR1 ends the batch shell
HOOK = "python -m skillbank.cli jobs attempt"  # commands.jobs.run_attempt: begin / signal below


def limit_seconds(text: str | None) -> int | None:
    """A Slurm time limit ([D-]HH:MM:SS) in seconds; None when not given."""
    if not text or not re.match(r"^(\d+-)?\d+(:\d{2}){0,2}$", text):
        return None  # not a Slurm time: slurm.check_options says so
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days) if days else 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def as_slurm_time(seconds: float) -> str:
    """Seconds as Slurm's [D-]HH:MM:SS in whole minutes, rounded down (a cap must not pass the limit), at least one."""
    minutes = max(1, int(seconds // 60))
    days, minutes = divmod(minutes, 1440)
    clock = f"{minutes // 60:02d}:{minutes % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def signal_lead(limit_s: int | None) -> int:
    """Seconds before the limit that Slurm signals: SIGNAL_BEFORE_LIMIT_S, or a quarter of a short limit (at least MIN_LEAD_S)."""
    if limit_s is None:
        return SIGNAL_BEFORE_LIMIT_S
    return min(SIGNAL_BEFORE_LIMIT_S, max(MIN_LEAD_S, limit_s // 4))


def _newest_step(run_dir: str | None) -> int | None:
    if not run_dir or not (Path(run_dir) / "checkpoints").is_dir():
        return None
    steps = layout.list_checkpoint_steps(run_dir)
    return steps[-1] if steps else None


def _entries(job_dir: Path) -> list[dict[str, Any]]:
    return list(node.read(job_dir).get("attempts", []))


def _save(job_dir: Path, attempts: list[dict[str, Any]]) -> None:
    data = node.read(job_dir)
    data["attempts"] = sorted(attempts, key=lambda a: a.get("attempt", 0))
    atomic.write_json(job_dir / node.NODE_FILE, data)


def _preempt_time(job_id: str | None) -> str | None:
    """Slurm's PreemptTime of the job (None when unset or Slurm does not answer)."""
    if not job_id:
        return None
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
    value = fields.get("PreemptTime", "")
    return value if value[:1].isdigit() else None


def begin(job_dir: Path, run_dir: str | None, *, now: str, stamp: float | None = None) -> dict[str, Any]:
    """This attempt's entry (its newest complete checkpoint at the start: the guard's mark); an earlier attempt
    that recorded no end was requeued by hand (or preempted, when Slurm set PreemptTime)."""
    number = node.attempt_number()
    attempts = _entries(job_dir)
    for entry in attempts:
        if entry.get("attempt", 0) < number and not entry.get("why_ended"):
            entry["why_ended"] = "preempted" if _preempt_time(os.environ.get("SLURM_JOB_ID")) else "requeued_by_hand"
            entry.setdefault("ended", now)
    mine = next((a for a in attempts if a.get("attempt") == number), None)
    if mine is None:
        mine = {"attempt": number}
        attempts.append(mine)
    mine.update(started=now, started_unix=stamp or time.time(), checkpoint_at_start=_newest_step(run_dir), status="running",
                **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if os.environ.get("SLURM_JOB_ID") else {}),
                **({"run_dir": run_dir} if run_dir else {}))
    _save(job_dir, attempts)
    return mine


def signal(job_dir: Path, run_dir: str | None, *, limit_s: int | None, lead_s: int, now: str, stamp: float | None = None) -> tuple[bool, str]:
    """USR1 arrived: (requeue?, the sentence for the batch log). The attempt's end is recorded either way."""
    number = node.attempt_number()
    attempts = _entries(job_dir)
    mine = next((a for a in attempts if a.get("attempt") == number), None)
    if mine is None:
        mine = {"attempt": number}
        attempts.append(mine)
    elapsed = (stamp or time.time()) - float(mine.get("started_unix") or (stamp or time.time()))
    near = limit_s is None or elapsed >= limit_s - lead_s - SLURM_SLACK_S
    why = "time_limit" if near else "preempted"
    start, end = mine.get("checkpoint_at_start"), _newest_step(run_dir)
    mine.update(why_ended=why, ended=now, checkpoint_at_end=end)
    if run_dir and (end is None or (start is not None and end <= start)):
        had = "no complete checkpoint" if end is None else f"no checkpoint after step {start}"
        reason = (f"no progress: attempt {number} ran {elapsed / 60:.1f} min and its run {run_dir} has {had} since the attempt began; "
                  f"a requeue would repeat it (lower train.ckpt.save_freq so a checkpoint lands within an attempt, or raise --time)")
        mine.update(status="failed", guard=reason)
        _save(job_dir, attempts)
        return False, reason
    mine["status"] = "requeued"
    _save(job_dir, attempts)
    what = "its time limit is near" if near else "Slurm signalled it early (a preemption)"
    kept = f"checkpoint step {end}" if end is not None else "no run folder to judge"
    return True, f"attempt {number} ends ({why}: {what}); {kept}; requeueing job {os.environ.get('SLURM_JOB_ID', '?')}"


def script_lines(run_dir_var: str | None, limit_s: int | None, lead_s: int) -> list[str]:
    """job.sbatch's part: the hook, the USR1 trap and run_step (the training step in the background)."""
    run = f'--run-dir "{run_dir_var}"' if run_dir_var else ""
    limit = f"--limit-s {limit_s} " if limit_s else ""
    return [
        f"# Time limit and preemption: Slurm sends USR1 to this shell {lead_s} s before --time (#SBATCH --signal); the trap",
        "# requeues the same job id when this attempt wrote a new checkpoint, else ends the job failed with the reason",
        "# (skillbank.platform.requeue). A preemption signals too only where SlurmctldParameters=preempt_send_user_signal;",
        "# elsewhere a preempted job is requeued by Slurm (--requeue) and resumes the same way.",
        "hook() {  # the attempt bookkeeping, in the job's environment",
        '  if [ ${#IN_ENV[@]} -gt 0 ]; then srun "${IN_ENV[@]}" --overlap --nodes=1 --ntasks=1 ' + HOOK + ' "$@"  # in the container',
        "  else " + HOOK + ' "$@"; fi',
        "}",
        f'HOOK_ARGS=(--job-dir "$JOB_DIR" {run} {limit}--lead-s {lead_s})'.replace("  ", " "),
        'hook begin "${HOOK_ARGS[@]}" || echo "skillbank: the attempt bookkeeping failed; the job goes on" >&2',
        'STEP_PID=""',
        "on_usr1() {",
        '  echo "skillbank: USR1 at $(date -u +%FT%TZ): the time limit (or a preemption) is near"',
        '  local rc=0; hook signal "${HOOK_ARGS[@]}" || rc=$?',
        '  if [ "$rc" != 1 ]; then  # 0: a new checkpoint; 1: none (the guard); else the hook failed and cannot judge: requeue',
        '    scontrol requeue "$SLURM_JOB_ID"',
        '    wait "$STEP_PID" 2>/dev/null || true',
        "    exit 0",
        "  fi",
        '  if [ -n "$STEP_PID" ]; then kill -TERM "$STEP_PID" 2>/dev/null || true; wait "$STEP_PID" 2>/dev/null || true; fi',
        "  exit 1",
        "}",
        TRAP,
        'run_step() {  # in the background, so the USR1 trap runs while it trains; its exit code is the step\'s',
        '  "$@" & STEP_PID=$!',
        '  local rc=0; wait "$STEP_PID" || rc=$?',
        '  return "$rc"',
        "}",
    ]
