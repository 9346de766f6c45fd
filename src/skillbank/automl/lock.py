"""One lock per study, held by the storage itself, so that workers on any machine take turns.

What must happen once per study, or within its budget, is done under it: creating the study and
enqueuing its baseline, re-enqueuing failed trials on --resume (two workers resuming together never
both retry the same trial), failing a dead worker's trial, and claiming a trial (a worker claims one
only while finished + running trials stay under --max-trials: two workers with --max-trials 5 finish 5).

The lock is the storage's own: a PostgreSQL session advisory lock (released by the server when the
worker's connection dies, so a killed worker never leaves it held), MySQL / MariaDB GET_LOCK (the
same), or an flock on `<database file>.lock` beside a SQLite file (released by the kernel when the
process dies). Another database has no lock here: the budget then holds per machine only, and
`kind` says so (the worker prints it). Threads of one worker also take a process-wide lock first.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

_THREADS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def lock_key(study_name: str) -> int:
    """A signed 64-bit key naming the study (PostgreSQL advisory locks take a bigint)."""
    digest = hashlib.sha256(f"skillbank.automl:{study_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def sqlite_file(url: str) -> Path | None:
    """The database file of a sqlite URL (None for an in-memory database)."""
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    return Path(database) if database and database != ":memory:" else None


class StudyLock:
    """`with lock:` holds the study's lock (module docstring); re-entrant for nothing: keep the body short."""

    def __init__(self, url: str, study_name: str, engine: Any = None):
        from sqlalchemy.engine import make_url

        self.url, self.study_name, self.engine = url, study_name, engine
        self.backend = make_url(url).get_backend_name()
        with _GUARD:
            self._thread_lock = _THREADS.setdefault(f"{url}\0{study_name}", threading.Lock())

    @property
    def kind(self) -> str:
        """How the lock is held: what `--status` and the worker's start line say."""
        if self.backend == "postgresql":
            return "PostgreSQL advisory lock"
        if self.backend in ("mysql", "mariadb"):
            return "MySQL GET_LOCK"
        if self.backend == "sqlite":
            return "file lock beside the SQLite file" if sqlite_file(self.url) else "process lock (in-memory SQLite)"
        return f"none on {self.backend}: the budget holds per machine only"

    def __enter__(self) -> "StudyLock":
        self._thread_lock.acquire()
        try:
            self._release = self._acquire()
        except BaseException:
            self._thread_lock.release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._release()
        finally:
            self._thread_lock.release()

    def _acquire(self):
        if self.backend == "postgresql":
            return self._sql("SELECT pg_advisory_lock(:key)", "SELECT pg_advisory_unlock(:key)", key=lock_key(self.study_name))
        if self.backend in ("mysql", "mariadb"):
            name = f"skillbank.automl.{lock_key(self.study_name):x}"
            return self._sql("SELECT GET_LOCK(:name, -1)", "SELECT RELEASE_LOCK(:name)", name=name)
        path = sqlite_file(self.url) if self.backend == "sqlite" else None
        if path is not None:
            return self._flock(Path(f"{path}.lock"))
        return lambda: None

    def _sql(self, take: str, give: str, **params: Any):
        """A session lock on a connection of its own, held until released (or until the connection dies)."""
        from sqlalchemy import text

        conn = self.engine.connect()
        try:
            conn.execute(text(take), params)
            conn.commit()
        except BaseException:
            conn.close()
            raise

        def release() -> None:
            try:
                conn.execute(text(give), params)
                conn.commit()
            finally:
                conn.close()

        return release

    @staticmethod
    def _flock(path: Path):
        import fcntl
        import os

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise

        def release() -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

        return release

