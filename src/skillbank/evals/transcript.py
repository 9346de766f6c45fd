"""What the agent ran: the recording shim's transcript (one JSON line per `skillbank` invocation) and, when
given, the agent's own transcript file, read into one list of invocations; the agent's final message.

An agent's transcript file may be JSONL with entries {"argv": [...]} (skillbank's arguments), {"command":
"a shell line", "exit": N} or {"message": "text"} / {"role": "assistant", "content": "text"}; or plain text
whose lines starting with `$ ` are shell commands. A shell line counts every `skillbank ...` (or
`python -m skillbank[.cli] ...`) command in it, through pipes, `&&` and `;`.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRANSCRIPT = ".skillbank-transcript.jsonl"
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n"}


@dataclass(frozen=True)
class Invocation:
    argv: tuple[str, ...]  # skillbank's arguments, `--flag=value` split into two
    exit: int | None
    source: str


def normalise(argv: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for token in argv:
        if token.startswith("--") and "=" in token:
            out += token.split("=", 1)
        else:
            out.append(token)
    return tuple(out)


def record(path: str | os.PathLike[str], entry: dict[str, Any]) -> None:
    """Append one entry (one line: appends of a line are whole even with several writers)."""
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def from_shell(line: str) -> list[list[str]]:
    """The skillbank commands of a shell line, each as its argument list."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()\n")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = line.split()
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS or set(token) <= set(";&|()"):
            commands.append([])
        else:
            commands[-1].append(token)
    found = []
    for words in commands:
        for i, word in enumerate(words):
            if os.path.basename(word) == "skillbank":
                found.append(words[i + 1:])
                break
            if word == "-m" and i + 1 < len(words) and words[i + 1] in ("skillbank", "skillbank.cli"):
                found.append(words[i + 2:])
                break
    return found


def _entries(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if isinstance(item, dict):
            entries.append(item)
        elif line.startswith("$ "):
            entries.append({"command": line[2:]})
        else:
            entries.append({"text": line})
    return entries


def _message(entry: dict[str, Any]) -> str | None:
    if isinstance(entry.get("message"), str):
        return entry["message"]
    if entry.get("role") == "assistant":
        content = entry.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("type") == "text") or None
    return None


@dataclass
class Transcript:
    invocations: list[Invocation]
    final_message: str | None
    files: list[str]


def read(paths: list[Path]) -> Transcript:
    """Every invocation of the files that exist, in file order; the last agent message of any."""
    invocations: list[Invocation] = []
    final: str | None = None
    read_files = []
    for path in paths:
        if not path.is_file():
            continue
        read_files.append(str(path))
        for entry in _entries(path):
            exit_code = entry.get("exit", entry.get("exit_code"))
            exit_code = exit_code if isinstance(exit_code, int) else None
            if isinstance(entry.get("argv"), list):
                invocations.append(Invocation(normalise([str(a) for a in entry["argv"]]), exit_code, path.name))
            elif isinstance(entry.get("command"), str):
                invocations += [Invocation(normalise(argv), exit_code, path.name) for argv in from_shell(entry["command"])]
            message = _message(entry)
            if message:
                final = message
    return Transcript(invocations, final, read_files)
