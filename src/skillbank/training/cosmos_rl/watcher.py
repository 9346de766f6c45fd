"""Watch a cosmos-rl run through its logs: its exit code cannot be trusted.

cosmos-rl exits 0 when a policy process crashes, so progress and failure are read from the lines
it writes: `<log_dir>/logs_latest/{controller.log, policy_*.log}` (policy lines carry torchrun's
`[rankN]:` prefix), on a multi-node job every node's (a log_dir named node_<i> has siblings
node_0, node_1, ...: all are read), and the launcher's own output (`Process P failed with return code R`).
Master-rank `Step: s/T, Loss: l` lines become a progress bar and metrics.jsonl rows: one row per step
and one per validation, each with step, total_steps, epoch and time (the local backend writes the same).
A GRPO run logs its steps in the controller instead (`Step: s/T, Reward Mean: m, ...`, GRPO_STEP below): the
same rows, with the local GRPO backend's reward keys (reward_mean, reward_std, kl, response_length, ...).
Checkpoints and exports are the policy's lines in both.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skillbank.redaction import redact
from skillbank.runs import layout
from skillbank.training.cosmos_rl import causes

STEP = re.compile(r"Step: (\d+)/(\d+), Loss: ([0-9.eE+-]+|nan|inf)", re.IGNORECASE)
# More of the step line, as cosmos-rl 0.4.7 writes it ("Grad norm: g, Iteration time: ts, optimizer/lr_<part>: x")
# and the local backend does ("Learning rate: x, grad_norm: g"): metrics.jsonl keys of skillbank.training.monitor.SCALARS.
STEP_FIELDS = {
    "grad_norm": re.compile(r"(?:Grad norm|grad_norm): ([0-9.eE+-]+|nan|inf)", re.IGNORECASE),
    "lr": re.compile(r"(?:optimizer/lr_\S*|Learning rate): ([0-9.eE+-]+)"),
    "iteration_time": re.compile(r"Iteration time: ([0-9.eE+-]+)s"),
}
EPOCH = re.compile(r"Training epoch (\d+)/(\d+)")
VAL_LOSS = re.compile(r"\[SFT\] Validation loss: ([0-9.eE+-]+|nan|inf) for train step (\d+)/(\d+), epoch (\d+)", re.IGNORECASE)
# GRPO: the controller's line per policy step, written only with "console" in logging.logger (cosmos_rl/dispatcher/status.py:
# line 2548 of 0.4.7 as installed; line 1807 of nvidia-cosmos/cosmos-rl at 89f2e5b): "Step: s/T, Reward Mean: m, Reward Std: sd, Reward
# Max: .., Reward Min: .., Completion Length Mean: .., Completion Length Max: .., Average loss: l, Max loss: .., Learning rate: x, Entropy: ..,
# Effective Entropy: .., Grad Norm: g, KL Loss Avg: k, KL Loss Max: .., Iteration time: ts." total_steps is the controller's horizon
# at that step (it can shrink when prompts run out). Fields -> metrics.jsonl keys (the local GRPO backend's where it has one).
GRPO_STEP = re.compile(r"Step: (\d+)/(\d+), Reward Mean: ")
_NUM = r"(-?(?:nan|inf|[0-9.]+(?:[eE][+-]?\d+)?))"
GRPO_FIELDS = {key: re.compile(rf", {label}: {_NUM}") for key, label in {
    "reward_mean": "Reward Mean", "reward_std": "Reward Std", "reward_max": "Reward Max", "reward_min": "Reward Min",
    "response_length": "Completion Length Mean", "loss": "Average loss", "loss_max": "Max loss", "lr": "Learning rate",
    "entropy": "Entropy", "grad_norm": "Grad Norm", "kl": "KL Loss Avg", "iteration_time": "Iteration time"}.items()}
# GRPO validation (validation.enable; skillbank's rl TOML turns it off): status.py line 1499 of 0.4.7, 1064 at 89f2e5b.
GRPO_VAL = re.compile(rf"Validation finished, average reward: {_NUM}, total rollouts: (\d+),.* at step (\d+)")
CHECKPOINT = re.compile(r"checkpoint saved successfully at (\S+?)\.?\s*$")
EXPORTED = re.compile(r"Exported safetensors to (\S+)")
PROCESS_FAILED = re.compile(r"Process (\d+) failed with return code (-?\d+)")
RANK_PREFIX = re.compile(r"^\[[A-Za-z_]*\d+\]:")
TRACEBACK = "Traceback (most recent call last):"
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::.*)?$")  # "RuntimeError: ...", "KeyboardInterrupt"

# Messages that end a run, with what they mean: the fatal entries of the known-causes table (causes.py).
FATAL = tuple(c for c in causes.CAUSES if c.fatal)


@dataclass
class WatchResult:
    status: str  # "succeeded" | "failed"
    reason: str
    last_step: int | None = None
    total_steps: int | None = None
    epoch: int | None = None
    total_epochs: int | None = None
    last_loss: float | None = None
    last_val_loss: float | None = None
    last_val_step: int | None = None
    val_at_final_step: bool | None = None  # the last validation was taken at the final step (the loss to report)
    last_reward_mean: float | None = None  # GRPO: the last step's mean reward (null for SFT)
    final_safetensors: str | None = None
    checkpoints: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    launcher_returncode: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Tail:
    """New complete lines of a growing file; a line split across reads is held until its newline."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self, *, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:  # truncated or replaced: start over
                    self.offset, self.partial = 0, b""
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        self.offset += len(chunk)
        pieces = (self.partial + chunk).split(b"\n")
        self.partial = pieces.pop()
        if final and self.partial:
            pieces.append(self.partial)
            self.partial = b""
        lines = []
        for piece in pieces:  # tqdm bars rewrite a line with \r: each segment is a line of its own
            lines.extend(seg for seg in piece.decode("utf-8", "replace").split("\r") if seg.strip())
        return lines


class LogWatcher:
    """Feeds every new line of the run's logs to one parser; `finish()` decides the outcome."""

    def __init__(
        self,
        log_dir: str | Path,
        run_dir: str | Path,
        *,
        metrics_path: str | Path | None = None,
        launcher_log: str | Path | None = None,
        expect_export: bool = True,
        progress: bool = True,
        log: Callable[[str], None] = print,
        monitor: Any = None,
        stamp_exports: bool = True,
    ):
        """monitor: a skillbank.training.monitor.Monitor that gets every metrics row (TensorBoard).
        stamp_exports: write the recipe into the run's exports as they appear (the launch does; readers such as
        `jobs diagnose` and `report` pass False: they never write into a run folder)."""
        self.log_dir = Path(log_dir)
        self.monitor = monitor
        self.stamp_exports = stamp_exports
        self.run_dir = Path(run_dir)
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.launcher_log = Path(launcher_log) if launcher_log else None
        self.expect_export = expect_export
        self.log = log
        self._progress = progress
        self._bar: Any = None
        self._tails: dict[Path, _Tail] = {}
        self._in_traceback: dict[str, bool] = {}
        self.failures: list[str] = []
        self._failure_rank: dict[str, int] = {}  # message -> how telling it is (lower: the better reason)
        self._fatal_seen: set[str] = set()  # each known fatal message once, however many ranks print it
        self.warnings: list[str] = []
        self.last_step: int | None = None
        self.total_steps: int | None = None
        self.epoch: int | None = None
        self.total_epochs: int | None = None
        self.last_loss: float | None = None
        self.losses: list[tuple[int, float | None]] = []  # (step, loss) of every logged step: diagnose smooths them
        self.last_val_loss: float | None = None
        self.last_val_step: int | None = None
        self.last_reward_mean: float | None = None  # GRPO
        self.checkpoints: list[str] = []
        self.exported: list[str] = []
        self._val_steps: set[int] = set()

    # --- reading --------------------------------------------------------------------------------

    def sources(self) -> list[Path]:
        found = [self.launcher_log] if self.launcher_log else []
        for folder in node_log_dirs(self.log_dir):
            latest = folder / "logs_latest"
            if latest.is_dir():
                found += sorted(latest.glob("*.log"))
        return found

    def poll(self, *, final: bool = False) -> None:
        for path in self.sources():
            key = path.resolve()
            tail = self._tails.setdefault(key, _Tail(path))
            for line in tail.read(final=final):
                self.feed(line, source=path.name)

    def feed(self, line: str, *, source: str = "") -> None:
        """One line of `source` (controller.log, policy_0.log, launcher.log)."""
        text = RANK_PREFIX.sub("", line, count=1)
        self._check_failure(text, source)
        if source.startswith("controller"):
            self._on_controller(text)
        if not source.startswith("policy"):
            return  # progress comes from the policy's master rank (the controller may echo it, late)
        if m := STEP.search(text):
            self._on_step(int(m[1]), int(m[2]), _number(m[3]), _step_fields(text))
        elif m := EPOCH.search(text):
            if (int(m[1]), int(m[2])) != (self.epoch, self.total_epochs):  # every rank prints it
                self.epoch, self.total_epochs = int(m[1]), int(m[2])
                self.log(f"epoch {self.epoch}/{self.total_epochs}")
        elif m := VAL_LOSS.search(text):
            self._on_val(_number(m[1]), int(m[2]), int(m[3]), int(m[4]))
        elif m := CHECKPOINT.search(text):
            if m[1] not in self.checkpoints:
                self.checkpoints.append(m[1])
                self.log(f"checkpoint saved: {m[1]}")
        elif m := EXPORTED.search(text):
            if m[1] not in self.exported:
                self.exported.append(m[1])
                self.log(f"safetensors exported: {m[1]}")
                self.stamp_recipes()

    def _on_controller(self, text: str) -> None:
        """GRPO's step and validation lines (an SFT controller's echo of the policy's step line is not read)."""
        if m := GRPO_STEP.search(text):
            fields = {key: _number(f[1]) for key, pattern in GRPO_FIELDS.items() if (f := pattern.search(text))}
            loss = fields.pop("loss", None)
            if self.last_step is None or int(m[1]) > self.last_step:
                self.last_reward_mean = fields.get("reward_mean")
            self._on_step(int(m[1]), int(m[2]), loss, fields)
        elif m := GRPO_VAL.search(text):
            step = int(m[3])
            if step not in self._val_steps:
                self._val_steps.add(step)
                self._row({"step": step, "total_steps": self.total_steps, "epoch": self.epoch, "val_reward_mean": _number(m[1]),
                           "val_rollouts": int(m[2]), "time": time.time()})
                self.log(f"validation reward {m[1]} at step {step}")

    def _on_step(self, step: int, total: int, loss: float | None, fields: dict[str, float | None] | None = None) -> None:
        self.total_steps = total
        if self.last_step is not None and step <= self.last_step:
            return  # seen already (a rank echoing it)
        previous = self.last_step or 0
        self.last_step, self.last_loss = step, loss
        self.losses.append((step, loss))
        if loss is None:
            self.warnings.append(f"non-finite loss at step {step}")
        self._row({"step": step, "total_steps": total, "epoch": self.epoch, "loss": loss, **(fields or {}), "time": time.time()})
        bar = self._progress_bar(total, previous)
        if bar is not None:
            bar.update(step - bar.n)
            reward = (fields or {}).get("reward_mean")
            bar.set_postfix(loss="nan" if loss is None else f"{loss:.4g}", **({"reward": f"{reward:.3f}"} if reward is not None else {"epoch": self.epoch}),
                            refresh=False)

    def _on_val(self, val_loss: float | None, step: int, total: int, epoch0: int) -> None:
        if step in self._val_steps:
            return
        self._val_steps.add(step)
        self.last_val_loss, self.last_val_step = val_loss, step
        epoch = self.epoch if self.epoch is not None else epoch0 + 1  # cosmos-rl logs a 0-based epoch here
        self._row({"step": step, "total_steps": total, "epoch": epoch, "val_loss": val_loss, "time": time.time()})
        self.log(f"validation loss {val_loss} at step {step}/{total}")

    def _check_failure(self, text: str, source: str) -> None:
        in_traceback = self._in_traceback.get(source, False)
        if in_traceback and text[:1].isspace():
            return  # a frame or its source line: the exception line below it tells what happened
        for cause in FATAL:
            if cause.pattern.search(text):
                self._in_traceback[source] = False
                if cause.name not in self._fatal_seen:
                    self._fatal_seen.add(cause.name)
                    self._fail(f"{causes.found(cause, text, source).cause} [{source}: {text.strip()}]", rank=0)
                return
        if m := PROCESS_FAILED.search(text):
            self._fail(f"a cosmos-rl process ({m[1]}) failed with return code {m[2]} [{source}]", rank=2)
            return
        if TRACEBACK in text:
            self._in_traceback[source] = True
            return
        if in_traceback and EXCEPTION_LINE.match(text.rstrip()):
            self._in_traceback[source] = False
            known = causes.match(text)  # one the table does not end a run on by itself (disk full, hub 401/403)
            said = f"{causes.found(known, text, source).cause} [{source}: {text.strip()}]" if known else f"{source}: {text.strip()}"
            self._on_exception(said, source, rank=1)

    def _on_exception(self, message: str, source: str, *, rank: int) -> None:
        if source.startswith("controller"):
            self.warnings.append(redact(message))  # the controller logs some exceptions it handles
        else:
            self._fail(message, rank=rank)

    def _fail(self, message: str, *, rank: int) -> None:
        """Record a failure; rank 0 a known fatal message, 1 an exception, 2 a process exit, 3 a bare traceback."""
        message = redact(message)
        if message not in self._failure_rank:
            self._failure_rank[message] = rank
            self.failures.append(message)
            self.log(f"failure: {message}")

    @property
    def reason(self) -> str:
        """The most telling failure: the first of the best rank (a launcher's exit says less than a traceback)."""
        return min(self.failures, key=lambda m: self._failure_rank[m]) if self.failures else ""

    # --- outputs --------------------------------------------------------------------------------

    def _row(self, row: dict[str, Any]) -> None:
        """Append one metrics row (an append-only stream: a reader may see a partial last line)."""
        if self.monitor is not None:
            self.monitor.write(row)
        if self.metrics_path is None:
            return
        self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    def _progress_bar(self, total: int, initial: int) -> Any:
        if not self._progress:
            return None
        if self._bar is None or self._bar.total != total:
            from tqdm import tqdm

            if self._bar is not None:
                self._bar.close()
            self._bar = tqdm(total=total, initial=initial, unit="step", desc="cosmos-rl", file=sys.stderr, dynamic_ncols=True)
        return self._bar

    def stamp_recipes(self) -> None:
        """cosmos-rl's exports carry no recipe: write skillbank_recipe.json (from the run's cosmos_rl.toml)
        into every whole safetensors/step_N that lacks one. A failure is a warning, never a failed run."""
        if not self.stamp_exports:
            return
        from skillbank import recipe

        try:
            recipe.stamp_run_exports(self.run_dir)
        except OSError as exc:
            message = f"could not write {recipe.RECIPE_FILE} into the exports of {self.run_dir}: {exc}"
            if message not in self.warnings:
                self.warnings.append(message)

    def final_safetensors(self) -> str | None:
        """The newest whole `safetensors/step_N` export of the run folder (cosmos-rl has no `final/`)."""
        steps = layout.list_safetensors_steps(self.run_dir)
        return str(layout.safetensors_dir(self.run_dir, steps[-1])) if steps else None

    def finish(self, launcher_returncode: int | None = None) -> WatchResult:
        """Read what is left (a last line without newline included) and decide the outcome."""
        self.poll(final=True)
        for source, pending in self._in_traceback.items():
            if pending:  # a traceback whose exception line never came
                self._on_exception(f"a traceback in {source} (see that log)", source, rank=3)
        if self._bar is not None:
            self._bar.close()
        if self.monitor is not None:
            self.monitor.close()
        self.stamp_recipes()  # an export whose log line was missed, or written as the run ended
        final = self.final_safetensors()
        reason = self._failure_reason(launcher_returncode, final)
        return WatchResult(
            status="failed" if reason else "succeeded",
            reason=reason or f"trained {self.last_step}/{self.total_steps} steps",
            last_step=self.last_step,
            total_steps=self.total_steps,
            epoch=self.epoch,
            total_epochs=self.total_epochs,
            last_loss=self.last_loss,
            last_val_loss=self.last_val_loss,
            last_val_step=self.last_val_step,
            val_at_final_step=None if self.last_val_step is None else self.last_val_step == (self.total_steps or self.last_step),
            last_reward_mean=self.last_reward_mean,
            final_safetensors=final,
            checkpoints=list(self.checkpoints),
            warnings=list(self.warnings),
            launcher_returncode=launcher_returncode,
        )

    def _failure_reason(self, returncode: int | None, final: str | None) -> str:
        if self.failures:
            return self.reason
        if returncode:
            return f"cosmos-rl exited with return code {returncode}"
        if self.last_step is None:
            return "no training step was logged (is \"console\" in logging.logger? see the logs)"
        if self.total_steps is not None and self.last_step < self.total_steps:
            return f"training stopped at step {self.last_step}/{self.total_steps} without an error in the logs"
        if self.expect_export and final is None:
            return f"training finished but no safetensors export was found under {self.run_dir / 'safetensors'}"
        return ""


NODE_DIR = re.compile(r"^node_\d+$")


def node_log_dirs(log_dir: Path) -> list[Path]:
    """A launcher's --log-dir and, for node_<i> of a multi-node job, every node's (node_0, node_1, ...: one replica spans them)."""
    if NODE_DIR.match(log_dir.name) and log_dir.parent.is_dir():
        return sorted((p for p in log_dir.parent.iterdir() if NODE_DIR.match(p.name)), key=lambda p: int(p.name[5:])) or [log_dir]
    return [log_dir]


def _step_fields(text: str) -> dict[str, float | None]:
    return {key: _number(m[1]) for key, pattern in STEP_FIELDS.items() if (m := pattern.search(text))}


def _number(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def watch(
    process: subprocess.Popen[Any],
    watcher: LogWatcher,
    *,
    interval: float = 1.0,
    fail_grace_s: float = 120.0,
    tick: Callable[[], None] | None = None,
) -> WatchResult:
    """Tail the logs until the launcher exits. After a failure, give the run `fail_grace_s` to end by
    itself (steps still coming restart the wait), then stop the launcher's process tree."""
    failed_at: float | None = None
    step_at_failure = None
    from skillbank import procs

    while process.poll() is None:
        procs.raise_if_stopped()  # a safe point: SIGTERM / Ctrl-C under procs.stop_on_signals stops the launcher (the caller's cleanup)
        watcher.poll()
        if tick is not None:
            tick()  # the job record reads the progress the watcher just wrote
        if watcher.failures:
            if failed_at is None or watcher.last_step != step_at_failure:
                failed_at, step_at_failure = time.monotonic(), watcher.last_step
            elif time.monotonic() - failed_at > fail_grace_s:
                watcher.log(f"stopping cosmos-rl: it kept running {fail_grace_s:.0f} s after the failure")
                stop(process)
                break
        time.sleep(interval)
    procs.raise_if_stopped()  # ended by the stop's SIGTERM: a stop, not a failed run
    return watcher.finish(process.wait())


def stop(process: subprocess.Popen[Any], *, grace_s: float = 15.0) -> None:
    """Stop the launcher and everything it started: its workers run in sessions of their own, out of
    reach of its process group (skillbank.procs: SIGTERM + SIGCONT to the tree, SIGKILL after grace_s)."""
    from skillbank import procs

    procs.stop(process.pid, grace_s=grace_s)
    process.wait()
