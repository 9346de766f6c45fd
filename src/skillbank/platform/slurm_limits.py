"""What the cluster allows a Slurm job: the partition's time limit (`scontrol show partition`), its nodes (`sinfo`).

submit's --time: given, it is kept; else `skillbank plan`'s figure (submit._planned_time), capped by the time limit
(--time-limit, else the partition's MaxTime when `scontrol show partition` answers). A run longer than the limit
then takes several attempts: the job requeues itself before each limit (platform.requeue) and resumes.
--exclude (and submit --retry-of's bad nodes): checked against `sinfo`'s node list of the partition, so an
exclusion never leaves fewer nodes than the job needs. Where Slurm does not answer (a dry run on a laptop) the
note says nothing was checked.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from typing import Any

from skillbank.errors import InputError
from skillbank.platform import requeue

HOURS = re.compile(r"^\d+(\.\d+)?$")


def _ask(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def partition_limit(partition: str | None) -> tuple[int | None, str | None]:
    """(MaxTime in seconds, the partition's name) of --partition, else of the default partition; (None, name) for
    UNLIMITED / INFINITE; (None, None) when scontrol does not answer."""
    out = _ask(["scontrol", "-o", "show", "partition", *([partition] if partition else [])])
    if not out:
        return None, None
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if partition is None and fields.get("Default") != "YES":
            continue
        value = fields.get("MaxTime", "")
        seconds = requeue.limit_seconds(value) if re.match(r"^(\d+-)?\d+:\d{2}(:\d{2})?$", value) else None
        return seconds, fields.get("PartitionName")
    return None, None


def time_limit(flag: str | None, partition: str | None) -> tuple[int | None, str]:
    """--time-limit (hours, or Slurm's [D-]HH:MM:SS), else the partition's MaxTime; with the note saying which."""
    if flag:
        if HOURS.match(flag):
            seconds = int(float(flag) * 3600)
        elif re.match(r"^(\d+-)?\d{1,3}:\d{2}:\d{2}$", flag):
            seconds = requeue.limit_seconds(flag) or 0
        else:
            raise InputError(f"--time-limit {flag!r} is neither hours nor a Slurm time", where="--time-limit", fix="e.g. --time-limit 24 or --time-limit 1-00:00:00")
        if seconds <= 0:
            raise InputError("--time-limit must be positive", where="--time-limit", fix="e.g. --time-limit 4")
        return seconds, f"--time-limit {flag}"
    seconds, name = partition_limit(partition)
    if seconds is None:
        return None, (f"partition {name} has no time limit (MaxTime UNLIMITED)" if name else "no --time-limit, and `scontrol show partition` did not answer")
    return seconds, f"partition {name}'s MaxTime {requeue.as_slurm_time(seconds)} (scontrol show partition)"


def cap_time(ctx: Any, limit_s: int | None, why: str) -> list[str]:
    """--time capped by the limit (the plan's figure may be longer: the run then takes several attempts); the notes say
    what the job relies on for a longer run."""
    notes: list[str] = [] if limit_s is not None else [f"--time is not capped: {why}"]
    asked = requeue.limit_seconds(ctx.options.time)
    if ctx.options.time and asked is None:
        return []  # not a Slurm time: the render refuses it (slurm.check_options)
    if limit_s is not None and (asked is None or asked > limit_s):
        ctx.options = replace(ctx.options, time=requeue.as_slurm_time(limit_s))
        notes.append(f"--time {ctx.options.time}: capped by {why}" + (f" (the run needs {requeue.as_slurm_time(asked)}: it takes several attempts)" if asked else ""))
    lead = requeue.signal_lead(requeue.limit_seconds(ctx.options.time))
    notes.append(f"the job requeues itself {lead} s before its time limit (--signal=B:USR1@{lead}, a trap, scontrol requeue of the same id) and "
                 "resumes from its run's newest complete checkpoint; an attempt that wrote no new checkpoint ends it failed. A preemption "
                 "signals it too only where the cluster sets SlurmctldParameters=preempt_send_user_signal; elsewhere --requeue brings it back")
    return notes


def partition_nodes(partition: str | None) -> list[str] | None:
    """The partition's nodes as `sinfo -N` lists them (None when sinfo does not answer)."""
    out = _ask(["sinfo", "-h", "-N", "-o", "%N", *(["-p", partition] if partition else [])])
    if out is None:
        return None
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


def exclusion_notes(ctx: Any) -> list[str]:
    """--exclude checked against sinfo: an exclusion that leaves fewer nodes than the job needs is refused."""
    if not ctx.options.exclude:
        return []
    excluded = sorted({n.strip() for n in ctx.options.exclude.split(",") if n.strip()})
    known = partition_nodes(ctx.options.partition)
    where = f"partition {ctx.options.partition}" if ctx.options.partition else "the default partition"
    if known is None:
        return [f"excludes {', '.join(excluded)} (not checked: sinfo did not answer here)"]
    unknown = [n for n in excluded if n not in known]
    left = [n for n in known if n not in excluded]
    if len(left) < ctx.nodes:
        raise InputError(f"excluding {', '.join(excluded)} leaves {len(left)} of {len(known)} node(s) of {where}; the job needs {ctx.nodes}",
                         where="--exclude", fix="exclude fewer nodes (drain a bad one with scontrol instead), or pick another --partition")
    kept = [n for n in excluded if n in known]
    ctx.options = replace(ctx.options, exclude=",".join(kept) or None)
    notes = [f"excludes {', '.join(kept)}: {len(left)} of {len(known)} node(s) of {where} left (sinfo)"] if kept else []
    if unknown:
        notes.append(f"{', '.join(unknown)} not in {where} (sinfo): not excluded")
    return notes
