"""An eval's workspace: the folder an agent works in, what prepare writes into it, and how checks and steps
read it (files by glob, dotted keys, the answer, the transcript) and run the real skillbank in it.

    DIR/                           the agent's current directory; the setup's files (data/qa, models/...)
    DIR/.skillbank-eval/prompt.md  the task as the agent gets it
    DIR/.skillbank-eval/bin/       the recording `skillbank` to put first on PATH (skillbank.evals.shim)
    DIR/.skillbank-eval/setup.json the eval, and the sha256 of every file the setup left (what `unchanged`
                                   and `code_lines` compare with)
    DIR/.skillbank-transcript.jsonl every skillbank invocation through the shim
    DIR/answer.md                  the agent's answer (else its transcript's final message)
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import skillbank
from skillbank import atomic
from skillbank.errors import InputError
from skillbank.evals.catalog import Entry
from skillbank.evals.transcript import TRANSCRIPT, Transcript, read
from skillbank.hashing import sha256_file
from skillbank.paths import bank_root
from skillbank.specification.evals import Source

META = ".skillbank-eval"
ANSWER = "answer.md"
MISSING = object()
PROMPT = """\
You work in the folder {workspace} (your current directory); every path in the task is relative to it.
The skill bank is {bank}: its skills are under {bank}/skills/ (each has a SKILL.md to start from), and the
`skillbank` command is on your PATH. The task is meant to be done here, offline: nothing in it needs a GPU or a download.

{question}

When the task asks a question or asks you to report something, write your answer (with the figures it asks
for) to {workspace}/answer.md.
"""


def dig(data: Any, key: str, default: Any = None) -> Any:
    """The value at a dotted key of any JSON-like value: a number part indexes a list (trials.0.value), `\\.`
    is a dot inside a key (best.params.train\\.optm_lr)."""
    node = data
    for part in (p.replace("\0", ".") for p in key.replace("\\.", "\0").split(".")):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return default
    return node


def package_src() -> Path:
    """The folder holding the skillbank package these commands run from (the bank's src/)."""
    return Path(skillbank.__file__).resolve().parents[1]


@dataclass
class Workspace:
    root: Path
    entry: Entry
    transcripts: list[Path] = field(default_factory=list)  # agents' own transcript files, beside the shim's

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    # ---- where things are -----------------------------------------------------------------------------
    @property
    def meta(self) -> Path:
        return self.root / META

    @property
    def transcript_path(self) -> Path:
        return self.root / TRANSCRIPT

    @property
    def bank(self) -> Path:
        """The bank the eval's commands run from: a copy inside the workspace (maintainer evals), else this one."""
        copy = self.entry.bank_copy
        return self.root / copy if copy else bank_root()

    @property
    def src(self) -> Path:
        return self.bank / "src" if self.entry.bank_copy else package_src()

    @property
    def shim_dir(self) -> Path:
        return self.meta / "bin"

    def expand(self, text: str) -> str:
        return text.replace("{workspace}", str(self.root)).replace("{bank}", str(self.bank))

    def path(self, rel: str) -> Path:
        return self.root / self.expand(rel)

    def arg(self, text: str) -> str:
        """A command argument: placeholders replaced; a glob that matches names its newest match (a job record's
        timestamped name), relative to the workspace."""
        text = self.expand(text)
        if any(ch in text for ch in "*?") and "=" not in text:
            found = self.glob(text)
            if found:
                return self.rel(found[-1])
        return text

    def glob(self, pattern: str) -> list[Path]:
        """Files matching a glob relative to the workspace (or an absolute path), oldest first by mtime."""
        expanded = self.expand(pattern)
        if any(ch in expanded for ch in "*?["):
            base = Path("/") if expanded.startswith("/") else self.root
            found = [p for p in base.glob(expanded.lstrip("/")) if META not in p.parts]
        else:
            target = self.path(expanded)
            found = [target] if target.exists() else []
        return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    # ---- running the real command line ----------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.src), *filter(None, [env.get("PYTHONPATH")])])
        env["SKILLBANK_ROOT"] = str(self.bank)
        for name in ("SKILLBANK_EVAL_TRANSCRIPT", "SKILLBANK_EVAL_NESTED"):
            env.pop(name, None)
        return env

    def run_cli(self, args: list[str], *, cwd: str = ".", shim: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
        """`skillbank ARGS` in the workspace: through the recording shim (a fixture acting as the agent) or not
        (setup and checks, which the transcript must not show)."""
        argv = [str(self.shim_dir / "skillbank")] if shim else [sys.executable, "-m", "skillbank.cli"]
        env = self.env()
        if shim:
            env["PATH"] = os.pathsep.join([str(self.shim_dir), env.get("PATH", "")])
        return subprocess.run([*argv, *[self.arg(a) for a in args]], cwd=self.path(cwd), env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    # ---- reading what is there ------------------------------------------------------------------------
    def load(self, path: Path, fmt: str | None = None) -> Any:
        """A file's content by format (yaml, json, toml, jsonl; from the suffix unless given)."""
        kind = fmt or {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml", ".jsonl": "jsonl",
                       ".parquet": "parquet"}.get(path.suffix.lower(), "yaml")
        if kind == "parquet":
            import pyarrow.parquet as pq  # light enough; never torch

            return {"rows": pq.read_metadata(path).num_rows}
        text = path.read_text(encoding="utf-8")
        if kind == "json":
            return json.loads(text)
        if kind == "jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        if kind == "toml":
            return tomllib.loads(text)
        return yaml.safe_load(text)

    def value(self, source: Source, run: Callable[[list[str]], subprocess.CompletedProcess] | None = None) -> tuple[Any, str]:
        """(value, where it came from); value MISSING when it cannot be had (where says why). `run` runs a
        source's skillbank command (default: run_cli; grading passes one that runs each command once)."""
        if source.path is not None:
            matches = self.glob(source.path)
            if not matches:
                return MISSING, f"{source.path}: no such file"
            try:
                data = self.load(matches[-1])
            except (OSError, ValueError, yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
                return MISSING, f"{self.rel(matches[-1])}: does not parse ({exc})"
            where = self.rel(matches[-1])
        elif source.args is not None:
            proc = (run or self.run_cli)(source.args)
            shown = "skillbank " + shlex.join(source.args)
            try:  # a verdict's exit code (jobs diagnose: 1 for a failed run) still comes with its document; bad input has ok false
                data = json.loads(proc.stdout)
            except ValueError:
                data = None
            if proc.returncode != 0 and (not isinstance(data, dict) or data.get("ok") is False or proc.returncode == 2):
                return MISSING, f"`{shown}` exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
            if data is None:
                return MISSING, f"`{shown}` printed no JSON document"
            where = f"`{shown}`"
        else:
            return source.value, "the eval"
        if source.key is None:
            return data, where
        found = dig(data, source.key, MISSING)
        return found, f"{where} {source.key}" + (" (absent)" if found is MISSING else "")

    def answer(self) -> tuple[str | None, str]:
        """The agent's answer: answer.md, else the transcript's final message."""
        path = self.root / ANSWER
        if path.is_file():
            return path.read_text(encoding="utf-8", errors="replace"), ANSWER
        message = self.transcript().final_message
        return message, "the transcript's final message" if message else "no answer.md and no final message in a transcript"

    def transcript(self) -> Transcript:
        return read([self.transcript_path, *self.transcripts])

    def setup_record(self) -> dict[str, Any] | None:
        path = self.meta / "setup.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    # ---- writing the frame around the setup -----------------------------------------------------------
    def files(self, only: Callable[[str], bool] | None = None) -> dict[str, str]:
        """sha256 of every file (symlinks to files included, the eval's own files left out; `only`: the names it
        accepts) by relative path."""
        out: dict[str, str] = {}
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = [d for d in dirs if d != META and d != "__pycache__"]
            for name in names:
                path = Path(folder) / name
                if path.name == TRANSCRIPT or (only is not None and not only(name)) or not path.is_file():
                    continue
                out[self.rel(path)] = sha256_file(path)
        return out

    def fingerprint(self) -> tuple[Any, ...]:
        """(path, size, mtime) of every file but the answer and the transcript: what a command's output may depend on."""
        found = []
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d != META)
            for name in sorted(names):
                path = Path(folder) / name
                if name in (TRANSCRIPT, ANSWER) and path.parent == self.root:
                    continue
                try:
                    st = path.stat()
                except OSError:
                    continue
                found.append((self.rel(path), st.st_size, st.st_mtime_ns))
        return tuple(found)

    def write_frame(self) -> dict[str, str]:
        """The prompt, the shim and the setup record; returns what an agent runner needs."""
        prompt = self.meta / "prompt.md"
        atomic.write_text(prompt, PROMPT.format(workspace=self.root, bank=self.bank, question=self.expand(self.entry.eval.question)))
        self.shim_dir.mkdir(parents=True, exist_ok=True)
        shim = self.shim_dir / "skillbank"
        quote = shlex.quote
        atomic.write_text(shim, "\n".join([
            "#!/bin/sh",
            f"# skillbank for an eval: the real command line, each call recorded in {self.transcript_path}",
            f"export PYTHONPATH={quote(str(self.src))}${{PYTHONPATH:+:$PYTHONPATH}}",
            f"export SKILLBANK_ROOT={quote(str(self.bank))}",
            f"export SKILLBANK_EVAL_TRANSCRIPT={quote(str(self.transcript_path))}",
            f'exec {quote(sys.executable)} -m skillbank.evals.shim "$@"', ""]))
        shim.chmod(0o755)
        atomic.write_json(self.meta / "setup.json", {"skill": self.entry.skill, "eval": self.entry.eval.id, "bank": str(self.bank),
                                                      "files": self.files()})
        return {"workspace": str(self.root), "prompt_file": str(prompt), "path": str(self.shim_dir),
                "transcript": str(self.transcript_path), "bank": str(self.bank)}


def fresh(root: Path) -> Path:
    """A workspace folder that does not exist yet or is empty (an eval starts from its setup only)."""
    root = Path(root).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InputError(f"{root} exists and is not empty", where="--workspace", fix="name a new folder (every eval starts fresh)")
    root.mkdir(parents=True, exist_ok=True)
    return root
