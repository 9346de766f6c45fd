"""Training curves: TensorBoard event files always, wandb when logging.logger has "wandb".

One table of names (SCALARS) maps a metrics.jsonl key, which the local backend writes and the
cosmos-rl log watcher reads from cosmos-rl's lines, to the scalar name cosmos-rl itself reports to
wandb (train/loss_avg, optimizer/grad_norm, val/avg_loss, ...), so a dashboard reads the same
names whichever backend trained. Events go to <run>/tensorboard/ (`tensorboard --logdir` it);
wandb runs offline (files under <run>/wandb/, `wandb sync` them later) when WANDB_API_KEY is unset,
WANDB_MODE says so, or the service cannot be reached.

A monitor never fails a run: a logger that cannot start is reported once and left out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

TENSORBOARD_DIR = "tensorboard"
WANDB_DIR = "wandb"

# metrics.jsonl key -> scalar name (cosmos-rl 0.4.7's report names where it has one).
SCALARS: dict[str, str] = {
    "loss": "train/loss_avg",
    "lr": "optimizer/lr",
    "grad_norm": "optimizer/grad_norm",
    "samples_per_s": "train/samples_per_s",
    "iteration_time": "train/iteration_time",
    "epoch": "train/epoch",
    "val_loss": "val/avg_loss",
    "gpu_memory_allocated_gib": "memory/max_allocated_gib",
    "gpu_memory_reserved_gib": "memory/max_reserved_gib",
    # GRPO (both backends: the local GRPO loop and the cosmos-rl watcher's reading of the controller's step line)
    "reward_mean": "train/reward_mean",
    "reward_std": "train/reward_std",
    "kl": "train/kl_loss_avg",
    "response_length": "rollout/completion_length_mean",
    "entropy": "train/entropy",
    "val_reward_mean": "val/reward_avg",
}


def tensorboard_dir(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / TENSORBOARD_DIR


def where_to_look(run_dir: str | os.PathLike[str], loggers: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The lines `skillbank train` prints so a person knows where the curves are."""
    lines = [f"curves     : tensorboard --logdir {tensorboard_dir(run_dir)}"]
    if "wandb" in loggers:
        offline = wandb_offline()
        lines.append(f"wandb      : {'offline under ' + str(Path(run_dir) / WANDB_DIR) + ' (wandb sync it later)' if offline else 'online (WANDB_API_KEY is set)'}")
    return lines


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics row, under their scalar names."""
    out = {}
    for key, name in SCALARS.items():
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf"):
            out[name] = float(value)
    return out


def wandb_offline() -> bool:
    mode = os.environ.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled", "dryrun"):
        return True
    return not os.environ.get("WANDB_API_KEY") and mode != "online"


class Monitor:
    """Writes each metrics row as scalars at its step. Rank 0 only; close() flushes."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        loggers: list[str] | tuple[str, ...] = (),
        project: str = "skillbank",
        run_name: str | None = None,
        config: dict[str, Any] | None = None,
        resume_step: int | None = None,
        log: Callable[[str], None] = print,
    ):
        self.run_dir = Path(run_dir)
        self.log = log
        self._tb: Any = None
        self._wandb: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: a resumed run hides the killed attempt's points after the checkpoint
            self._tb = SummaryWriter(log_dir=str(tensorboard_dir(self.run_dir)), purge_step=resume_step)
        except Exception as exc:  # tensorboard missing or the folder unwritable: curves off, training on
            log(f"WARNING: TensorBoard logging is off: {type(exc).__name__}: {exc}")
        if "wandb" in loggers:
            self._wandb = self._start_wandb(project, run_name or self.run_dir.name, config or {}, resumed=resume_step is not None)

    def _start_wandb(self, project: str, name: str, config: dict[str, Any], *, resumed: bool) -> Any:
        try:
            import wandb
        except ImportError:
            self.log('WARNING: logging.logger has "wandb" but wandb is not installed (pip install wandb); logging to TensorBoard only')
            return None
        directory = self.run_dir  # wandb writes <dir>/wandb/
        kwargs = dict(project=project, name=name, id=_wandb_id(self.run_dir.name), resume="allow" if resumed else None,
                      dir=str(directory), config=config, reinit="finish_previous")
        if not wandb_offline():
            try:
                return wandb.init(mode="online", settings=wandb.Settings(init_timeout=60, console="off"), **kwargs)
            except Exception as exc:
                self.log(f"WARNING: wandb online start failed ({type(exc).__name__}); logging offline under {directory / WANDB_DIR}")
        try:
            return wandb.init(mode="offline", settings=wandb.Settings(console="off"), **kwargs)
        except Exception as exc:
            self.log(f"WARNING: wandb is off: {type(exc).__name__}: {exc}")
            return None

    def write(self, row: dict[str, Any]) -> None:
        step = row.get("step")
        values = scalars(row)
        if step is None or not values:
            return
        if self._tb is not None:
            for name, value in values.items():
                self._tb.add_scalar(name, value, global_step=int(step))
            self._tb.flush()
        if self._wandb is not None:
            try:
                self._wandb.log(values, step=int(step))
            except Exception as exc:
                self.log(f"WARNING: wandb logging stopped: {type(exc).__name__}: {exc}")
                self._wandb = None

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            try:
                self._wandb.finish()
            except Exception:
                pass
            self._wandb = None


def _wandb_id(run_id: str) -> str:
    """A stable wandb run id per run folder, so a resumed run continues its curves."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in run_id)
