"""What a report reads, read once and checked before anything is drawn or written.

A run folder (either backend's `<output_dir>/<timestamp>`, or the output_dir: its newest run): the
per-step metrics from metrics.jsonl (both backends write it), else from cosmos-rl's logs through the
log watcher `skillbank jobs diagnose` uses; the recipe of its newest export (skillbank_recipe.json),
else the recipe its kept spec implies. An evaluation folder (`skillbank evaluate`'s results_dir, or an
`evaluate --run` folder: its best step): metrics.json and results.json with the per-item verdicts.
Bad input raises InputError naming the file and the fix; nothing here writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.runs import layout

RUN_MARKERS = (layout.METRICS_FILE, layout.SPEC_FILE, layout.TOML_FILE, "checkpoints", "safetensors")


@dataclass
class RunInputs:
    """A training run as the report shows it."""

    folder: Path
    rows: list[dict[str, Any]]  # metrics rows: step with loss / lr / val_loss
    rows_from: str  # the file or logs the rows came from ("" when none)
    recipe: dict[str, Any] | None
    recipe_from: str
    spec: dict[str, Any] | None  # the train spec the run kept (spec.json / cosmos_rl.toml)


@dataclass
class EvalInputs:
    """One evaluation folder: its metrics.json, and its results.json (every row with evaluate's verdict)."""

    folder: Path
    label: str
    metrics: dict[str, Any]
    metrics_path: str
    results_path: str
    items: int


# ---- the run -------------------------------------------------------------------------------------


def find_run(path: str | os.PathLike[str]) -> Path:
    """The run folder `path` names: itself, or the newest `<timestamp>` under an output_dir, or a folder of
    cosmos-rl logs (logs_latest/, logs_<time>/, *.log)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise InputError(f"run folder not found: {root}", where="--run", fix="pass a training run (<output_dir>/<timestamp>) or its output_dir")
    if any((root / name).exists() for name in RUN_MARKERS):
        return root
    newest = layout.newest_run_dir(root)
    if newest is not None:
        return newest
    if (root / "logs_latest").is_dir() or any(root.glob("logs_*")) or any(root.glob("*.log")):
        return root
    raise InputError(f"{root} holds no training run ({', '.join(RUN_MARKERS)}, or <timestamp>/ folders, or cosmos-rl logs)", where="--run",
                     fix="pass the run folder skillbank train or cosmos-rl wrote (<output_dir>/<timestamp>) or its output_dir")


def rows_from_logs(run: Path) -> tuple[list[dict[str, Any]], str]:
    """Step / loss / lr / val_loss rows from a cosmos-rl run's logs (a run launched without skillbank has
    no metrics.jsonl): the same watcher and the same row shape a skillbank launch writes."""
    from skillbank.training.cosmos_rl.watcher import LogWatcher
    from skillbank.platform.diagnose import locate

    try:
        found = locate(run)
    except ValueError:
        return [], ""
    rows: list[dict[str, Any]] = []

    class Collect:  # the watcher's monitor interface: every row it would write to metrics.jsonl
        write = staticmethod(rows.append)

    # a run folder that does not exist: the watcher never stamps recipes into the user's exports
    watcher = LogWatcher(Path("/nonexistent-log-dir"), Path("/nonexistent-run"), progress=False, log=lambda _line: None, stamp_exports=False, monitor=Collect())
    for log in found.logs:
        source = "policy_0.log" if log.name == layout.LOG_FILE or log.name.startswith("error_rank_") else log.name
        with open(log, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                watcher.feed(line.rstrip("\n"), source=source)
    return rows, ", ".join(str(p) for p in found.logs) if rows else ""


def read_run(path: str | os.PathLike[str]) -> RunInputs:
    from skillbank import recipe

    folder = find_run(path)
    rows, rows_from = layout.read_metrics(folder), str(folder / layout.METRICS_FILE)
    if not rows:
        rows, rows_from = rows_from_logs(folder)
    found, recipe_from = None, ""
    exports = layout.list_safetensors_steps(folder)
    if exports:
        hit = recipe.read(layout.safetensors_dir(folder, exports[-1]))
        found, recipe_from = (hit.recipe, hit.source) if hit else (None, "")
    if found is None:
        found = recipe.from_run(folder, exports[-1] if exports else None)
        recipe_from = f"{layout.run_spec_file(folder)} (the run's spec)" if found else ""
    return RunInputs(folder, rows, rows_from, found, recipe_from, recipe.run_spec(folder))


@dataclass
class RunProgress:
    """How far the run went (from its metrics rows) beside the limits its spec set (caps, not what ran)."""

    steps_run: int | None  # the last step logged
    epochs_run: int | None  # the epoch that step was in (rows carry 1-based epochs); None when no row says
    epoch_cap: Any = None  # train.epoch
    steps_cap: Any = None  # train.max_num_steps

    def steps_text(self) -> str:
        cap = f" (cap train.max_num_steps {self.steps_cap})" if self.steps_cap is not None else ""
        return ("not logged" if self.steps_run is None else f"{self.steps_run}") + cap

    def epochs_text(self) -> str:
        cap = f" (cap train.epoch {self.epoch_cap})" if self.epoch_cap is not None else ""
        return ("not logged" if self.epochs_run is None else f"{self.epochs_run}") + cap

    def line(self) -> str:
        epochs = f" in {self.epochs_run} epoch(s)" if self.epochs_run is not None else ""
        caps = ", ".join(f"{k} {v}" for k, v in (("train.epoch", self.epoch_cap), ("train.max_num_steps", self.steps_cap)) if v is not None)
        return f"{self.steps_run if self.steps_run is not None else 'no'} step(s) run{epochs}" + (f" (the spec's caps: {caps})" if caps else "")

    def facts(self) -> dict[str, Any]:
        return {"steps_run": self.steps_run, "epochs_run": self.epochs_run, "caps": {"train.epoch": self.epoch_cap, "train.max_num_steps": self.steps_cap}}


def progress(run: RunInputs) -> RunProgress:
    """Steps and epochs run, from metrics.jsonl (or the logs), and the spec's caps."""
    steps = [r for r in run.rows if isinstance(r.get("step"), (int, float)) and isinstance(r.get("loss"), (int, float))] or \
        [r for r in run.rows if isinstance(r.get("step"), (int, float))]  # training rows (a validation row may share one)
    last = max(steps, key=lambda r: r["step"]) if steps else None
    epochs = [int(r["epoch"]) for r in steps if isinstance(r.get("epoch"), (int, float))]
    train = (run.spec or {}).get("train") or {}
    return RunProgress(int(last["step"]) if last else None, max(epochs) if epochs else None,
                       train.get("epoch"), train.get("max_num_steps"))


# ---- evaluations -----------------------------------------------------------------------------------


def _load_json(path: str, what: str, fix: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}", where=path, fix=fix) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the {what}: {exc}", where=path, fix=fix) from None


def read_eval(path: str | os.PathLike[str], label: str, flag: str) -> EvalInputs:
    """metrics.json and results.json of an evaluation folder; every row must carry evaluate's verdict."""
    from skillbank.evaluation.results import METRICS, find_results_json
    from skillbank.reporting import verdicts

    folder = Path(path).expanduser()
    wrote = "pass the results_dir `skillbank evaluate` wrote (results.json + metrics.json)"
    if not folder.is_dir():
        raise InputError(f"evaluation folder not found: {folder}", where=flag, fix=wrote)
    try:
        results = find_results_json(str(folder))
    except InputError as exc:
        raise InputError(exc.message, where=f"{flag} {folder}", fix=wrote) from None
    metrics_path = str(Path(results).with_name(METRICS))
    metrics = _load_json(metrics_path, "metrics.json", f"evaluate again (`skillbank evaluate`), or score the results (`skillbank score --results-dir {folder}`)")
    if not isinstance(metrics, dict):
        raise InputError("metrics.json is not a JSON object", where=metrics_path, fix=wrote)
    return EvalInputs(folder, label, metrics, metrics_path, results, verdicts.check(results))


def labels(paths: list[str], base: str | None) -> list[str]:
    """Short, distinct names for the evaluation folders (their folder names; parent/name when two clash)."""
    every = ([base] if base else []) + paths
    names = [Path(p).name or str(p) for p in every]
    if len(set(names)) < len(names):
        names = [f"{Path(p).parent.name}/{Path(p).name}" for p in every]
    if len(set(names)) < len(names):
        names = [f"{n} ({i + 1})" for i, n in enumerate(names)]
    return names


# ---- clips -----------------------------------------------------------------------------------------


def clip_paths(ev: EvalInputs, ids: list[str], media_dir: str | None, annotations: str | None = None) -> dict[str, str]:
    """The clip of each id, from the evaluated annotation file (--annotations, else metrics.json annotation_path:
    `skillbank score` names none) and the folder its video paths are relative to (--media-dir, else metrics.json
    media_dir, else the annotation file's folder)."""
    from skillbank.data import chat
    from skillbank.data.media import media_root
    from skillbank.data.records import load_records

    annotation = str(annotations or ev.metrics.get("annotation_path") or "")
    fix = ("pass --annotations FILE (the evaluated annotations.json; --media-dir DIR when its clips are not beside it), "
           "or --no-frames")
    if not annotation or not Path(annotation).is_file():
        raise InputError(f"the evaluated annotation file is not here: {annotation or '(metrics.json names none)'}",
                         where=ev.metrics_path if not annotations else "--annotations", fix=fix)
    root = media_dir or media_root(str(ev.metrics.get("media_dir") or ""), annotation)
    wanted = set(ids)
    found = {}
    for record in load_records(annotation):
        rid = str(record.get("id", ""))
        if rid in wanted and rid not in found:
            found[rid] = os.path.abspath(chat.video_path(record, root))
    missing = [i for i in ids if i not in found]
    if missing:
        raise InputError(f"{len(missing)} failing item(s) are not in {annotation}: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}",
                         where=ev.results_path, fix="pass the evaluation folder of that annotation file, or --no-frames")
    return found
