"""Build workspaces (an eval's setup; its known-good and known-bad fixtures) and run an agent over evals.

`run` gives each eval a fresh workspace under OUT/<skill>/<id>/, starts the agent command there with the
recording skillbank first on PATH, stops it at the timeout (its whole process group), grades the workspace
and writes OUT/results.json and OUT/results.md (per eval: each check, the wall time, the agent's exit).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.evals import steps
from skillbank.evals.catalog import Entry
from skillbank.evals.grade import grade
from skillbank.evals.workspace import Workspace, fresh


def prepare(entry: Entry, root: Path) -> dict[str, str]:
    """A fresh workspace for the eval: its setup, the prompt, the recording shim."""
    ws = Workspace(fresh(root), entry)
    ws.meta.mkdir(parents=True, exist_ok=True)  # the shim exists before any setup step could need it
    steps.apply(entry.eval.setup, ws, agent=False)
    return ws.write_frame()


def fixture(entry: Entry, root: Path, *, bad: bool = False) -> dict[str, str]:
    """The known-good workspace (setup, then the good steps as an agent would take them); with bad, the bad
    steps applied on top of it."""
    info = prepare(entry, root)
    ws = Workspace(Path(info["workspace"]), entry)
    steps.apply(entry.eval.fixtures.good, ws, agent=True)
    if bad:
        steps.apply(entry.eval.fixtures.bad, ws, agent=True)
    return info


def _kill(proc: subprocess.Popen) -> None:
    """The agent and everything it started (its own process group), TERM then KILL."""
    for signum, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_one(entry: Entry, agent: str, folder: Path, timeout: float) -> dict[str, Any]:
    info = prepare(entry, folder / "workspace")
    fields = {"prompt_file": info["prompt_file"], "workspace": info["workspace"], "skill": entry.skill, "eval_id": entry.eval.id,
              "bank": info["bank"]}
    command = agent
    for name, value in fields.items():  # only these placeholders: the command's own braces (${VAR}, jq filters) stay
        command = command.replace("{" + name + "}", shlex.quote(value))
    env = dict(os.environ, PATH=os.pathsep.join([info["path"], os.environ.get("PATH", "")]), SKILLBANK_EVAL_WORKSPACE=info["workspace"])
    started = time.perf_counter()
    with open(folder / "agent.log", "wb") as log:
        proc = subprocess.Popen(["bash", "-c", command], cwd=info["workspace"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            code = proc.returncode
    wall = round(time.perf_counter() - started, 2)
    graded = grade(entry, Path(info["workspace"]))
    return {**graded.to_json(), "agent_exit": code, "timed_out": timed_out, "wall_s": wall, "command": command,
            "log": str(folder / "agent.log")}


def run(entries: list[Entry], agent: str, out: Path, timeout: float, pending: list[str] | None = None) -> dict[str, Any]:
    """Each eval in a fresh workspace, graded; OUT/results.json + OUT/results.md."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for entry in entries:
        folder = out / entry.skill / entry.eval.id
        folder.mkdir(parents=True, exist_ok=True)
        rows.append(run_one(entry, agent, folder, timeout))
    doc = {"ok": True, "agent": agent, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "timeout_s": timeout,
           "evals": len(rows), "passed": sum(r["passed"] for r in rows), "pending": pending or [], "results": rows}
    atomic.write_json(out / "results.json", doc)
    atomic.write_text(out / "results.md", markdown(doc))
    return doc


def markdown(doc: dict[str, Any]) -> str:
    pending = f" Pending (not run: a skillbank command they need is missing): {', '.join(doc['pending'])}." if doc["pending"] else ""
    lines = [f"# Agent evals: {doc['passed']}/{doc['evals']} passed", "",
             f"Agent: `{doc['agent']}`; {doc['date']}; timeout {doc['timeout_s']:g} s.{pending}", "",
             "| skill | eval | result | checks passed | wall s | agent exit | failed checks |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        checks = r["checks"]
        exit_text = "timeout" if r["timed_out"] else str(r["agent_exit"])
        lines.append(f"| {r['skill']} | {r['eval']} | {'PASS' if r['passed'] else 'FAIL'} | {sum(c['passed'] for c in checks)}/{len(checks)} "
                     f"| {r['wall_s']:g} | {exit_text} | {', '.join(r['failed']) or '-'} |")
    for r in doc["results"]:
        lines += ["", f"## {r['skill']} / {r['eval']}: {'PASS' if r['passed'] else 'FAIL'} ({r['wall_s']:g} s)", ""]
        lines += [f"- {'PASS' if c['passed'] else 'FAIL'} `{c['id']}` ({c['kind']}): {c['why']}".replace("|", "\\|") for c in r["checks"]]
    return "\n".join(lines) + "\n"

