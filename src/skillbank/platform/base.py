"""What every platform module shares: the rendered job, scripts on disk, tails of logs, engine calls."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from skillbank import atomic
from skillbank.errors import InputError, RunError


def job_dir_lines(marker: str, job_id: str | None = None) -> list[str]:
    """Shell lines that set JOB_DIR when the script runs, wherever its folder was copied: an explicit
    SKILLBANK_JOB_DIR, else the folder of the script as it was submitted (sbatch runs a spooled copy:
    the original's path comes from `scontrol show job`), SLURM_SUBMIT_DIR, the script's own folder,
    the working directory. The spec copy (`marker`) proves a folder is the job's."""
    return [
        "# --- The job folder (spec copy, TOMLs, logs): SKILLBANK_JOB_DIR, else where this script was submitted from.",
        'JOB_DIR="${SKILLBANK_JOB_DIR:-}"',
        'if [ -z "$JOB_DIR" ]; then',
        '  for candidate in \\',
        '      "$(dirname "$(scontrol show job "${SLURM_JOB_ID:-none}" 2>/dev/null | sed -n \'s|^ *Command=||p\' | head -n 1)")" \\',
        '      "${SLURM_SUBMIT_DIR:-}" "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)" "$PWD"; do',
        f'    if [ -n "$candidate" ] && [ -f "$candidate/{marker}" ]; then JOB_DIR=$(cd "$candidate" && pwd); break; fi',
        "  done",
        "fi",
        f'if [ ! -f "$JOB_DIR/{marker}" ]; then',
        f'  echo "skillbank: cannot find the job folder (no {marker} beside this script); export SKILLBANK_JOB_DIR=<the job folder>" >&2',
        "  exit 2",
        "fi",
        "export SKILLBANK_JOB_DIR=\"$JOB_DIR\"",
        *([f"export SKILLBANK_JOB_ID={job_id}  # the run records its attempt in the job folder (node.json)"] if job_id else []),
    ]


SKILLBANK = "${SKILLBANK[@]}"  # the skillbank command a rendered script found (skillbank_lines), as quote_argv keeps it


def skillbank_lines(python: str | None) -> list[str]:
    """Shell lines that set the array SKILLBANK to the skillbank command the job runs, wherever it
    runs, and say which was found: SKILLBANK_VENV (its bin/ first on PATH), else `skillbank` on PATH,
    else `python`, the rendering machine's interpreter (None: the node's `python` on PATH, for a job
    rendered under a path map that does not cover that interpreter). Exits 2 when none is there."""
    if python:
        said, where = "the rendering machine's environment", [f"RENDER_PYTHON={shlex.quote(python)}  # the interpreter that rendered this job"]
        check, prefix = '[ -x "$RENDER_PYTHON" ]', ['  export PATH="$(dirname "$RENDER_PYTHON"):$PATH"']
    else:
        said, where = "the python on PATH (the rendering machine's is under no --path-map LOCAL)", ["RENDER_PYTHON=python"]
        check, prefix = "command -v python >/dev/null 2>&1", []
    return [
        f"# --- skillbank: SKILLBANK_VENV, else `skillbank` on PATH, else {said}.",
        *where,
        'if [ -n "${SKILLBANK_VENV:-}" ]; then',
        '  if [ ! -x "$SKILLBANK_VENV/bin/python" ]; then echo "skillbank: SKILLBANK_VENV=$SKILLBANK_VENV has no bin/python" >&2; exit 2; fi',
        '  export PATH="$SKILLBANK_VENV/bin:$PATH"',
        '  SKILLBANK=("$SKILLBANK_VENV/bin/python" -m skillbank.cli); FOUND="SKILLBANK_VENV ($SKILLBANK_VENV)"',
        "elif command -v skillbank >/dev/null 2>&1; then",
        '  SKILLBANK=(skillbank); FOUND="skillbank on PATH ($(command -v skillbank))"',
        f"elif {check}; then",
        *prefix,
        f'  SKILLBANK=("$RENDER_PYTHON" -m skillbank.cli); FOUND="{said} ($RENDER_PYTHON)"',
        "else",
        '  echo "skillbank: not found (no SKILLBANK_VENV, no skillbank on PATH, no $RENDER_PYTHON): export SKILLBANK_VENV=<a venv with skillbank>" >&2',
        "  exit 2",
        "fi",
        'echo "skillbank: using $FOUND" >&2',
    ]


FIRST_STEP = "# First step: the environment checks where the job runs (HF_TOKEN, redis-server, GPUs, free disk, the model);"


@dataclass
class Rendered:
    """The command a platform runs (argv), the file it wrote, and the paths the record should show."""

    argv: list[str]
    script: Path | None = None
    log: Path | None = None
    run_dir: Path | None = None
    cosmos_log_dir: Path | None = None
    image: str | None = None
    env: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def shell_script(path: Path, title: str, lines: list[str]) -> Path:
    """Write an executable bash script (atomically)."""
    text = "#!/usr/bin/env bash\n" f"# {title} (rendered by skillbank; see skills/platform/tao-run-platform)\n" "set -euo pipefail\n"
    text += "\n".join(lines) + "\n"
    atomic.write_text(path, text)
    path.chmod(0o755)
    return path


def quote_argv(argv: list[str], *, wrap: int = 0) -> str:
    """argv as one shell line; with wrap > 0, the program and its subcommand on the first line, then
    one option (with its value) per continuation line. A word that starts with "$" stays a variable
    (double quotes): "$JOB_DIR/spec.yaml", the job folder a rendered script finds when it runs."""
    quoted = [f'"{a}"' if a.startswith("$(") or (a.startswith("$") and '"' not in a) else shlex.quote(a) for a in argv]
    if not wrap:
        return " ".join(quoted)
    first = 1
    while first < len(argv) and not argv[first].startswith("-"):
        first += 1
    parts = [" ".join(quoted[:first])]
    i = first
    while i < len(argv):
        item = quoted[i]
        if argv[i].startswith("-") and "=" not in argv[i] and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            item += " " + quoted[i + 1]
            i += 1
        parts.append(item)
        i += 1
    return (" \\\n" + " " * wrap).join(parts)


def tail_file(path: Path, lines: int) -> str:
    if not path.is_file():
        return ""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return "".join(deque(fh, maxlen=max(lines, 1)))


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def call(argv: list[str], *, what: str, timeout: float = 60.0) -> str:
    """Run an engine command (docker, sbatch, squeue, ...); its failure is a RunError with its stderr."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    except FileNotFoundError:
        raise InputError(f"{argv[0]} is not installed on this machine", where=what, fix="run on a machine that has it") from None
    except subprocess.TimeoutExpired:
        raise RunError(f"{what}: `{argv[0]}` did not answer within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise RunError(f"{what} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout
