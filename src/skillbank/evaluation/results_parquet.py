"""results.parquet: an evaluation's per-sample results as parquet, beside its results.json.

results.json stays what every reader knows (agents, `skillbank score`, other engines' tools);
results.parquet holds the same rows in the same order as columns, which `skillbank gaps` reads in a
fraction of the time JSON takes to parse, plus each record's `video` as its annotations write it, so
gap analysis against the same annotations file needs not read that file at all.

Columns: video_id, question, gt, response, answer, family, dataset, turn (the answer's index in a
multi-turn record, as text: "0" the first), video (text; null where absent; a record with several clips
has its list as JSON text) and correct (boolean). Its key-value metadata
`skillbank.results` (JSON) is the stamp a reader checks: format, rows, the size and mtime results.json
had when the parquet was written, the annotations file the records came from (absolute path, size,
mtime; null when unknown), task_type and answer_type.

The rule a reader trusts it by (`check`): a local parquet beside a local results.json, with a stamp of
this format written for a file of that name; results.json still has the size and mtime the stamp recorded (else results.json was
written again after the parquet: stale); the parquet is not older than results.json; its row count is
the stamp's (results.json's, when it was written). Anything else: read results.json, and say why.
Written with DuckDB (skillbank.scoring.columns: no pandas).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARQUET = "results.parquet"
STAMP_KEY = "skillbank.results"
FORMAT = 2  # 2: the turn column
TEXT = ("video_id", "question", "gt", "response", "answer", "family", "dataset", "turn")
COLUMNS = (*TEXT[:5], "correct", *TEXT[5:], "video")
COMPRESSION = "zstd, COMPRESSION_LEVEL 1"


def _text(value: Any) -> str | None:
    """A value as results.json readers see it: text as it is, anything else as compact JSON text."""
    return value if value is None or isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def file_stamp(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """{path (absolute), size, mtime_ns} of a local file; None when it is not one."""
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return {"path": os.path.realpath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def write(path: str | os.PathLike[str], rows: Sequence[dict[str, Any]], videos: Sequence[Any], *, results_json: str | os.PathLike[str],
          annotations: str | None, task_type: str, answer_type: str) -> Path:
    """Write results.parquet (atomically) from results.json's rows and each row's record `video`;
    results.json must be written first: the stamp records its size and mtime."""
    import duckdb

    from skillbank import atomic
    from skillbank.evaluation.results import sql_literal
    from skillbank.scoring import columns

    if len(videos) != len(rows):
        raise ValueError(f"{len(rows)} rows but {len(videos)} videos")
    values: dict[str, list[Any]] = {name: [_text(r.get(name)) for r in rows] for name in TEXT}
    values["correct"] = [bool(r.get("correct")) for r in rows]
    values["video"] = [_text(v) for v in videos]
    stamp = {"format": FORMAT, "rows": len(rows), "results_json": file_stamp(results_json),
             "annotations": file_stamp(annotations) if annotations else None, "task_type": task_type, "answer_type": answer_type}
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        query = columns.register(con, "sb_results", {c: values[c] for c in COLUMNS},
                                 {c: "BOOLEAN" if c == "correct" else "VARCHAR" for c in COLUMNS})
        with atomic.atomic_path(path) as tmp:
            con.execute(f"COPY ({query}) TO {sql_literal(str(tmp))} "
                        f"(FORMAT parquet, COMPRESSION {COMPRESSION}, KV_METADATA {{'{STAMP_KEY}': {sql_literal(json.dumps(stamp))}}})")
    finally:
        con.close()
    return Path(path)


@dataclass(frozen=True)
class Trust:
    """The verdict on the results.parquet beside a results.json: `path` when it may be read instead,
    else `reason` (empty when there is none); `stamp` is its metadata."""

    path: str | None
    reason: str = ""
    stamp: dict[str, Any] | None = None


def check(con: Any, results_json: str) -> Trust:
    """Whether the results.parquet beside `results_json` holds exactly its rows (the module's rule)."""
    import duckdb

    from skillbank.evaluation.results import is_url, sql_literal

    if is_url(results_json):
        return Trust(None)
    path = str(Path(results_json).with_name(PARQUET))
    parquet, results = file_stamp(path), file_stamp(results_json)
    if parquet is None or results is None:
        return Trust(None)
    try:
        [(text, rows)] = con.execute(
            f"SELECT (SELECT decode(value) FROM parquet_kv_metadata({sql_literal(path)}) WHERE decode(key) = '{STAMP_KEY}'), "
            f"(SELECT sum(num_rows) FROM parquet_file_metadata({sql_literal(path)}))").fetchall()
        stamp = json.loads(text) if text else None
    except (duckdb.Error, ValueError) as exc:
        return Trust(None, f"{path} is unreadable ({str(exc).splitlines()[0]}): read results.json")
    if not isinstance(stamp, dict) or stamp.get("format") != FORMAT:
        return Trust(None, f"{path} carries no {STAMP_KEY} stamp of format {FORMAT} (not written by skillbank evaluate): read results.json")
    written = stamp.get("results_json") or {}
    if Path(str(written.get("path") or "")).name != Path(results_json).name:
        return Trust(None, f"{path} was written beside {Path(str(written.get('path'))).name}, not {Path(results_json).name}: read it", stamp)
    if parquet["mtime_ns"] < results["mtime_ns"]:
        return Trust(None, f"{path} is older than results.json: read results.json", stamp)
    if (written.get("size"), written.get("mtime_ns")) != (results["size"], results["mtime_ns"]):
        return Trust(None, f"results.json changed after {path} was written (size or mtime differ from its stamp): read results.json", stamp)
    if rows != stamp.get("rows"):
        return Trust(None, f"{path} holds {rows} rows where results.json had {stamp.get('rows')}: read results.json", stamp)
    return Trust(path, "", stamp)


def same_annotations(stamp: dict[str, Any] | None, annotations: str) -> bool:
    """Whether `annotations` is, unchanged, the file the stamped records came from (its videos then stand for it)."""
    recorded, now = (stamp or {}).get("annotations"), file_stamp(annotations)
    return bool(recorded and now and all(recorded.get(k) == now[k] for k in ("path", "size", "mtime_ns")))


def missing_videos(con: Any, path: str) -> bool:
    """Whether some row may lack a video, from the parquet's column statistics (no scan; true when they are absent)."""
    from skillbank.evaluation.results import sql_literal

    (unknown, nulls) = con.execute(f"SELECT count(*) FILTER (stats_null_count IS NULL), coalesce(sum(stats_null_count), 0) "
                                   f"FROM parquet_metadata({sql_literal(path)}) WHERE path_in_schema = 'video'").fetchone()
    return bool(unknown or nulls)


def source_sql(path: str) -> str:
    """A query of the parquet's rows in file order: idx, the scoring fields (answers.FIELDS) and video."""
    from skillbank.evaluation.results import sql_literal

    return ("SELECT file_row_number AS idx, video_id, question, gt, response, family, dataset, turn, video "
            f"FROM read_parquet({sql_literal(path)}, file_row_number = true)")
