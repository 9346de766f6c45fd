"""The checkpoint layout both backends write (cosmos-rl's), and the rules for reading it safely.

    <output_dir>/<timestamp>/                      a run folder
        checkpoints/step_N/policy/                 {model,optimizer,scheduler,extra_info}_rank_R.pth,
                                                   cosmos_config, .rank_R_complete markers
        safetensors/step_N/                        a Hugging Face folder (model + processor)
        spec.json | cosmos_rl.toml                 the train spec as run (local / cosmos-rl backend)
        metrics.jsonl, train.log                   per-step metrics, log (local backend's names)

A checkpoint is complete only when cosmos_config and every saving rank's marker exist (markers are
written after the rank's files), so a reader never resumes from a half-written one. Safetensors
exports are built in a temporary folder and renamed into place, so an export that exists is whole.
No `final/` folder: the last step is step_<total>. Only light imports here (agents call it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

STEP_DIR = re.compile(r"^step_(\d+)$")
RUN_DIR = re.compile(r"^(\d{14})(?:-(\d+))?$")  # cosmos-rl's %Y%m%d%H%M%S, -N when two start in one second
CONFIG_FILE = "cosmos_config"
RANK_FILE = re.compile(r"^model_rank_(\d+)\.pth$")
SPEC_FILE = "spec.json"  # the local backend's validated train spec (vision budget resolved)
TOML_FILE = "cosmos_rl.toml"  # the cosmos-rl backend's config (its `custom` table is the train spec's)
RUN_SPEC_FILES = (SPEC_FILE, TOML_FILE)
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"


def timestamp() -> str:
    return time.strftime("%Y%m%d%H%M%S")


def new_run_dir(output_dir: str | os.PathLike[str]) -> Path:
    """Create <output_dir>/<YYYYmmddHHMMSS>/ (cosmos-rl's naming; -N when two runs start in one second)."""
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    stamp = timestamp()
    for n in range(1000):
        candidate = root / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run folder under {root}")


JOB_STAMP = re.compile(r"(\d{8})-(\d{6})")  # the submit time in a job id (<action>-YYYYmmdd-HHMMSS-<hex>)


def job_run_root(output_dir: str | os.PathLike[str], job_id: str) -> Path:
    """A submitted job's own run root, <output_dir>/<job id>: its run folder is the only one under it, so a resume scan
    of the root (cosmos-rl's train.resume = true lists <root>/*/checkpoints/step_N and takes the highest step; it also
    prunes incomplete ones there and keeps best/ there) sees this job's run alone, never a sibling job's."""
    return Path(output_dir) / job_id


def job_run_dir(output_dir: str | os.PathLike[str], job_id: str) -> Path:
    """A submitted job's run folder: <output_dir>/<job id>/<YYYYmmddHHMMSS of the submit> (cosmos-rl's run naming)."""
    m = JOB_STAMP.search(job_id)
    return job_run_root(output_dir, job_id) / (m.group(1) + m.group(2) if m else job_id)


def other_runs(run_root: str | os.PathLike[str], run_dir: str | os.PathLike[str]) -> list[Path]:
    """Run folders under `run_root`, other than `run_dir`, that hold checkpoints: what a resume scan of the root would also see."""
    mine = Path(run_dir).resolve()
    return [p for p in run_dirs(run_root) if p.resolve() != mine and list_checkpoint_steps(p, complete_only=False)]


def run_dirs(output_dir: str | os.PathLike[str]) -> list[Path]:
    """Run folders under output_dir, oldest first (timestamp names sort by time)."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and (RUN_DIR.match(p.name) or (p / "checkpoints").is_dir())]
    return sorted(found, key=lambda p: _run_sort_key(p.name))


def _run_sort_key(name: str) -> tuple[str, int]:
    m = RUN_DIR.match(name)
    return (m.group(1), int(m.group(2) or 0)) if m else (name, 0)


def newest_run_dir(output_dir: str | os.PathLike[str]) -> Path | None:
    runs = run_dirs(output_dir)
    return runs[-1] if runs else None


def checkpoint_dir(run_dir: str | os.PathLike[str], step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step}" / "policy"


def safetensors_dir(run_dir: str | os.PathLike[str], step: int) -> Path:
    return Path(run_dir) / "safetensors" / f"step_{step}"


def _steps(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if p.is_dir() and (m := STEP_DIR.match(p.name)))


def saving_ranks(policy_dir: str | os.PathLike[str]) -> int | None:
    """How many ranks must have marked a checkpoint complete (from its cosmos_config)."""
    try:
        config = json.loads((Path(policy_dir) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    local = config.get("skillbank_local") or {}
    if isinstance(local.get("saving_ranks"), int):
        return local["saving_ranks"]
    par = (config.get("policy") or {}).get("parallelism") or {}
    try:
        n = int(par.get("dp_shard_size", 1)) * int(par.get("tp_size", 1)) * int(par.get("cp_size", 1)) * int(par.get("pp_size", 1))
    except (TypeError, ValueError):
        return None
    if n < 1:  # dp_shard_size -1 (cosmos-rl: fill the world): count the ranks whose model files are there
        ranks = [int(m.group(1)) for p in Path(policy_dir).glob("model_rank_*.pth") if (m := RANK_FILE.match(p.name))]
        return max(ranks) + 1 if ranks else None
    return n


def is_complete(policy_dir: str | os.PathLike[str]) -> bool:
    """cosmos_config present and a .rank_R_complete marker for every saving rank."""
    folder = Path(policy_dir)
    n = saving_ranks(folder)
    return n is not None and all((folder / f".rank_{r}_complete").exists() for r in range(n))


def list_checkpoint_steps(run_dir: str | os.PathLike[str], *, complete_only: bool = True) -> list[int]:
    steps = _steps(Path(run_dir) / "checkpoints")
    return [s for s in steps if not complete_only or is_complete(checkpoint_dir(run_dir, s))]


def list_safetensors_steps(run_dir: str | os.PathLike[str]) -> list[int]:
    """Steps with a whole HF export (config.json and weights present)."""
    out = []
    for step in _steps(Path(run_dir) / "safetensors"):
        folder = safetensors_dir(run_dir, step)
        if (folder / "config.json").is_file() and any(folder.glob("*.safetensors")):
            out.append(step)
    return out


def newest_complete_checkpoint(run_root: str | os.PathLike[str]) -> Path | None:
    """The step_N/policy folder of the newest complete checkpoint, or None.

    run_root is a run folder (holding checkpoints/), or an output_dir holding run folders: then the
    newest run folder that has a complete checkpoint is used (newest first).
    """
    root = Path(run_root)
    candidates = [root] if (root / "checkpoints").is_dir() else list(reversed(run_dirs(root)))
    for run in candidates:
        steps = list_checkpoint_steps(run)
        if steps:
            return checkpoint_dir(run, steps[-1])
    return None


def step_of(policy_dir: str | os.PathLike[str]) -> int:
    """step_N/policy -> N."""
    m = STEP_DIR.match(Path(policy_dir).parent.name)
    if not m:
        raise ValueError(f"not a checkpoint folder: {policy_dir}")
    return int(m.group(1))


def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """The step_N/policy folder a path names: itself, a step_N folder, or a run folder / output_dir
    (its newest complete checkpoint). Raises ValueError saying what is missing (a checkpoint is
    complete only by cosmos-rl's markers, never by a log line: saves are asynchronous)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(f"{p} does not exist")
    if STEP_DIR.match(p.name) and (p / "policy").is_dir():
        p = p / "policy"
    if p.name == "policy" and STEP_DIR.match(p.parent.name):
        if not is_complete(p):
            n = saving_ranks(p)
            have = sorted(int(m.group(1)) for q in p.glob(".rank_*_complete") if (m := re.match(r"^\.rank_(\d+)_complete$", q.name)))
            what = f"{CONFIG_FILE} is missing" if n is None else f"{len(have)} of {n} saving ranks marked it complete"
            raise ValueError(f"checkpoint {p} is incomplete ({what}); it was being written when the run stopped")
        return p.resolve()
    newest = newest_complete_checkpoint(p)
    if newest is None:
        raise ValueError(f"{p} holds no complete checkpoint (checkpoints/step_N/policy with {CONFIG_FILE} and every rank's marker)")
    return newest.resolve()


def run_of(policy_dir: str | os.PathLike[str]) -> Path:
    """step_N/policy -> the run folder."""
    return Path(policy_dir).parent.parent.parent


def remove_incomplete(run_dir: str | os.PathLike[str]) -> list[int]:
    """Delete half-written checkpoints of a run nobody is writing (before a resume). Returns steps."""
    removed = []
    for step in list_checkpoint_steps(run_dir, complete_only=False):
        if not is_complete(checkpoint_dir(run_dir, step)):
            shutil.rmtree(checkpoint_dir(run_dir, step).parent, ignore_errors=True)
            removed.append(step)
    for tmp in (Path(run_dir) / "safetensors").glob(".step_*"):  # an export killed before its rename
        shutil.rmtree(tmp, ignore_errors=True)
    return removed


def prune(run_dir: str | os.PathLike[str], max_keep: int) -> list[int]:
    """Keep the newest `max_keep` complete checkpoints and exports (-1 keeps all). Returns removed steps.

    Incomplete checkpoints are left alone: they may belong to a writer that is still running.
    """
    if max_keep < 0:
        return []
    removed = []
    complete = list_checkpoint_steps(run_dir)
    for step in complete[: max(0, len(complete) - max_keep)]:
        shutil.rmtree(checkpoint_dir(run_dir, step).parent, ignore_errors=True)
        removed.append(step)
    exports = list_safetensors_steps(run_dir)
    for step in exports[: max(0, len(exports) - max_keep)]:
        shutil.rmtree(safetensors_dir(run_dir, step), ignore_errors=True)
        removed.append(step)
    return sorted(set(removed))


def read_metrics(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The run's metrics.jsonl as a list (unparseable trailing lines from a kill are skipped)."""
    path = Path(run_dir) / METRICS_FILE
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return rows


def run_spec_file(run_dir: str | os.PathLike[str]) -> Path | None:
    """The train spec the run's backend kept in the run folder, or None."""
    return next((Path(run_dir) / name for name in RUN_SPEC_FILES if (Path(run_dir) / name).is_file()), None)
