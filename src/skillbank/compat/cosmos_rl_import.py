"""Import cosmos_rl without its import chatter reaching the user's terminal.

Importing cosmos-rl 0.4.7's reward, config or model packages prints ~20 lines: the model registry's
discovery ("Auto-discovering BaseModel subclasses...", "[Model] Warning: Could not import module
internvl: No module named 'triton'"), "grouped_gemm is not available. Please run: pip install ..."
from its MoE kernels, and through its `cosmos` logger "ERROR - Failed to import VLLM Rollout" (vLLM
is only needed by the rollout workers on the GPU node). None of it is a problem of the user's run,
an agent reads it as one, and on stdout it breaks `--json`. Every in-process import of cosmos_rl by a
skillbank command goes through `quiet()` / `import_quietly()` (the one helper): while it runs, stdout,
stderr and the `cosmos` logger write to the debug log `debug_log()` (SKILLBANK_CACHE/logs/
cosmos_rl_import.log, appended, restarted past 1 MiB). Afterwards the `cosmos` logger is what
cosmos-rl itself sets up (a stderr handler, unless the host configured logging), so its messages at
run time still show. cosmos-rl's own processes (the launcher, the workers running our dataset
scripts) are not wrapped: their output is the run's logs. Ground floor: no skillbank imports but paths.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import IO

LOGGER = "cosmos"  # cosmos_rl.utils.logging's logger
FORMAT = "[cosmos] %(asctime)s - %(name)s - %(levelname)s - %(message)s"  # cosmos-rl's own format
MAX_BYTES = 1 << 20


def debug_log() -> Path:
    """Where the import chatter goes (SKILLBANK_CACHE/logs/cosmos_rl_import.log)."""
    from skillbank.paths import cache_dir

    return cache_dir() / "logs" / "cosmos_rl_import.log"


@contextlib.contextmanager
def _sink(what: str) -> Iterator[IO[str]]:
    """The debug log opened for appending (restarted past MAX_BYTES); the null device when it cannot be written."""
    path = debug_log()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = "w" if path.is_file() and path.stat().st_size > MAX_BYTES else "a"
        out = open(path, mode, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError:
        out = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    try:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: import of {what}\n")
        yield out
    finally:
        out.close()


@contextlib.contextmanager
def quiet(what: str = "cosmos_rl") -> Iterator[Path]:
    """Run cosmos_rl imports with their prints, warnings and `cosmos` log records sent to debug_log()."""
    logger = logging.getLogger(LOGGER)
    fresh = not logger.handlers  # cosmos_rl.utils.logging has not installed its handler yet
    saved, propagate = list(logger.handlers), logger.propagate
    with _sink(what) as out:
        catch = logging.StreamHandler(out)
        catch.setFormatter(logging.Formatter(FORMAT))
        for handler in saved:
            logger.removeHandler(handler)
        logger.addHandler(catch)  # present before cosmos-rl's logging module runs: it installs no stderr handler of its own
        logger.propagate = False
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                yield debug_log()
        finally:
            logger.removeHandler(catch)
            for handler in saved:
                logger.addHandler(handler)
            logger.propagate = propagate
            if fresh and "cosmos_rl.utils.logging" in sys.modules:
                _as_cosmos_sets_it_up(logger)


def _as_cosmos_sets_it_up(logger: logging.Logger) -> None:
    """What cosmos_rl.utils.logging does at import when nothing routes the logger: a stderr handler
    at the logger's level, no propagation; when the host configured logging, propagation to it."""
    if logger.hasHandlers():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logger.level)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.propagate = False


def import_quietly(module: str) -> ModuleType:
    """importlib.import_module(module) under quiet(): the module, its chatter in debug_log()."""
    if module in sys.modules:
        return sys.modules[module]
    with quiet(module):
        return importlib.import_module(module)
