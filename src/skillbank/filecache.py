"""Facts about files, cached by (path, size, mtime): a second plan or evaluate pays nothing for clips it has seen.

What is cached is anything computed from a file's bytes alone: a clip's container header (data.probe), a
video's sha256 (hashing.sha256_many). A file is looked up by its absolute path and is a hit only while its
size and modification time (in ns) are the ones recorded, so an edited or replaced file is read again.

The store is one SQLite file under the skillbank cache (`SKILLBANK_CACHE`, default ~/.cache/skillbank):
safe for several processes at once, one transaction per batch. A cache that cannot be opened or written (a
read-only home, a full disk) is no cache: every lookup misses and nothing fails.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from skillbank.paths import cache_dir

FILENAME = "files.sqlite3"
_BATCH = 500  # paths per SELECT (SQLite's default limit on bound parameters is 999 or more)


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class FileCache:
    """One kind of fact per table (`kind`: e.g. "probe", "sha256"); values are JSON."""

    def __init__(self, kind: str, folder: str | os.PathLike[str] | None = None) -> None:
        if not kind.isidentifier():
            raise ValueError(f"cache kind must be an identifier, got {kind!r}")
        self.kind = kind
        self.path = Path(folder) if folder is not None else cache_dir()
        self._db: sqlite3.Connection | None = None
        self._opened = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._opened:
            return self._db
        self._opened = True
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path / FILENAME, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"CREATE TABLE IF NOT EXISTS {self.kind} (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, value TEXT)")
            self._db = db
        except (OSError, sqlite3.Error):
            self._db = None
        return self._db

    def get_many(self, paths: Iterable[str]) -> dict[str, Any]:
        """The cached value of each path whose file still has the recorded size and mtime (misses left out)."""
        wanted: dict[str, tuple[str, tuple[int, int]]] = {}
        for path in paths:
            stamp = _stamp(path)
            if stamp is not None:
                wanted[os.path.abspath(path)] = (path, stamp)
        db = self._connect()
        if db is None or not wanted:
            return {}
        hits: dict[str, Any] = {}
        keys = list(wanted)
        try:
            for i in range(0, len(keys), _BATCH):
                chunk = keys[i : i + _BATCH]
                marks = ",".join("?" * len(chunk))
                for key, size, mtime_ns, value in db.execute(f"SELECT path, size, mtime_ns, value FROM {self.kind} WHERE path IN ({marks})", chunk):
                    original, stamp = wanted[key]
                    if (size, mtime_ns) == stamp:
                        hits[original] = json.loads(value)
        except sqlite3.Error:
            return {}
        return hits

    def get(self, path: str) -> Any | None:
        return self.get_many([path]).get(path)

    def put_many(self, values: Mapping[str, Any]) -> None:
        """Record each path's value with the file's current size and mtime (files gone since are skipped)."""
        db = self._connect()
        if db is None:
            return
        rows = []
        for path, value in values.items():
            stamp = _stamp(path)
            if stamp is not None:
                rows.append((os.path.abspath(path), stamp[0], stamp[1], json.dumps(value)))
        if not rows:
            return
        try:
            with db:
                db.execute("BEGIN")
                db.executemany(f"INSERT OR REPLACE INTO {self.kind} VALUES (?, ?, ?, ?)", rows)
        except sqlite3.Error:
            pass

    def put(self, path: str, value: Any) -> None:
        self.put_many({path: value})

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db, self._opened = None, False

    def __enter__(self) -> FileCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
