"""Reader: a CSV or JSONL file, one row per question, with a video column.

CSV is read by DuckDB with every column as text (an answer "1" stays "1"). JSONL is read a line at a
time: a malformed line is named by its number and, with --skip-bad, skipped alone. Relative video
paths resolve against the file's folder (or --media-root). A `split` column, when present, is the
row's own split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.intake.items import Bad, Read
from skillbank.intake.rows import RowReader, Spill

SPLIT_KEY = "split"


def _csv_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    import duckdb

    try:
        rel = duckdb.connect().sql("SELECT * FROM read_csv(?, header = true, all_varchar = true)", params=[str(path)])
        columns = list(rel.columns)
        return columns, [dict(zip(columns, values)) for values in rel.fetchall()]
    except duckdb.Error as exc:
        raise InputError(f"cannot read this CSV file: {exc}", where=str(path), fix="write a CSV with a header row") from None


def _jsonl_rows(path: Path, out: Read) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    from skillbank.intake.conversations import TURN_LISTS, sniff

    layout, first = sniff(path)
    if layout == "array":
        raise InputError("this file is one JSON array, not JSON lines (one object per line)", where=str(path),
                         fix="leave --format out (a JSON array of conversation records is detected), or write one JSON object per line")
    turns = [k for k in TURN_LISTS if isinstance(first, dict) and isinstance(first.get(k), list)]
    if turns:
        raise InputError(f"the rows hold conversations ({turns[0]}), not question / answer columns", where=str(path),
                         fix="leave --format out, or pass --format messages")
    rows, columns = [], {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                out.bad.append(Bad(f"{path.name}:{number}", "", f"malformed JSON line: {exc}"))
                continue
            if not isinstance(row, dict):
                out.bad.append(Bad(f"{path.name}:{number}", "", "the line is not a JSON object"))
                continue
            columns.update(dict.fromkeys(row))
            rows.append((number, row))
    return list(columns), rows


def read_table(source: Path, *, kind: str, spill: Spill, media_root: Path | None = None, question_key: str | None = None,
               answer_key: str | None = None, video_key: str | None = None, on_clip: Callable[[str], None] | None = None, **_: Any) -> Read:
    out = Read(kind, root=Path(os.path.abspath(media_root or source.parent)), on_clip=on_clip)
    if kind == "csv":
        columns, plain = _csv_rows(source)
        numbered = [(i + 2, row) for i, row in enumerate(plain)]  # line 1 is the header
    else:
        columns, numbered = _jsonl_rows(source, out)
    reader = RowReader(out, [c for c in columns if c != SPLIT_KEY], where=str(source), media_root=media_root or source.parent,
                       spill=spill, question_key=question_key, answer_key=answer_key, video_key=video_key)
    for index, (line, row) in enumerate(numbered):
        split = row.pop(SPLIT_KEY, None)
        reader.add(row, f"{source.name}:{line}", f"row_{index:06d}", str(split) if split not in (None, "") else None)
    reader.finish()
    return out


def read_csv(source: Path, **kwargs: Any) -> Read:
    return read_table(source, kind="csv", **kwargs)


def read_jsonl(source: Path, **kwargs: Any) -> Read:
    return read_table(source, kind="jsonl", **kwargs)
