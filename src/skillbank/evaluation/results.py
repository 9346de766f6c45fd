"""An evaluation's results.json on disk or behind an fsspec URL: finding it, reading it with DuckDB
(read_json, no Python objects per row) and scoring it with the answer rules (`skillbank score`,
`skillbank gaps`). Results from other engines (cosmos-rl's evaluator, a seed script) score the same
way as long as each row has video_id, question, gt and response (family and dataset optional); other
fields are ignored and JSON values that are not strings are read as their JSON text (3 -> "3").
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.scoring import answers

RESULTS = "results.json"
METRICS = "metrics.json"
BEST = "best_checkpoint.json"
SHOWN = 5  # names listed in an error before "..."


def is_url(path: str) -> bool:
    return "://" in path


class _Local:
    """The few filesystem calls used here, for local paths (fsspec is imported only for URLs)."""

    isfile = staticmethod(os.path.isfile)
    isdir = staticmethod(os.path.isdir)

    @staticmethod
    def open(path: str, mode: str = "rb") -> Any:
        return open(path, mode)

    @staticmethod
    def glob(pattern: str) -> list[str]:
        return glob.glob(pattern, recursive=True)


def filesystem(path: str) -> tuple[Any, str]:
    """(filesystem, path inside it): the local one, or fsspec's for a URL."""
    if not is_url(path):
        return _Local, path
    import fsspec

    return fsspec.core.url_to_fs(path)


def find_results_json(results_dir: str, *, missing_ok: bool = False) -> str:
    """The results.json an evaluation wrote under `results_dir`.

    Order: `results_dir` itself when it is a .json file; `results_dir/results.json`; the best step's
    results.json named by `results_dir/best_checkpoint.json` (`skillbank evaluate --run`); else the
    only results.json anywhere below. Several candidates and no best_checkpoint.json is an error
    rather than a silent pick. With missing_ok, a folder without any results.json gives "" (`skillbank
    score` then reads other engines' files there).
    """
    fs, root = filesystem(results_dir)
    if root.endswith(".json") and fs.isfile(root):
        return results_dir
    if not fs.isdir(root):
        raise InputError(f"results dir not found: {results_dir}", where="--results-dir", fix="pass the evaluation's results_dir")
    direct = posixpath.join(root, RESULTS)
    if fs.isfile(direct):
        return _unstrip(fs, results_dir, root, direct)
    best = posixpath.join(root, BEST)
    if fs.isfile(best):
        with fs.open(best, "r") as f:
            chosen = json.load(f)
        beside = posixpath.join(root, f"step_{chosen.get('step')}", RESULTS)  # still right after a copy
        if fs.isfile(beside):
            return _unstrip(fs, results_dir, root, beside)
        if chosen.get("results_json"):
            return str(chosen["results_json"])
    found = sorted(fs.glob(posixpath.join(root, "**", RESULTS)))
    if not found and missing_ok:
        return ""
    if not found:
        raise InputError(
            f"no results.json under {results_dir}",
            where="--results-dir",
            fix="run `skillbank evaluate --config FILE.toml` first; it writes results_dir/results.json",
        )
    if len(found) > 1:
        shown = ", ".join(found[:SHOWN])
        raise InputError(
            f"{len(found)} results.json files under {results_dir} ({shown}{', ...' if len(found) > SHOWN else ''})",
            where="--results-dir",
            fix="pass the folder of the one to analyse",
        )
    return _unstrip(fs, results_dir, root, found[0])


def _unstrip(fs: Any, original: str, root: str, path: str) -> str:
    """`path` (as the filesystem names it) spelled like the user's `original` spelling of `root`."""
    if not is_url(original):
        return path
    base = root.rstrip("/")
    return original.rstrip("/") + path[len(base) :] if path.startswith(base) else fs.unstrip_protocol(path)


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connection(*paths: str | None) -> Any:
    """A new DuckDB connection that can read and write `paths` (fsspec filesystems registered for URLs;
    DuckDB's own httpfs extension is not needed)."""
    import duckdb

    con = duckdb.connect()
    con.execute(answers.DUCKDB_SETTINGS)
    registered: set[str] = set()
    for path in paths:
        if path and is_url(path):
            fs, _ = filesystem(path)
            protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
            if protocol not in registered:
                con.register_filesystem(fs)
                registered.add(protocol)
    return con


def require_file(path: str) -> None:
    fs, inner = filesystem(path)
    if not fs.isfile(inner):
        raise InputError(f"file not found: {path}", where=path, fix="check the path (and, for a URL, your credentials)")


def read_json_sql(path: str, columns: tuple[str, ...]) -> str:
    """read_json of a top-level array of objects, every column read as text (NULL where absent)."""
    spec = ", ".join(f"{c}: 'VARCHAR'" for c in columns)
    return f"read_json({sql_literal(path)}, format='array', columns={{{spec}}})"


def results_source(path: str) -> str:
    """A query of results.json's rows (answers.FIELDS), in file order."""
    return f"SELECT * FROM {read_json_sql(path, answers.FIELDS)}"


@contextmanager
def json_errors(path: str, what: str) -> Iterator[None]:
    """DuckDB's complaint about a JSON input file, as an InputError naming the file."""
    import duckdb

    try:
        yield
    except (duckdb.InvalidInputException, duckdb.ConversionException, duckdb.IOException) as exc:
        message = str(exc).split("\n")[0].replace("Invalid Input Error: ", "")
        raise InputError(f"cannot read the {what}: {message}", where=path,
                         fix="it must be a JSON array of objects (results.json: video_id, question, gt, response per row)") from None


def scoring_defaults(results_json: str, task_type: str | None, answer_type: str | None) -> tuple[str, str]:
    """task_type and answer_type: as given, else as the metrics.json beside results.json records, else "" and short."""
    previous = read_metrics(beside(results_json, METRICS)) if task_type is None or answer_type is None else {}
    task = task_type if task_type is not None else str(previous.get("task_type") or "")
    answer = answer_type or str(previous.get("answer_type") or "short")
    if answer not in answers.ANSWER_TYPES:
        raise InputError(f"unknown answer format {answer!r}", where="--answer-format", fix=f"one of {answers.ANSWER_TYPES}")
    return task, answer


def read_metrics(path: str) -> dict[str, Any]:
    """The metrics.json at `path` ({} when there is none or it is unreadable)."""
    fs, inner = filesystem(path)
    try:
        if fs.isfile(inner):
            with fs.open(inner, "r") as f:
                doc = json.load(f)
                return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        pass
    return {}


def score_file(results_json: str, task_type: str, answer_type: str) -> dict[str, Any]:
    """The metrics report of a results.json (no Python object per row: one DuckDB query)."""
    require_file(results_json)
    return score_query(connection(results_json), results_source(results_json), results_json, task_type, answer_type)


def score_query(con: Any, source: str, where: str, task_type: str, answer_type: str) -> dict[str, Any]:
    """The metrics report of `source` (a query of answers.FIELDS over the file(s) at `where`)."""
    from skillbank.evaluation.metrics import check_task_type, raise_bad_truths, report_of, tallies

    check_task_type(task_type)
    with json_errors(where, "results"):
        counts = con.execute(answers.source_counts_sql(source, task_type, answer_type)).fetchall()
    if task_type != "" and any(c[3] is None for c in counts):  # some ground truth names no label: say which
        numbered = f"SELECT row_number() OVER () - 1 AS idx, * FROM ({answers.rowwise_sql(source, task_type, answer_type)})"
        bad = con.execute(f"SELECT idx, gt FROM ({numbered}) WHERE truth IS NULL ORDER BY idx LIMIT 1").fetchall()
        raise_bad_truths(bad, task_type, where=where)
    return report_of(tallies(counts, task_type), answer_type)


def write_json(path: str, document: dict[str, Any]) -> None:
    """Atomic for a local path; an object store publishes a URL's object whole."""
    from skillbank import atomic

    if is_url(path):
        import fsspec

        with fsspec.open(path, "w") as f:
            f.write(json.dumps(document, indent=2) + "\n")
        return
    atomic.write_json(Path(path), document)


def beside(results_json: str, name: str) -> str:
    """The file `name` in results.json's folder."""
    return posixpath.join(posixpath.dirname(results_json), name) if is_url(results_json) else str(Path(results_json).with_name(name))


def write_per_sample(con: Any, source: str, task_type: str, answer_type: str, path: str) -> int:
    """One JSON line per result row, in file order: id (video_id), question, family, dataset, reference
    (the ground truth), response (the raw text), answer and correct, the last three named and valued as in
    evaluate's results.json (answer: what was scored, null when unparseable; beside the response so that
    neither is taken for the other); the same columns as parquet (zstd) when `path` ends in .parquet.
    Atomic for a local path. Returns the rows written."""
    from skillbank import atomic

    scored = answers.score_source(con, source, task_type, answer_type, table="sb_per_sample")
    query = (f"SELECT video_id AS id, question, family, dataset, gt AS reference, response, answer, correct "
             f"FROM ({scored.final}) ORDER BY idx")
    (count,) = con.execute("SELECT count(*) FROM sb_per_sample").fetchone()
    options = "(FORMAT parquet, COMPRESSION zstd)" if path.endswith(".parquet") else "(FORMAT json)"
    if is_url(path):
        con.execute(f"COPY ({query}) TO {sql_literal(path)} {options}")
    else:
        with atomic.atomic_path(path) as tmp:
            con.execute(f"COPY ({query}) TO {sql_literal(str(tmp))} {options}")
    con.execute("DROP TABLE sb_per_sample")
    return int(count)


def reply_facts_sql(source: str) -> str:
    """Counts over the responses of `source`: rows, those holding neither </think> nor <answer>, those
    holding <think>, those empty or only whitespace."""
    return ("SELECT count(*), count(*) FILTER (WHERE NOT contains(coalesce(response, ''), '</think>') "
            "AND NOT contains(coalesce(response, ''), '<answer>')), count(*) FILTER (WHERE contains(coalesce(response, ''), '<think>')), "
            f"count(*) FILTER (WHERE regexp_full_match(coalesce(response, ''), '\\s*')) FROM ({source})")
