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
