"""What a study leaves behind: best_rec.json (schema-checked), trials.parquet, history.png."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.automl.study import retry_of
from skillbank.paths import bank_root
from skillbank.redaction import redact


def _trials(study) -> list[Any]:
    return study.get_trials(deepcopy=False)


def trial_rows(study) -> list[dict[str, Any]]:
    rows = []
    for t in _trials(study):
        rows.append({
            "number": t.number,
            "state": t.state.name,
            "value": t.value,
            "baseline": bool(t.user_attrs.get("baseline", False)),
            "epochs_run": int(t.user_attrs.get("epochs_run", 0) or 0),
            "params": json.dumps(t.user_attrs.get("values", {}), sort_keys=True),
            "pruned_reason": t.user_attrs.get("pruned_reason"),
            "fail_reason": t.user_attrs.get("fail_reason"),
            "retry_of": retry_of(t),  # a --resume, a stopped worker's or the heartbeat's retry
            "checkpoint": t.user_attrs.get("checkpoint"),
            "trial_dir": t.user_attrs.get("trial_dir"),
            "duration_s": t.duration.total_seconds() if t.duration else None,
        })
    return rows


def write_trials_table(study, path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with atomic.atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(trial_rows(study)), tmp)
    return path


def write_history_plot(study, path: Path, metric: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [t for t in _trials(study) if t.value is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    if done:
        xs, ys = [t.number for t in done], [t.value for t in done]
        ax.scatter(xs, ys, label="trial", color="tab:blue")
        best, running = [], None
        maximize = study.direction.name == "MAXIMIZE"
        for y in ys:
            running = y if running is None else (max(running, y) if maximize else min(running, y))
            best.append(running)
        ax.step(xs, best, where="post", color="tab:red", label="best so far")
    pruned = [t.number for t in _trials(study) if t.state.name == "PRUNED"]
    for number in pruned:
        ax.axvline(number, color="0.85", zorder=0)
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"{study.study_name}: optimisation history ({len(pruned)} pruned, grey)")
    if done:  # nothing finished yet (a study stopped early): no artists, no legend
        ax.legend(loc="best")
    fig.tight_layout()
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path


def best_rec(study, *, skill: str, algorithm: str, metric: str, storage: str, out_dir: Path) -> dict[str, Any]:
    complete = [t for t in _trials(study) if t.state.name == "COMPLETE" and t.value is not None and math.isfinite(t.value)]
    if not complete:
        return {}
    best = study.best_trial
    baselines = [t for t in _trials(study) if t.user_attrs.get("baseline")]  # a failed baseline is run again on --resume
    baseline = next((t for t in baselines if t.state.name == "COMPLETE"), baselines[-1] if baselines else None)
    base_value = baseline.value if baseline is not None and baseline.state.name == "COMPLETE" else None
    from skillbank.automl.status import counts as study_counts

    counts = study_counts(_trials(study))  # a stopped or failed trial that runs again counts once, as its retry
    return {
        "schema_version": 1,
        "skill": skill,
        "study": study.study_name,
        "storage": redact(storage),
        "algorithm": algorithm,
        "metric": {"name": metric, "direction": study.direction.name.lower(), "value": best.value},
        "best_params": best.user_attrs.get("values", {}),
        "trial_number": best.number,
        "spec_path": str(Path(best.user_attrs.get("trial_dir", "")) / "spec.yaml"),
        "checkpoint_path": best.user_attrs.get("checkpoint"),
        "baseline": None if baseline is None else {"trial_number": baseline.number, "metric_value": base_value,
                                                   "params": baseline.user_attrs.get("values", {})},
        "improvement_over_baseline": None if base_value is None else best.value - base_value,
        "trials": {"total": counts["total"], "complete": counts["complete"], "pruned": counts["pruned"],
                   "failed": counts["failed"], "retried": counts["retried"],
                   "trial_epochs": sum(int(t.user_attrs.get("epochs_run", 0) or 0) for t in _trials(study))},
        "trials_table": str(out_dir / "trials.parquet"),
        "history_plot": str(out_dir / "history.png"),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def validate_best_rec(rec: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((bank_root() / "schemas" / "best_rec.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(rec, schema)


def write_outputs(study, *, skill: str, algorithm: str, metric: str, storage: str, out_dir: Path) -> dict[str, Any]:
    write_trials_table(study, out_dir / "trials.parquet")
    write_history_plot(study, out_dir / "history.png", metric)
    rec = best_rec(study, skill=skill, algorithm=algorithm, metric=metric, storage=storage, out_dir=out_dir)
    if rec:
        validate_best_rec(rec)
        atomic.write_json(out_dir / "best_rec.json", rec)
    return rec
