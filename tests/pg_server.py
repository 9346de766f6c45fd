"""A throwaway PostgreSQL server for tests: initdb into a temporary folder, a unix socket there, no TCP.

Debian's `postgresql` package (scripts/setup.sh installs it when missing) puts initdb and postgres
under /usr/lib/postgresql/<version>/bin. initdb refuses to run as root, so as root the server runs
as the `postgres` user, in a folder that user owns. The server is this process's child with a
parent-death signal (SIGQUIT: PostgreSQL's immediate shutdown, which ends its backends too): it is
stopped when the fixture (one per test module) ends, on failure too, and dies with the test session
however that ends.
Without PostgreSQL the tests say why they cannot run; in CI (CI=true) that is a failure, not a skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PORT = 5432  # only names the socket file in the server's private folder: no TCP port is opened


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return versions[-1] if versions else None


def unavailable(why: str) -> None:
    """CI must run these tests: fail there; elsewhere skip, saying what is missing."""
    message = f"a throwaway PostgreSQL server cannot start here: {why} (scripts/setup.sh installs Debian's postgresql as root)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


_LIBC = None


def _die_with_parent() -> None:
    _LIBC.prctl(1, signal.SIGQUIT, 0, 0, 0)  # PR_SET_PDEATHSIG (set after the switch to the postgres user)


class PgServer:
    def __init__(self) -> None:
        initdb, postgres = pg_bin("initdb"), pg_bin("postgres")
        if not initdb or not postgres:
            unavailable("initdb / postgres not found on PATH or under /usr/lib/postgresql/*/bin")
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                unavailable("running as root and there is no postgres user (initdb refuses root)")
            self.user = "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="skillbank-pg-"))
        if self.user:
            shutil.chown(self.dir, self.user)
        self.data = self.dir / "data"
        log = self.dir / "initdb.log"
        done = subprocess.run([initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
                              user=self.user, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=self.dir)
        if done.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
            pytest.fail(f"initdb failed: {done.stdout[-2000:]}")
        global _LIBC
        import ctypes

        _LIBC = _LIBC or ctypes.CDLL(None, use_errno=True)  # loaded here: a forked child should not load libraries
        with open(self.dir / "server.log", "w") as out:
            if self.user:
                shutil.chown(self.dir / "server.log", self.user)
            self.proc = subprocess.Popen(
                [postgres, "-D", str(self.data), "-p", str(PORT), "-k", str(self.dir), "-c", "listen_addresses=",
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=100"],
                user=self.user, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir, preexec_fn=_die_with_parent)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.dsn("postgres")).close()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"PostgreSQL did not start: {(self.dir / 'server.log').read_text()[-2000:] if self.dir.exists() else ''}")
                time.sleep(0.1)

    def dsn(self, db: str) -> str:
        return f"host={self.dir} port={PORT} user=postgres dbname={db}"

    def url(self, db: str) -> str:
        """A SQLAlchemy URL (psycopg 3) for a database of this server."""
        return f"postgresql://postgres@/{db}?host={self.dir}&port={PORT}"

    def create_db(self, db: str) -> str:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        return self.url(db)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: ends the sessions, stops
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGQUIT)
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")  # gone before the next module: tests there count this process's descendants
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    try:
        yield server
    finally:
        server.stop()
