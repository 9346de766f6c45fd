"""cosmos-rl's import chatter ("Auto-discovering BaseModel subclasses...", "grouped_gemm is not
available", "ERROR - Failed to import VLLM Rollout") never reaches the terminal of a skillbank command
that imports cosmos_rl: it lands in the debug log (skillbank.compat.cosmos_rl_import), while cosmos-rl's
logger still shows what it logs afterwards. Real cosmos-rl 0.4.7, imported in a fresh process (~10 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json, logging
from skillbank.training.rewards import cosmos_reward
score = cosmos_reward("format", "<think>\\nhm\\n</think>\\n\\n<answer>\\nyes\\n</answer>", "yes")
logging.getLogger("cosmos").warning("a message cosmos-rl logs while it runs")
from skillbank.training.cosmos_rl.defaults import read_defaults  # the config package too (schemas' snapshot)
print(json.dumps({"score": score, "defaults": len(read_defaults()["sft"])}))
"""


def test_reward_and_config_imports_are_quiet_and_logged(tmp_path):
    env = {**os.environ, "SKILLBANK_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # stdout is the one JSON line: no chatter
    assert doc["score"] == 1.0 and doc["defaults"] > 10
    assert "Auto-discovering" not in proc.stderr and "VLLM" not in proc.stderr and "grouped_gemm" not in proc.stderr
    assert "[cosmos]" in proc.stderr and "a message cosmos-rl logs while it runs" in proc.stderr  # run-time logging still shows
    log = (tmp_path / "cache" / "logs" / "cosmos_rl_import.log").read_text()
    assert "import of cosmos_rl.dispatcher.algo.reward" in log and "Auto-discovering BaseModel subclasses" in log
    assert "ERROR - Failed to import VLLM Rollout" in log


def test_the_helper_restores_the_logger_it_found(tmp_path, monkeypatch, capsys):
    """In this process, without importing cosmos_rl: what the block prints goes to the debug log, and the
    `cosmos` logger's handlers and propagation are as they were (a host's routing is kept)."""
    import logging

    from skillbank.compat import cosmos_rl_import

    monkeypatch.setenv("SKILLBANK_CACHE", str(tmp_path))
    logger = logging.getLogger(cosmos_rl_import.LOGGER)
    mine = logging.NullHandler()
    logger.addHandler(mine)
    before = (list(logger.handlers), logger.propagate)
    try:
        with cosmos_rl_import.quiet("nothing") as path:
            print("chatter on stdout")
            print("chatter on stderr", file=sys.stderr)
            logger.error("an import-time error")
        assert (list(logger.handlers), logger.propagate) == before
    finally:
        logger.removeHandler(mine)
    out, err = capsys.readouterr()
    assert "chatter" not in out + err and "import-time" not in out + err
    text = path.read_text()
    assert path == tmp_path / "logs" / "cosmos_rl_import.log"
    assert "import of nothing" in text and "chatter on stdout" in text and "chatter on stderr" in text and "ERROR - an import-time error" in text
