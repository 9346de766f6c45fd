"""DEFT gap analysis: an evaluation's results.json -> a parquet of the failures, each with its media
path, so the next round can curate data for exactly what the model gets wrong.

A failure is a row the evaluation's metrics count as wrong: the same answer rules
(skillbank.scoring.answers: extraction for reasoning answers, normalisation, yes/no, directions,
multiple choice, exact match), so a gap count always matches metrics.json. Unparseable answers are
failures with `answer` null, never dropped. error_type: in a yes/no group (every ground truth of the
family is yes / no) "FN" when the truth is yes, "FP" when it is no (an unparseable answer included, as
in the metrics' fn / fp); in any other task "mismatch".

One DuckDB session, COPY TO parquet (zstd) at the end, written to a temporary file and renamed. The
rows come from the results.parquet evaluate writes beside results.json when its stamp says it holds
exactly results.json's rows (skillbank.evaluation.results_parquet: else results.json is read, and the
summary's `results_parquet_ignored` says why): the rules run once per distinct answer and are joined
back to its rows; its `video` column stands for the annotations when they are the file the records
came from, unchanged (`media_from`). Else read_json of results.json over its parts into a table, the
same rules per distinct answer, and read_json of the annotations for the failing ids only. Paths may be local or fsspec
URLs (s3://...; the filesystem is registered with DuckDB; results.parquet is read only locally). No torch here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from skillbank import atomic
from skillbank.data import jsonparts
from skillbank.data.media import media_root as resolve_media_root
from skillbank.errors import InputError
from skillbank.scoring import answers
from skillbank.evaluation import results_parquet
from skillbank.evaluation.metrics import NONE_KEY, Tally, accuracy_interval, check_task_type, metrics_of, raise_bad_truths, tallies
from skillbank.evaluation.results import (
    SHOWN,
    connection,
    find_results_json,
    is_url,
    json_errors,
    read_json_sql,
    require_file,
    scoring_defaults,
    sql_literal,
    write_json,
)

COLUMNS = ("video_id", "media_path", "question", "ground_truth", "response", "answer", "family", "error_type", "turn")  # turn: the
# answer's index in a multi-turn record (evaluate's results.json; "0" the first, null from results without it)
T = TypeVar("T")
COMPRESSION = "zstd, COMPRESSION_LEVEL 1"  # half the size of snappy; level 1 writes in 60% of the default's time, no larger
WHOLE_PART = 64 << 20  # parts of a large file (nothing is read back here: as few as keep every thread busy)
ERROR_TYPE = "CASE WHEN kind = 'yes_no' THEN CASE WHEN truth = 'yes' THEN 'FN' ELSE 'FP' END ELSE 'mismatch' END"


def summary_path(out: str) -> str:
    """Where the summary JSON goes: next to the parquet, `NAME.summary.json`."""
    stem = out[: -len(".parquet")] if out.endswith(".parquet") else out
    return stem + ".summary.json"


def _breakdown(rows: list[Tally], typed: list[tuple[str | None, str | None, str, int]]) -> dict[str, int]:
    """total, failures, failures per error type (those the rows' kinds can have), unparseable, and ci95
    (the 95% Wilson interval of the accuracy these counts give, as metrics.json states it)."""
    kinds = {t.kind for t in rows}
    types = (["FP", "FN"] if "yes_no" in kinds else []) + (["mismatch"] if kinds - {"yes_no"} or not kinds else [])
    by_type = Counter()
    for _, _, error_type, n in typed:
        by_type[error_type] += n
    total, failures = sum(t.n for t in rows), sum(t.n for t in rows if not t.correct)
    return {"total": total, "failures": failures, **{k: by_type[k] for k in types},
            "unparseable": sum(t.n for t in rows if t.pred is None), "ci95": {"accuracy": accuracy_interval(total - failures, total)}}


def _summary(rows: list[Tally], typed: list[tuple[str | None, str | None, str, int]]) -> dict[str, Any]:
    """The summary's counts: from the metrics' tallies, and the failures' error types (family, dataset, type, n)."""
    whole = _breakdown(rows, typed)
    summary: dict[str, Any] = {
        "total": whole["total"],
        "failures": whole["failures"],
        "failure_rate": round(whole["failures"] / whole["total"], 6) if whole["total"] else 0.0,
        "task": metrics_of(rows)["evaluator"],
        "counts": {k: v for k, v in whole.items() if k in ("FP", "FN", "mismatch")},
        "unparseable": whole["unparseable"],
        "ci95": whole["ci95"],
    }
    for index, (field, key) in enumerate((("family", "families"), ("dataset", "datasets"))):
        if any(getattr(t, field) is not None for t in rows):
            names = sorted({NONE_KEY if getattr(t, field) is None else getattr(t, field) for t in rows})
            summary[key] = {
                name: _breakdown([t for t in rows if (getattr(t, field) or NONE_KEY) == name],
                                 [x for x in typed if (x[index] or NONE_KEY) == name])
                for name in names
            }
    return summary


def _media_sql(video: str, media_root: str) -> str:
    """media_root/video for relative paths; absolute paths and URLs stay as they are."""
    if not media_root:
        return video
    root = sql_literal(media_root.rstrip("/") + "/")
    return f"CASE WHEN starts_with({video}, '/') OR contains({video}, '://') THEN {video} ELSE {root} || {video} END"


def _check_ids(con: Any, missing: str, annotations: str) -> None:
    """InputError naming the failing ids the annotations lack (or give no video): `missing` is a query of their video_id."""
    rows = con.execute(f"SELECT DISTINCT video_id FROM ({missing}) ORDER BY video_id LIMIT {SHOWN + 1}").fetchall()
    if not rows:
        return
    (count,) = con.execute(f"SELECT count(DISTINCT coalesce(video_id, '')) FROM ({missing})").fetchone()
    shown = ", ".join(repr(row[0]) for row in rows[:SHOWN])
    raise InputError(
        f"{count} failing video_id(s) of results.json are not in the annotations (or have no video): "
        f"{shown}{', ...' if count > SHOWN else ''}",
        where=annotations,
        fix="pass the annotations file the evaluation read (dataset.annotation_path of its config)",
    )


def analyze_gaps(
    results_dir: str,
    out: str,
    *,
    annotations: str | None = None,
    media_root: str | None = None,
    task_type: str | None = None,
    answer_type: str | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """Write the failures parquet (COLUMNS) and its summary JSON; return the summary. task_type and
    answer_type default to those the metrics.json beside results.json records, else "" and short."""
    results_json = find_results_json(results_dir)
    task_type, answer_type = scoring_defaults(results_json, task_type, answer_type)
    check_task_type(task_type)
    require_file(results_json)
    if annotations:
        require_file(annotations)
        media_root = resolve_media_root(media_root or "", annotations)
    con = connection(results_json, annotations, out)
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    trust = results_parquet.check(con, results_json)
    if trust.path:  # evaluate's parquet of the same rows: columns, read again at no cost
        source = results_parquet.source_sql(trust.path)
    else:  # one parse of the JSON (over its parts, every core), in file order: rowid is the row's index
        with json_errors(results_json, "results"):
            _on_parts(con, results_json, answers.FIELDS, lambda rows: con.execute(f"CREATE TEMP TABLE gaps_rows AS SELECT * FROM {rows}"))
        source = "SELECT rowid AS idx, * FROM gaps_rows"
    scored = answers.score_by_key(con, source, task_type, answer_type, table="gaps_keys")  # the rules once per distinct answer
    raise_bad_truths(scored.bad_truths, task_type, where=results_json)
    rows = tallies(scored.counts, task_type)
    failures = f"SELECT * FROM ({scored.final}) WHERE NOT correct"
    failing = f"SELECT family, dataset, kind, truth, n FROM ({scored.keyed}) WHERE NOT correct"  # failures by key
    parquet_media = bool(annotations and trust.path and results_parquet.same_annotations(trust.stamp, annotations))
    if not trust.path or (annotations and not parquet_media):  # read more than once below: kept, the rows freed
        con.execute("SET preserve_insertion_order = false")  # the failures carry idx (row order); the parquet is sorted by it
        con.execute(f"CREATE TEMP TABLE gaps_failures AS {failures}")
        con.execute("DROP TABLE IF EXISTS gaps_rows")
        failures = "SELECT * FROM gaps_failures"
    video, join, media_from = "NULL::VARCHAR", "", None
    if annotations:
        if parquet_media:
            video, media_from = "f.video", trust.path  # the records' own videos, as these annotations (unchanged since) write them
            if results_parquet.missing_videos(con, trust.path):
                _check_ids(con, f"SELECT video_id FROM ({failures}) WHERE video IS NULL", annotations)
        else:
            media_from = annotations
            with json_errors(annotations, "annotations"):
                _on_parts(con, annotations, ("id", "video"), lambda annotated: con.execute(
                    "CREATE OR REPLACE TEMP TABLE gaps_media AS SELECT id, min(video) AS video "
                    f"FROM {annotated} WHERE video IS NOT NULL AND id IN (SELECT video_id FROM ({failures})) GROUP BY id"))
            _check_ids(con, f"SELECT f.video_id FROM ({failures}) f ANTI JOIN gaps_media m ON m.id = f.video_id", annotations)
            video, join = "m.video", "LEFT JOIN gaps_media m ON m.id = f.video_id"
    media = _media_sql(video, media_root or "") if annotations else "NULL::VARCHAR"
    query = (f"SELECT f.video_id, {media} AS media_path, f.question, f.gt AS ground_truth, f.response, f.answer, f.family, "
             f"{ERROR_TYPE} AS error_type, f.turn FROM ({failures}) f {join} ORDER BY f.idx")
    typed = con.execute(f"SELECT family, dataset, {ERROR_TYPE} AS error_type, sum(n)::BIGINT FROM ({failing}) GROUP BY ALL").fetchall()
    summary = {
        "results_json": results_json,
        "results_read": trust.path or results_json,
        **({"results_parquet_ignored": trust.reason} if trust.reason else {}),
        "gaps_parquet": out,
        "task_type": task_type,
        "answer_type": answer_type,
        **_summary(rows, typed),
        "annotations": annotations,
        "media_root": media_root if annotations else None,
        "media_from": media_from,
    }
    _write(con, query, out)
    write_json(summary_path(out), summary)
    return summary


def _on_parts(con: Any, path: str, columns: tuple[str, ...], run: Callable[[str], T]) -> T:
    """run(read_json of `columns` as text) over the parts of a local file, so every core parses
    (skillbank.data.jsonparts); over the whole file for a URL, a file that is not a plain array, or
    when DuckDB cannot read a part (then its error names the file itself)."""
    import duckdb

    parts = None if is_url(path) else jsonparts.split_array(path, jsonparts.part_size(con, path, most=WHOLE_PART))
    if parts is None or len(parts.bounds) < 2:
        if parts is not None:
            jsonparts.release(parts)
        return run(read_json_sql(path, columns))
    jsonparts.attach(con)
    try:
        return run(parts.read_json_sql(dict.fromkeys(columns, "VARCHAR")))
    except duckdb.Error:
        return run(read_json_sql(path, columns))
    finally:
        jsonparts.release(parts)


def _write(con: Any, query: str, out: str) -> None:
    options = f"(FORMAT parquet, COMPRESSION {COMPRESSION})"
    if is_url(out):  # an object store publishes the object whole
        con.execute(f"COPY ({query}) TO {sql_literal(out)} {options}")
        return
    with atomic.atomic_path(out) as tmp:
        con.execute(f"COPY ({query}) TO {sql_literal(str(tmp))} {options}")
