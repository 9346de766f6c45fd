"""The records of one annotations file as DuckDB tables: what the dataset-wide checks query.

`<name>` (a view), one row per record: idx (its index in the file), id_key (equal for equal ids,
NULL when the id is unusable: records.SQL_ID_KEY), video / image (the path; the first one when a
record lists several, mkey then holds them all as a JSON list), question (the first human turn as
the train / val overlap compares it), clip (what the vision budget reads, as JSON; NULL when the
record states no clip length) and chars (the characters of its turns: every record of the parts path (the flagged ones
as the checker read them back), the stream path's where clip is set). `<name>_media` (a view): every
media path of every record (idx, ord, kind, path).

Two ways to fill them, with the same rows:
- `read_parts`: DuckDB's read_json over the file's parts (skillbank.data.jsonparts), on every core.
  The rows records.CLEAN_SQL proves clean get their columns in SQL; the rest (`flagged`) are read
  back from their parts by Python's json and go through the record checker, which reports what is
  wrong with them, exactly as the stream path would.
- `Rows` fed by the stream reader (the exact path: when DuckDB cannot read the file, e.g. a syntax
  error the stream reader then locates by line and column, or a record that is not an object).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from skillbank.data.jsonparts import ArrayParts
from skillbank.preflight import records as rules
from skillbank.preflight.records import Media, RecordChecker, Wants
from skillbank.preflight.vision import text_chars

_NAMES = itertools.count()
FLUSH_ROWS = 50_000
SMALL_ROWS = 20_000  # rows inserted as list parameters (~3 us each); more go through pyarrow
_FIX_COLUMNS = "idx BIGINT, id_key VARCHAR, video VARCHAR, image VARCHAR, mkey VARCHAR, question VARCHAR, clip VARCHAR, chars BIGINT"


def new_name() -> str:
    return f"sb_records_{next(_NAMES)}"


def create(con: Any, name: str) -> None:
    """The tables of the exact rows (empty) and the views over them; `read_parts` adds the main table."""
    con.execute(f"CREATE TEMP TABLE {name}_fix ({_FIX_COLUMNS})")
    con.execute(f"CREATE TEMP TABLE {name}_fixmedia (idx BIGINT, ord INTEGER, kind VARCHAR, path VARCHAR)")
    create_views(con, name, main=False)


def create_views(con: Any, name: str, *, main: bool) -> None:
    fix = f"SELECT idx, id_key, video, image, mkey, question, clip, chars FROM {name}_fix"
    media = (f"SELECT idx, 0 AS ord, CASE WHEN video IS NOT NULL THEN 'video' ELSE 'image' END AS kind, coalesce(video, image) AS path "
             f"FROM {name}_fix WHERE mkey IS NULL AND coalesce(video, image) IS NOT NULL UNION ALL "
             f"SELECT idx, ord, kind, path FROM {name}_fixmedia")  # a record with several paths: all of them
    if main:
        fix = (f"SELECT rowid AS idx, id_key, video_path AS video, image_path AS image, NULL AS mkey, question, clip, chars "
               f"FROM {name}_main WHERE NOT flag UNION ALL {fix}")
        media = (f"SELECT rowid AS idx, 0 AS ord, CASE WHEN video_path IS NOT NULL THEN 'video' ELSE 'image' END AS kind, "
                 f"coalesce(video_path, image_path) AS path FROM {name}_main WHERE NOT flag UNION ALL {media}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {fix}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_media AS {media}")


def read_parts(con: Any, name: str, parts: ArrayParts, wants: Wants) -> list[int]:
    """Fill `<name>_main` from the parts (raises duckdb.Error when DuckDB cannot read them); returns
    the flagged rows' indices, in order (their records still need the checker: `check_flagged`)."""
    columns = {k: v for k, v in rules.READ_COLUMNS.items() if wants.meta or k not in rules.META_KEYS + ("width", "height")}
    clip = f"CASE WHEN {rules.SQL_HAS_CLIP} THEN {rules.SQL_CLIP} END" if wants.meta else "NULL::JSON"
    chars = f"CASE WHEN NOT flag THEN {rules.SQL_CHARS} END" if wants.meta else "NULL::BIGINT"  # every clean record: the probe reads it too
    question = f"CASE WHEN flag THEN NULL ELSE {rules.SQL_QUESTION} END" if wants.questions else "NULL::VARCHAR"
    computed = ", ".join(f"{sql} AS {name}" for name, sql in rules.SQL_SOURCE.items())
    source = f"SELECT {computed}, * FROM {parts.read_json_sql(columns, filename=True)}"
    flagged = f"SELECT *, NOT {rules.CLEAN_SQL} AS flag FROM ({source})"
    con.execute(
        f"CREATE TEMP TABLE {name}_main AS SELECT id_key, "
        "CASE WHEN NOT flag AND image IS NULL THEN json_extract_string(video, '$') END AS video_path, "
        "CASE WHEN NOT flag AND video IS NULL THEN json_extract_string(image, '$') END AS image_path, "
        f"{question} AS question, {clip}::VARCHAR AS clip, {chars}::BIGINT AS chars, flag, part FROM ({flagged})"
    )
    counts = dict(con.execute(f"SELECT part, count(*) FROM {name}_main GROUP BY part").fetchall())
    parts.counts = [counts.get(i, 0) for i in range(len(parts.bounds))]
    create_views(con, name, main=True)
    return [row[0] for row in con.execute(f"SELECT rowid FROM {name}_main WHERE flag ORDER BY rowid").fetchall()]


def check_flagged(con: Any, name: str, parts: ArrayParts, flagged: list[int], checker: RecordChecker, wants: Wants) -> None:
    """The checker on each flagged record (its findings reported), its columns into `<name>_fix`."""
    rows = Rows(con, name, wants)
    for index, record in parts.iter_records_at(flagged):
        rid, video, image, question = checker.record(record, index)
        rows.add(index, rid, video, image, question, record)
    rows.flush()


class Rows:
    """Exact rows (from the checker or fast_columns) appended to `<name>_fix` in blocks. An id goes in
    as text or digits; DuckDB writes its JSON text (to_json), the key read_json's rows carry."""

    COLUMNS = ("idx", "id_str", "id_int", "video", "image", "mkey", "question", "clip", "chars")

    def __init__(self, con: Any, name: str, wants: Wants) -> None:
        self.con, self.name, self.wants = con, name, wants
        self.cols: dict[str, list[Any]] = {k: [] for k in self.COLUMNS}
        self.media: dict[str, list[Any]] = {k: [] for k in ("idx", "ord", "kind", "path")}

    def add(self, index: int, rid: Any, video: Media, image: Media, question: str | None, record: Any) -> None:
        """One record the checker read back (a flagged one): its text length is kept even when it states no
        clip length, as every clean record's is (the probe may pick it: no second read-back)."""
        self.add_batch(index, [rid], [video], [image], [question], [record], every_length=True)

    def add_batch(self, start: int, ids: list[Any], videos: list[Media], images: list[Media], questions: list[str | None],
                  records: list[Any], *, every_length: bool = False) -> None:
        """Consecutive records from index `start` (their checked columns and the records themselves); the
        text length (chars) of those that state a clip length, or of every one with every_length."""
        c, n = self.cols, len(ids)
        c["idx"].extend(range(start, start + n))
        c["id_str"].extend([r if type(r) is str else None for r in ids])
        c["id_int"].extend([str(r) if type(r) is int else None for r in ids])
        c["video"].extend([v[0] if type(v) is tuple else v for v in videos])
        c["image"].extend([v[0] if type(v) is tuple else v for v in images])
        c["question"].extend(questions if self.wants.questions else [None] * n)
        mkeys, clips, chars = [None] * n, [None] * n, [None] * n
        for offset in [i for i, (v, m) in enumerate(zip(videos, images)) if type(v) is tuple or type(m) is tuple]:
            kind, paths = ("video", videos[offset]) if type(videos[offset]) is tuple else ("image", images[offset])
            mkeys[offset] = json.dumps(paths)
            for order, path in enumerate(paths):
                for key, item in zip(("idx", "ord", "kind", "path"), (start + offset, order, kind, path)):
                    self.media[key].append(item)
        if self.wants.meta:
            for offset, record in enumerate(records):
                fields = rules.clip_fields(record) if isinstance(record, dict) else None
                if fields is not None:
                    clips[offset], chars[offset] = json.dumps(fields), text_chars(record)
                elif every_length and isinstance(record, dict):
                    chars[offset] = text_chars(record)
        c["mkey"].extend(mkeys)
        c["clip"].extend(clips)
        c["chars"].extend(chars)
        if len(c["idx"]) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        fix = ("idx, CASE WHEN id_str IS NOT NULL THEN to_json(id_str)::VARCHAR ELSE id_int END, video, image, mkey, question, "
               "clip, chars")
        for table, cols, select in ((f"{self.name}_fix", self.cols, fix), (f"{self.name}_fixmedia", self.media, "*")):
            if cols["idx"]:
                insert(self.con, table, cols, select)
                for values in cols.values():
                    values.clear()


def insert(con: Any, table: str, columns: dict[str, list[Any]], select: str = "*") -> None:
    """INSERT INTO table SELECT <select> FROM the columns (lists of one length): as list parameters
    when they are short, through pyarrow when they are long (a Python value each is slow there)."""
    names = list(columns)
    n = len(columns[names[0]])
    if n <= SMALL_ROWS:
        unnest = ", ".join(f"unnest(${i + 1}::{_sql_type(columns[k])}[]) AS {k}" for i, k in enumerate(names))
        con.execute(f"INSERT INTO {table} SELECT {select} FROM (SELECT {unnest})", [columns[k] for k in names])
        return
    import pyarrow as pa

    con.register("sb_block", pa.table(columns))
    try:
        con.execute(f"INSERT INTO {table} SELECT {select} FROM sb_block")
    finally:
        con.unregister("sb_block")


def load(con: Any, table: str, columns: dict[str, list[Any]], types: dict[str, str]) -> None:
    """A temporary table `table` (column: SQL type) holding the columns."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} ({', '.join(f'{k} {types[k]}' for k in columns)})")
    if columns and len(next(iter(columns.values()))):
        insert(con, table, columns)


def _sql_type(values: list[Any]) -> str:
    kinds = {type(v) for v in values} - {type(None)}
    return "BIGINT" if kinds == {int} else "DOUBLE" if kinds and kinds <= {int, float} else "VARCHAR"
