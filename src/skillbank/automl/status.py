"""What a study holds, from any machine that reaches its storage: `skillbank automl --status`, and
`skillbank jobs status` of an AutoML job. Deleting a study (`--delete-study --yes`) lives here too.

Every trial in the user's units (LoRA rank 16, not `policy.lora.r#log2` 4), its state and value, the
trial it retries (`retry_of`), the worker that ran it (host:pid, and its job id when skillbank
submitted it), why it was pruned or failed, and the best value so far. A stopped trial that runs
again is one trial of the study, not two: the summary counts the retry (and says how many stopped
or failed trials were re-queued); the table still lists both rows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.redaction import redact


def open_existing(storage: str, name: str | None):
    """The study `name` (or the storage's only study when name is None), without creating anything:
    a SQLite file that does not exist, or a study that is not there, is an InputError naming what is."""
    import optuna

    from skillbank.automl.lock import sqlite_file
    from skillbank.automl.storage import check_url
    from skillbank.automl.study import _storage

    check_url(storage)
    if storage.startswith("sqlite"):
        path = sqlite_file(storage)
        if path is None or not Path(path).is_file():
            raise InputError(f"no study database at {path}", where="--storage / --out",
                             fix="name the study folder (--out DIR, holding study.db), its --storage URL, or its --spec")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = _storage(storage)
    names = [s.study_name for s in optuna.get_all_study_summaries(rdb, include_best_trial=False)]
    if name is None:
        if len(names) != 1:
            raise InputError(f"{redact(storage)} holds {len(names)} studies ({', '.join(names) or 'none'})", where="--study",
                             fix="name one with --study NAME")
        name = names[0]
    if name not in names:
        raise InputError(f"no study {name!r} in {redact(storage)} (it holds: {', '.join(names) or 'none'})", where="--study",
                         fix="name it as its start command did (--spec / --study / --out / --storage)")
    return optuna.load_study(study_name=name, storage=rdb)


def user_values(trial: Any) -> dict[str, Any]:
    """The trial's values by dotted key, in the user's units (what it trained, or will)."""
    values = trial.user_attrs.get("values")
    if values:
        return dict(values)
    out: dict[str, Any] = {}
    for name, value in trial.params.items():
        key, _, kind = name.partition("#")
        if kind == "log2":
            out[key] = 2 ** int(value)
        elif kind == "u":
            if key in trial.user_attrs:
                out[key] = trial.user_attrs[key]
        else:
            out[name] = value
    return out


def retried_numbers(trials: list[Any]) -> set[int]:
    """Trials that a later trial runs again (--resume, a stopped worker's retry, the heartbeat's)."""
    from skillbank.automl.study import retry_of

    return {n for t in trials if (n := retry_of(t)) is not None} | {n for t in trials for n in t.system_attrs.get("retry_history", [])}


def counts(trials: list[Any]) -> dict[str, int]:
    """Trials by state, a retried trial counted once (as its retry): `failed` are the failures nothing
    runs again yet, `retried` the failed or stopped ones another trial runs again."""
    retried = retried_numbers(trials)
    by = {s: sum(1 for t in trials if t.state.name == s) for s in ("COMPLETE", "PRUNED", "RUNNING", "WAITING", "FAIL")}
    again = sum(1 for t in trials if t.state.name == "FAIL" and t.number in retried)
    return {"total": len(trials) - again, "complete": by["COMPLETE"], "pruned": by["PRUNED"], "running": by["RUNNING"],
            "waiting": by["WAITING"], "failed": by["FAIL"] - again, "retried": again,
            "finished": by["COMPLETE"] + by["PRUNED"]}


def _reason(trial: Any, retried: set[int]) -> str | None:
    attrs = trial.user_attrs
    if trial.state.name == "PRUNED":
        return attrs.get("pruned_reason")
    if trial.state.name == "FAIL":
        why = attrs.get("fail_reason") or "its worker stopped beating (killed without a word, or its machine was lost)"
        return why + (" (re-queued)" if trial.number in retried else "")
    return None


def summary(study) -> dict[str, Any]:
    """The study as --status --json prints it."""
    from skillbank.automl.study import SEARCH_ATTR, TRIALS_ATTR, retry_of

    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    maximize = study.direction.name == "MAXIMIZE"
    best: Any = None
    rows = []
    for t in sorted(trials, key=lambda t: t.number):
        value = t.value if t.state.name == "COMPLETE" and t.value is not None and math.isfinite(t.value) else None
        if value is not None and (best is None or (value > best.value if maximize else value < best.value)):
            best = t
        rows.append({
            "number": t.number, "state": t.state.name, "value": value if value is not None else t.value,
            "best_so_far": best.value if best is not None else None, "params": user_values(t),
            "baseline": bool(t.user_attrs.get("baseline")), "retry_of": retry_of(t), "worker": t.user_attrs.get("worker"),
            "reason": _reason(t, retried), "epochs_run": t.user_attrs.get("epochs_run"),
            "started": t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else None,
            "duration_s": round(t.duration.total_seconds(), 1) if t.duration else None,
        })
    search = study.user_attrs.get(SEARCH_ATTR) or {}
    workers: dict[str, dict[str, int]] = {}
    for row in rows:
        if row["worker"]:
            entry = workers.setdefault(row["worker"], {"trials": 0, "running": 0})
            entry["trials"] += 1
            entry["running"] += row["state"] == "RUNNING"
    return {
        "ok": True,
        "study": study.study_name,
        "storage": redact(_url(study)),
        "direction": study.direction.name.lower(),
        "metric": search.get("metric"),
        "algorithm": search.get("algorithm"),
        "max_trials": study.user_attrs.get(TRIALS_ATTR),
        "stopped": bool(study.user_attrs.get("stop_requested")),
        "counts": counts(trials),
        "best": None if best is None else {"number": best.number, "value": best.value, "params": user_values(best)},
        "workers": [{"worker": w, **n} for w, n in workers.items()],
        "trials": rows,
    }


def _url(study) -> str:
    storage = getattr(study._storage, "_backend", study._storage)
    return str(getattr(storage, "url", ""))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in params.items()) or "-"


def lines(doc: dict[str, Any]) -> list[str]:
    """The text form of `summary`: a head, the counts, the best, one row per trial."""
    c = doc["counts"]
    budget = f"{c['finished']} of {doc['max_trials']} finished" if doc["max_trials"] else f"{c['finished']} finished"
    head = (f"study {doc['study']} ({doc['storage']}): {doc['direction']} {doc['metric'] or 'its metric (name not recorded)'}, "
            f"{doc['algorithm'] or 'algorithm not recorded'}; {budget}" + ("; STOPPED (--resume continues it)" if doc["stopped"] else ""))
    count = (f"  trials: {c['total']} ({c['complete']} complete, {c['pruned']} pruned, {c['running']} running, "
             f"{c['waiting']} waiting, {c['failed']} failed)")
    if c["retried"]:
        count += f"; {c['retried']} stopped or failed trial(s) re-queued, each counted once (as its retry)"
    best = doc["best"]
    out = [head, count,
           f"  best  : trial {best['number']} {doc['metric'] or 'value'} {_fmt(best['value'])} ({_params(best['params'])})" if best
           else "  best  : none yet (no trial completed)"]
    for w in doc["workers"]:
        out.append(f"  worker: {w['worker']}: {w['trials']} trial(s), {w['running']} running")
    out.append(f"  {'#':>4}  {'state':<8}  {'value':>9}  {'best':>9}  {'retry_of':>8}  {'worker':<24}  params / reason")
    for r in doc["trials"]:
        tail = _params(r["params"]) + (" (baseline)" if r["baseline"] else "") + (f"; {r['reason']}" if r["reason"] else "")
        out.append(f"  {r['number']:>4}  {r['state']:<8}  {_fmt(r['value']):>9}  {_fmt(r['best_so_far']):>9}  "
                   f"{_fmt(r['retry_of']):>8}  {(r['worker'] or '-'):<24}  {tail}")
    return out


def delete(study) -> int:
    """Delete the study from its storage (its trials with it); refused while trials of it still run.
    Returns how many trials it held. The study folder's files (trials/, best_rec.json) stay."""
    import optuna

    from skillbank.automl.study import _fail_orphans

    _fail_orphans(study)  # a dead worker's trial is not running
    running = [t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))]
    if running:
        raise InputError(f"study {study.study_name!r} has {len(running)} running trial(s) ({', '.join(map(str, running))})",
                         where="--delete-study", fix="stop its workers first (--stop-study), then delete it")
    held = len(study.get_trials(deepcopy=False))
    optuna.delete_study(study_name=study.study_name, storage=study._storage)
    return held
