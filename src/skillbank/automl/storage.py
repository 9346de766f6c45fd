"""A study's storage URL, checked before anything starts: SQLAlchemy parses it and its driver imports.

A study's storage is any SQLAlchemy URL (sqlite:///..., postgresql://..., mysql://...). Without this
check a URL whose driver is not installed died in the middle of Optuna with a raw traceback; here it
is a one-line InputError naming the pip package, before the preflight gate and before any trial.
"""

from __future__ import annotations

from skillbank.errors import InputError
from skillbank.redaction import redact

# the Python module a SQLAlchemy dialect imports -> the pip package that provides it
PACKAGES = {
    "psycopg": "psycopg[binary]",
    "psycopg2": "psycopg2-binary",
    "asyncpg": "asyncpg",
    "pg8000": "pg8000",
    "MySQLdb": "mysqlclient",
    "pymysql": "PyMySQL",
    "mysql": "mysql-connector-python",
    "mariadb": "mariadb",
    "oracledb": "oracledb",
    "cx_Oracle": "cx-Oracle",
    "pyodbc": "pyodbc",
    "pymssql": "pymssql",
}


def check_url(url: str, where: str = "--storage") -> None:
    """InputError (exit 2) when `url` is no SQLAlchemy URL, names an unknown dialect, or its driver is
    missing (naming the package to install)."""
    import sqlalchemy.exc
    from sqlalchemy.engine import make_url

    shown = redact(url)
    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except sqlalchemy.exc.NoSuchModuleError:
        raise InputError(f"no SQLAlchemy dialect for {parsed.drivername!r} in {shown}", where=where,
                         fix="use sqlite:///, postgresql://, mysql:// or another SQLAlchemy dialect") from None
    except sqlalchemy.exc.ArgumentError as exc:
        raise InputError(f"not a SQLAlchemy URL: {shown} ({exc})", where=where,
                         fix="e.g. sqlite:////abs/path/study.db or postgresql://user@host:5432/db") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        module = (exc.name or "").split(".")[0]
        package = PACKAGES.get(module, module or "its driver")
        raise InputError(f"the {parsed.get_backend_name()} driver of {shown} is not installed (Python module {module!r})",
                         where=where, fix=f"pip install '{package}' into this Python environment") from None


def unix_socket(url: str) -> str | None:
    """The socket folder of a database URL that reaches its server through a unix socket (only
    processes on the server's machine can), else None."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return None
    host = parsed.query.get("host") or parsed.host
    host = host[0] if isinstance(host, tuple) else host
    if host is None or str(host).startswith("/"):
        return str(host or "the driver's default socket")
    return None


def socket_note(url: str) -> str | None:
    """The warning a unix-socket URL deserves when workers may run on other machines."""
    folder = unix_socket(url)
    if folder is None:
        return None
    return (f"{redact(url)} reaches its server through a unix socket ({folder}): only workers on that machine can "
            "share this study; for workers on other machines use postgresql://USER@HOST:PORT/DB")


def probe(url: str, study_name: str, *, timeout_s: float = 5.0) -> dict:
    """Does the storage answer from this machine (connect + server version), and does it hold the study
    (trials by state)? Read-only: a SQLite file is opened read-only and one that does not exist is not
    created (it is created when the study starts). Never raises: a failure is reported in "error"."""
    from pathlib import Path

    import sqlalchemy
    from sqlalchemy.engine import make_url

    from skillbank.automl.lock import sqlite_file

    parsed = make_url(url)
    backend = parsed.get_backend_name()
    out = {"checked": True, "answers": None, "server": backend, "version": None, "study_exists": None, "trials": {},
           "error": None, "unix_socket": unix_socket(url)}
    kwargs: dict = {}
    if backend == "sqlite":
        path = sqlite_file(url)
        if path is None or not Path(path).is_file():
            return {**out, "checked": False, "error": None, "study_exists": False}
        target = sqlalchemy.engine.URL.create("sqlite", database=f"file:{Path(path).resolve()}?mode=ro&uri=true")
    else:
        target = parsed
        if backend == "postgresql":
            kwargs = {"connect_args": {"connect_timeout": max(1, int(timeout_s))}}
        elif backend in ("mysql", "mariadb"):
            kwargs = {"connect_args": {"connect_timeout": max(1, int(timeout_s))}}
    engine = sqlalchemy.create_engine(target, poolclass=sqlalchemy.pool.NullPool, **kwargs)
    try:
        with engine.connect() as conn:
            version = engine.dialect.server_version_info
            out.update(answers=True, version=".".join(map(str, version)) if version else None)
            if not sqlalchemy.inspect(conn).has_table("studies"):
                return {**out, "study_exists": False}
            row = conn.execute(sqlalchemy.text("SELECT study_id FROM studies WHERE study_name = :n"), {"n": study_name}).first()
            if row is None:
                return {**out, "study_exists": False}
            rows = conn.execute(sqlalchemy.text("SELECT state, COUNT(*) FROM trials WHERE study_id = :i GROUP BY state"), {"i": row[0]})
            out.update(study_exists=True, trials={str(state).rsplit(".", 1)[-1]: n for state, n in rows})
    except Exception as exc:  # noqa: BLE001 - what the dry run reports, in one line
        out.update(answers=False, error=redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__))
    finally:
        engine.dispose()
    return out


def password_free(url: str, where: str = "--storage") -> None:
    """InputError when the URL carries a password: it would be written into a job's script and record."""
    from sqlalchemy.engine import make_url

    if make_url(url).password:
        raise InputError(f"{redact(url)} carries a password, which the job's script and record would hold", where=where,
                         fix="drop it from the URL and give it to the driver where the worker runs (~/.pgpass, or PGPASSWORD "
                             "exported by name), e.g. postgresql://USER@HOST:5432/DB")
