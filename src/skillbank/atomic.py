"""Atomic writes: a temp file in the target folder, then a rename, so readers never see half a file.

The temp file comes from mkstemp (mode 0600) or mkdtemp (0700); before the rename it gets the mode a
plain write would have given: an existing target keeps its mode, a new file gets 0666 and a new
folder 0777, less the umask. Results, specs and parquets on a shared cluster stay readable by
teammates exactly as far as the user's umask allows.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def umask() -> int:
    """The process umask, read without setting it (os.umask sets while it reads: a race with other
    threads creating files); /proc/self/status has it on Linux >= 4.7, else the set-and-restore."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_mode(target: str | os.PathLike[str], *, folder: bool = False) -> int:
    """The mode a plain write of `target` would leave: an existing target's own, else 0666 (0777 for
    a folder) less the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return (0o777 if folder else 0o666) & ~umask()


def temp_dir(target: str | os.PathLike[str], *, suffix: str = ".tmp") -> Path:
    """A temporary folder beside `target` (built whole, then renamed onto it) with the mode of the
    folder it replaces, or that a plain mkdir would give, rather than mkdtemp's 0700."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent))
    os.chmod(tmp, plain_mode(target, folder=True))
    return tmp


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` (with the mode a plain
    write would leave), on error it is removed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, plain_mode(target))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def with_newline(text: str) -> str:
    """Text files we write (TOML, YAML, JSON, scripts) end with a newline: POSIX tools and `cat` expect one."""
    return text if text.endswith("\n") else text + "\n"


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2) -> Path:
    return write_text(path, json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False) + "\n")
