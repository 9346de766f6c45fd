"""A run's progress read from its folder: what `jobs status`, `jobs wait` and the foreground record show.

Both backends write the same files into a run folder (the local backend's ranks, the cosmos-rl log
watcher): metrics.jsonl (one row per training step and one per validation, each with step,
total_steps, epoch and time), result.json at the end, checkpoints/step_N/policy (complete by
cosmos-rl's markers) and safetensors/step_N. Progress is read from those, never from a log's prose,
so a dashboard, a CI gate and an agent read one document whichever platform ran the job. Light: no
torch, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillbank.runs import layout

RESULT_FILE = "result.json"


class Progress(BaseModel):
    """The run's progress as its folder shows it (every field null until the run writes it)."""

    model_config = ConfigDict(extra="forbid")

    state: str = Field("not started", description="The job's state: its record's status (submitted: queued, running, succeeded, failed, "
                       "cancelled, unknown) once it has one; for a run folder alone, what it says: not started (no metrics yet), running, "
                       "succeeded / failed (result.json).")
    run_dir: str | None = Field(None, description="The run folder read (this machine's path).")
    last_step: int | None = Field(None, description="The last training step logged (metrics.jsonl).")
    total_steps: int | None = Field(None, description="The run's total steps (every metrics row carries it).")
    last_loss: float | None = Field(None, description="The last training step's loss (raw; null when not finite).")
    last_val_loss: float | None = Field(None, description="The last validation loss (null when not finite).")
    last_reward_mean: float | None = Field(None, description="GRPO (an rl run): the last step's mean reward over its rollouts (null for SFT).")
    last_val_step: int | None = Field(None, description="The training step of the last validation.")
    val_at_final_step: bool | None = Field(None, description="The last validation was taken at the run's final step (null until the run ended).")
    last_complete_checkpoint: str | None = Field(None, description="The newest checkpoints/step_N/policy complete by cosmos-rl's markers.")
    export: str | None = Field(None, description="The newest whole safetensors/step_N export.")
    attempts: list[dict[str, Any]] = Field(default_factory=list, description="The job's attempts, oldest first: {attempt, started, host, ...}; "
                                           "at least the current one once the job was launched.")
    cause: str | None = Field(None, description="Why it failed or stopped, when known (result.json's reason, the record's error).")
    updated: float | None = Field(None, description="Unix time of the newest file read (metrics.jsonl or result.json).")


def read_result(run_dir: str | Path) -> dict[str, Any]:
    """The run's result.json ({} while it runs, or when unreadable)."""
    try:
        data = json.loads((Path(run_dir) / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read(run_dir: str | Path | None) -> Progress:
    """Progress of one run folder (an absent or unnamed folder: not started)."""
    if run_dir is None or not Path(run_dir).is_dir():
        return Progress(run_dir=str(run_dir) if run_dir else None)
    folder = Path(run_dir)
    rows = layout.read_metrics(folder)
    train = [r for r in rows if "loss" in r]
    vals = [r for r in rows if "val_loss" in r]
    result = read_result(folder)
    total = next((r.get("total_steps") for r in reversed(rows) if r.get("total_steps")), None) or result.get("total_steps")
    newest = layout.newest_complete_checkpoint(folder) if (folder / "checkpoints").is_dir() else None
    exports = layout.list_safetensors_steps(folder)
    status = result.get("status")
    state: str = status if status in ("succeeded", "failed") else ("running" if rows else "not started")
    last_step = train[-1]["step"] if train else result.get("last_step")
    last_val_step = vals[-1]["step"] if vals else result.get("last_val_step")
    ended = status in ("succeeded", "failed")
    mtimes = [p.stat().st_mtime for p in (folder / layout.METRICS_FILE, folder / RESULT_FILE) if p.is_file()]
    return Progress(
        state=state,
        run_dir=str(folder),
        last_step=last_step,
        total_steps=total,
        last_loss=train[-1].get("loss") if train else result.get("last_loss"),
        last_val_loss=vals[-1].get("val_loss") if vals else result.get("last_val_loss"),
        last_reward_mean=next((r["reward_mean"] for r in reversed(train) if r.get("reward_mean") is not None), result.get("last_reward_mean")),
        last_val_step=last_val_step,
        val_at_final_step=(last_val_step is not None and last_val_step == (total or last_step)) if ended else None,
        last_complete_checkpoint=str(newest) if newest else None,
        export=str(layout.safetensors_dir(folder, exports[-1])) if exports else None,
        cause=result.get("reason") if status == "failed" else None,
        updated=max(mtimes) if mtimes else None,
    )


def summary(progress: Progress) -> dict[str, Any]:
    """What result.json and a record's summary say at the end: the final validation and whether it was
    taken at the final step, with the last step and loss."""
    return {
        "last_step": progress.last_step, "total_steps": progress.total_steps, "last_loss": progress.last_loss,
        "last_val_loss": progress.last_val_loss, "last_val_step": progress.last_val_step,
        "val_at_final_step": progress.val_at_final_step, "export": progress.export,
    }


def line(progress: Progress) -> str:
    """One line for a terminal: state, step of total, losses, checkpoint."""
    step = f"step {progress.last_step}/{progress.total_steps}" if progress.last_step is not None else "no step yet"
    loss = f", loss {progress.last_loss:.4g}" if progress.last_loss is not None else ""
    val = (f", val {progress.last_val_loss:.4g} @ {progress.last_val_step}" if progress.last_val_loss is not None else "")
    val += f", reward {progress.last_reward_mean:.4g}" if progress.last_reward_mean is not None else ""
    ckpt = f", checkpoint step {layout.step_of(progress.last_complete_checkpoint)}" if progress.last_complete_checkpoint else ""
    cause = f" ({progress.cause})" if progress.cause else ""
    return f"{progress.state}: {step}{loss}{val}{ckpt}{cause}"


def final_validation_line(result: dict[str, Any]) -> str:
    """The summary's last line: the final validation loss and whether it was taken at the final step (both backends say it)."""
    if result.get("last_val_step") is None:
        return "final validation: none was run (validation.enable is false, or no validation records)"
    at = "at the final step" if result.get("val_at_final_step") else f"NOT at the final step {result.get('total_steps')}: it is older than the final weights"
    return f"final validation loss: {result.get('last_val_loss')} at step {result['last_val_step']} ({at})"
