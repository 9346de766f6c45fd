"""The step kinds of specification/evals.py, one function each: what a setup builds and what a fixture does.

A setup step never shows in the transcript; a fixture's `skillbank` step runs through the recording shim, as
an agent's command would. Steps fail loudly (RunError) when the workspace is not what they expect: a fixture
that silently did something else would prove nothing.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from skillbank import atomic
from skillbank.errors import RunError
from skillbank.evals.transcript import record
from skillbank.evals.workspace import MISSING, Workspace, dig
from skillbank.specification import evals as spec
from skillbank.specification.overrides import set_dotted

# what a bank copy leaves out: at its top, tests and what runs leave behind; anywhere, caches
_NOT_COPIED_TOP = {".git", ".venv", "results", "outputs", "build"}  # tests travel: the skills link to them, and validate checks links
_NOT_COPIED = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_ASSETS = threading.Lock()  # workspaces built side by side (the tests do) share one build of each cached asset
_WRONG = {"yes": "no", "no": "yes", "left": "right", "right": "left", "straight": "left"}


def _demo_dataset(step: spec.DemoDatasetStep, ws: Workspace, agent: bool) -> None:
    from skillbank.assets.demo_dataset import build_demo_dataset

    with _ASSETS:
        build_demo_dataset(ws.path(step.out), records=step.records, seed=step.seed, cache=True, progress=False)


def _tiny_model(step: spec.TinyModelStep, ws: Workspace, agent: bool) -> None:
    from skillbank.assets.tiny_model import build_tiny_model

    with _ASSETS:
        build_tiny_model(ws.path(step.out), family=step.family, seed=step.seed, cache=True)


def _expanded(ws: Workspace, value: Any) -> Any:
    """{workspace} and {bank} replaced in every string of a JSON value."""
    if isinstance(value, str):
        return ws.expand(value)
    if isinstance(value, list):
        return [_expanded(ws, v) for v in value]
    if isinstance(value, dict):
        return {k: _expanded(ws, v) for k, v in value.items()}
    return value


def _target(ws: Workspace, path: str) -> Path:
    """A file to write; a glob in its folder names the newest existing match (a job folder's timestamped name)."""
    folder, _, name = ws.expand(path).rpartition("/")
    if folder and any(ch in folder for ch in "*?["):
        found = [p for p in ws.glob(folder) if p.is_dir()]
        if not found:
            raise RunError(f"write step: no folder matches {folder}")
        return found[-1] / name
    return ws.path(path)


def _write(step: spec.WriteStep, ws: Workspace, agent: bool) -> None:
    if step.lines is not None:
        text = "".join(f"value_{i} = {i}  # a line of a script written by hand\n" for i in range(step.lines))
    elif step.text is not None:
        text = ws.expand(step.text)
    else:
        text = json.dumps(_expanded(ws, step.json_value), indent=2) + "\n"
    target = _target(ws, step.path)
    if step.append and target.is_file():
        text = target.read_text(encoding="utf-8") + text
    atomic.write_text(target, text)


def _dump(path: Path, data: Any) -> None:
    if path.suffix.lower() == ".json":
        atomic.write_json(path, data)
    else:
        atomic.write_text(path, yaml.safe_dump(data, sort_keys=False))


def _drop(data: Any, key: str) -> None:
    parent, _, last = key.rpartition(".")
    node = dig(data, parent, None) if parent else data
    if isinstance(node, dict):
        node.pop(last, None)


def _edit(step: spec.EditStep, ws: Workspace, agent: bool) -> None:
    matches = ws.glob(step.path)
    if not matches:
        raise RunError(f"edit step: {step.path} does not exist")
    path = matches[-1]
    data = ws.load(path)
    targets = [data[i] for i in step.records] if step.records is not None else [data]
    for node in targets:
        for key, value in step.set.items():
            set_dotted(node, key, _expanded(ws, value))
        for key in step.drop:
            _drop(node, key)
    _dump(path, data)


def _replace(step: spec.ReplaceStep, ws: Workspace, agent: bool) -> None:
    matches = ws.glob(step.path)
    if not matches:
        raise RunError(f"replace step: {step.path} does not exist")
    path = matches[-1]
    text = path.read_text(encoding="utf-8")
    old = ws.expand(step.old)
    if old not in text:
        raise RunError(f"replace step: {step.path} does not hold {old!r}")
    atomic.write_text(path, text.replace(old, ws.expand(step.new), 1))


def _remove(step: spec.RemoveStep, ws: Workspace, agent: bool) -> None:
    for path in ws.glob(step.path):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def _copy(step: spec.CopyStep, ws: Workspace, agent: bool) -> None:
    source, target = ws.path(step.source), ws.path(step.to)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, symlinks=True) if source.is_dir() else shutil.copy2(source, target)


def _results(step: spec.ResultsStep, ws: Workspace, agent: bool) -> None:
    records = json.loads(ws.path(step.annotations).read_text(encoding="utf-8"))
    rows = []
    for i, rec in enumerate(records):
        turns = rec.get("conversations") or []
        question = next((t["value"] for t in turns if t.get("from") == "human"), "").replace("<video>", "").strip()
        gt = next((t["value"] for t in turns if t.get("from") == "gpt"), "")
        response = "" if i in step.empty else _WRONG.get(gt.strip().lower(), "unknown") if i in step.wrong else gt
        rows.append({"video_id": str(rec.get("id", i)), "question": question, "gt": gt, "response": response, "family": rec.get("family"),
                     "answer": response.strip().lower() or None, "correct": response == gt})  # evaluate's verdict columns, as it writes them
    atomic.write_json(ws.path(step.out), rows)


def _study(step: spec.StudyStep, ws: Workspace, agent: bool) -> None:
    import optuna

    from skillbank.automl.study import SEARCH_ATTR, TRIALS_ATTR

    folder = ws.path(step.out)
    folder.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=step.name, storage=f"sqlite:///{folder / 'study.db'}", direction=step.direction)
    study.set_user_attr(SEARCH_ATTR, {"metric": step.metric, "algorithm": "bayesian"})
    if step.max_trials is not None:
        study.set_user_attr(TRIALS_ATTR, step.max_trials)
    for i, trial in enumerate(step.trials):
        state = optuna.trial.TrialState[str(trial.get("state", "COMPLETE"))]
        attrs: dict[str, Any] = {"values": trial.get("params", {}), "baseline": i == 0}
        if trial.get("reason"):
            attrs["pruned_reason" if state.name == "PRUNED" else "fail_reason"] = trial["reason"]
        study.add_trial(optuna.trial.create_trial(state=state, value=trial.get("value") if state.name == "COMPLETE" else None,
                                                  params={}, distributions={}, user_attrs=attrs))


def _bank(step: spec.BankStep, ws: Workspace, agent: bool) -> None:
    from skillbank.evals.workspace import package_src
    from skillbank.paths import bank_root

    source, target = bank_root().resolve(), ws.path(step.out).resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        return {n for n in names if n in _NOT_COPIED or n.endswith(".egg-info") or (here == source and n in _NOT_COPIED_TOP)
                or (here / n) in (target, ws.root)}  # never the workspace itself, when it lies inside the bank

    shutil.copytree(source, target, ignore=ignore, symlinks=True)
    if not (target / "src" / "skillbank").is_dir():  # an installed package whose sources live elsewhere
        shutil.copytree(package_src() / "skillbank", target / "src" / "skillbank", ignore=shutil.ignore_patterns("__pycache__"))


def _skillbank(step: spec.SkillbankStep, ws: Workspace, agent: bool) -> None:
    proc = ws.run_cli(step.args, cwd=step.cwd, shim=agent)
    if proc.returncode != step.exit:
        tail = (proc.stderr.strip() or proc.stdout.strip())[-1500:]
        raise RunError(f"step `skillbank {' '.join(step.args)}` exited {proc.returncode}, expected {step.exit}: {tail}")
    if step.stdout is not None:
        atomic.write_text(ws.path(step.stdout), proc.stdout)


def _transcript(step: spec.TranscriptStep, ws: Workspace, agent: bool) -> None:
    record(ws.transcript_path, {"argv": [ws.expand(a) for a in step.args], "cwd": str(ws.root), "exit": step.exit, "fixture": True})


def _answer(step: spec.AnswerStep, ws: Workspace, agent: bool) -> None:
    text = ws.expand(step.text)
    if step.value is not None:
        value, where = ws.value(step.value)
        if value is MISSING or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RunError(f"answer step: no number at {where} (got {value if value is not MISSING else 'nothing'})")
        number = round(float(value) * step.scale + step.offset, step.digits)
        text = text.replace("{value}", f"{number:g}" if number != int(number) or abs(number) >= 1e6 else str(int(number)))
    target = ws.root / "answer.md"
    if step.append and target.is_file():
        text = target.read_text(encoding="utf-8") + text
    atomic.write_text(target, atomic.with_newline(text))


STEPS: dict[str, Callable[[Any, Workspace, bool], None]] = {
    "demo_dataset": _demo_dataset, "tiny_model": _tiny_model, "write": _write, "edit": _edit, "replace": _replace,
    "remove": _remove, "copy": _copy, "results": _results, "study": _study, "bank": _bank, "skillbank": _skillbank,
    "transcript": _transcript, "answer": _answer,
}


def apply(steps: list[Any], ws: Workspace, *, agent: bool) -> None:
    """Run steps in order; agent=True: a fixture acting as the agent (skillbank through the shim)."""
    for step in steps:
        STEPS[step.kind](step, ws, agent)
