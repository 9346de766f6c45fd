"""The loop's memory: state.json (rewritten atomically after every change) and log.jsonl (append-only).

state.json lists every stage as "round_N/<stage>" with its status (running | done), start and finish
times, attempts, the files it wrote (outputs) and its result. A stage found "running" on --resume was
interrupted: it runs again (training continues from its newest complete checkpoint); a "done" stage is
never run again, its recorded result is reused.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic
from skillbank.errors import InputError

STATE = "state.json"
LOG = "log.jsonl"
VERSION = 1


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


class LoopState:
    def __init__(self, folder: Path, data: dict[str, Any]) -> None:
        self.folder = folder
        self.data = data

    # ---- open ------------------------------------------------------------------------------------
    @classmethod
    def open(cls, folder: Path, config: dict[str, Any], *, resume: bool) -> "LoopState":
        """A new state (no state.json yet) or, with resume, the existing one for the same config."""
        path = folder / STATE
        digest = config_hash(config)
        if path.is_file():
            if not resume:
                raise InputError(f"{path} exists: this output_dir holds a DEFT run", where="output_dir",
                                 fix="pass --resume to continue it, or set output_dir to a new folder")
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("config_hash") != digest:
                raise InputError(f"the config differs from the one {path} was started with", where="--config",
                                 fix="resume with the original config, or start a new run in a new output_dir")
            state = cls(folder, data)
            state.log("resume", stages_done=sum(s["status"] == "done" for s in data["stages"].values()))
            return state
        data = {"version": VERSION, "config_hash": digest, "config": config, "created": now(), "updated": now(),
                "status": "running", "stages": {}, "rounds": [], "best": None, "stop": None}
        state = cls(folder, data)
        state.save()
        state.log("start", config_hash=digest)
        return state

    # ---- write -----------------------------------------------------------------------------------
    def save(self) -> None:
        self.data["updated"] = now()
        atomic.write_json(self.folder / STATE, self.data)

    def log(self, event: str, **fields: Any) -> None:
        """One line appended to log.jsonl (flushed and fsynced: the log survives a kill)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": now(), "event": event, **fields}, default=str)
        with open(self.folder / LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    # ---- stages ----------------------------------------------------------------------------------
    def stage(self, round_no: int, name: str) -> dict[str, Any] | None:
        return self.data["stages"].get(f"round_{round_no}/{name}")

    def stage_dir(self, round_no: int, name: str) -> Path:
        return self.folder / f"round_{round_no}" / name

    def run_stage(self, round_no: int, name: str, fn: Callable[[Path, bool], dict[str, Any]]) -> dict[str, Any]:
        """Run `fn(stage_dir, interrupted)` unless the stage is done; record and return its result.

        fn returns {"outputs": {name: path}, ...result}; `interrupted` is True when a previous attempt
        was killed mid-stage."""
        key = f"round_{round_no}/{name}"
        entry = self.data["stages"].get(key)
        if entry and entry["status"] == "done":
            return entry["result"]
        from skillbank import procs

        procs.raise_if_stopped()  # a safe point: SIGTERM / Ctrl-C (procs.stop_on_signals) ends the loop between stages
        interrupted = bool(entry and entry["status"] == "running")
        entry = {"round": round_no, "stage": name, "status": "running", "started": now(), "finished": None,
                 "attempts": (entry or {}).get("attempts", 0) + 1, "outputs": {}, "result": None}
        self.data["stages"][key] = entry
        self.save()
        self.log("stage_start", stage=key, attempt=entry["attempts"], interrupted=interrupted)
        folder = self.stage_dir(round_no, name)
        folder.mkdir(parents=True, exist_ok=True)
        result = fn(folder, interrupted)
        entry.update(status="done", finished=now(), outputs={k: str(v) for k, v in result.pop("outputs", {}).items()}, result=result)
        self.save()
        self.log("stage_done", stage=key, outputs=entry["outputs"])
        return result


def progress(folder: Path) -> dict[str, Any]:
    """Where a loop stands, from its state.json (`jobs status` of a DEFT job): status, the stages done and
    the one running, rounds decided, the best model so far and the stop; ok false when it has none yet."""
    path = folder / STATE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"ok": False, "error": f"no readable {path} yet (the loop has not started, or it is another machine's folder)"}
    stages = data.get("stages") or {}
    best = data.get("best") or {}
    return {"ok": True, "state": str(path), "status": data.get("status"),
            "stages_done": sum(s.get("status") == "done" for s in stages.values()),
            "running": [k for k, s in stages.items() if s.get("status") == "running"],
            "attempts": {k: s.get("attempts") for k, s in stages.items() if (s.get("attempts") or 0) > 1},
            "rounds": max((int(x.get("round", 0)) for x in data.get("rounds") or []), default=0),
            "best": {k: best.get(k) for k in ("round", "model", "benchmark")} if best else None, "stop": data.get("stop")}
