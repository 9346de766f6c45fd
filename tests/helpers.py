"""Small helpers shared by tests (not fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILL = "tao-finetune-cosmos-reason"


def skillbank(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter, as an agent would."""
    return subprocess.run(
        [sys.executable, "-m", "skillbank.cli", *args],
        cwd=cwd or ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def json_out(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout)
