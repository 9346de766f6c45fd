"""One read of an annotations file: every record's rules, then what only the whole dataset shows.

Per record (records.py): object, id, conversations, one media key, video_fps. Across records, as
queries over the records table (preflight.table): unique ids, media files present under the media
folder and not escaping it, video and image records mixed, overlap with the validation set, clip
lengths against the token budget, and a random sample of videos for --decode-sample.

The read: DuckDB's read_json over the file's parts on every core, the rules it can prove in SQL
(records.CLEAN_SQL) and the record checker on the rest, so a million records cost a few seconds and
no Python object each. A file DuckDB cannot read goes through the stream reader record by record
(data.jsonstream), which also locates a syntax error by line and column; the tables and the checks
over them are the same.
"""

from __future__ import annotations

import gc
import json
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from skillbank.data import jsonparts
from skillbank.data.jsonstream import ArrayFormatError, iter_batches
from skillbank.preflight import media as media_mod
from skillbank.preflight import table
from skillbank.preflight.records import CLIP_KEYS, RecordChecker, Wants, fast_columns, id_of_key
from skillbank.preflight.report import Findings
from skillbank.preflight.vision import Clip, Estimate, TokenTally, VisionBudget, clip_from_record, text_chars


@dataclass
class Dataset:
    """What a dataset's scan leaves behind for the checks that span datasets and for the stats."""

    role: str
    file: str
    records: int = 0
    videos: int = 0
    images: int = 0
    complete: bool = True  # False when a format error stopped the scan
    media_root: str = ""
    sample: list[tuple[int, dict[str, Any], str]] = field(default_factory=list)  # (index, record, video file)
    with_meta: int = 0
    tokens: TokenTally = field(default_factory=TokenTally)  # tokens per sample of the clips whose length is known
    folders_listed: int = 0  # media folders read (one os.scandir each, however many records)
    con: Any = None  # the DuckDB connection holding its records table
    table: str = ""  # the records view (preflight.table)
    keys: bool = False  # its questions were kept: other sets are compared with it by media and question
    probe: list[tuple[int, str, int, Any]] = field(default_factory=list)  # (index, video path as written, text chars, id): clips to probe


READ_BACK_PART = 16 << 20  # parts of a large file: few for DuckDB, small enough to read a flagged record back (~0.07 s)
PROBE_ALL = -1  # ScanOptions.probe_sample: every record without a full clip description


@dataclass
class ScanOptions:
    media_root: str
    keep_keys: bool = False  # keep (media, question) keys: this is the set others are compared with
    overlap_with: Dataset | None = None
    budget: VisionBudget | None = None
    decode_sample: int = 0
    seed: int = 0
    probe_sample: int = 0  # records without a full clip description kept for the header probe: K spread over the file, PROBE_ALL every one


def connect() -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def scan(role: str, file: str, options: ScanOptions, findings: Findings) -> Dataset:
    other = options.overlap_with
    con = other.con if other is not None and other.con is not None else connect()
    data = Dataset(role, file, con=con, table=table.new_name(), keys=options.keep_keys)
    wants = Wants(questions=options.keep_keys or bool(other and other.keys), meta=options.budget is not None)
    reader = _Reader(data, options, findings, wants)
    reader.read()
    _Checks(data, options, findings, reader).run()
    return data


class _Reader:
    """Fills the records table: the parts path, else the stream path."""

    def __init__(self, data: Dataset, options: ScanOptions, findings: Findings, wants: Wants) -> None:
        self.data, self.options, self.findings, self.wants = data, options, findings, wants
        self.checker = RecordChecker(data.file, findings)
        self.parts: jsonparts.ArrayParts | None = None

    def read(self) -> None:
        table.create(self.data.con, self.data.table)
        if not self._parts():
            self._stream()

    def _parts(self) -> bool:
        import duckdb

        con, name = self.data.con, self.data.table
        try:
            parts = jsonparts.split_array(self.data.file, jsonparts.part_size(con, self.data.file, most=READ_BACK_PART))
        except OSError:
            return False  # the stream path reports it
        if parts is None:
            return False
        jsonparts.attach(con)
        try:
            flagged = table.read_parts(con, name, parts, self.wants)
        except duckdb.Error:
            con.execute(f"DROP TABLE IF EXISTS {name}_main")
            table.create_views(con, name, main=False)
            return False
        finally:
            jsonparts.release(parts)
        table.check_flagged(con, name, parts, flagged, self.checker, self.wants)
        self.parts = parts
        self.data.records = sum(parts.counts)
        return True

    def _stream(self) -> None:
        data, file = self.data, self.data.file
        rows = table.Rows(data.con, data.table, self.wants)
        with _no_gc():
            try:
                for batch in iter_batches(file):
                    start = data.records
                    cols = fast_columns(batch, self.wants) or self.checker.columns(batch, start, self.wants)
                    data.records += len(batch)
                    none = [None] * len(batch)
                    rows.add_batch(start, cols.ids, cols.videos or none, cols.images or none, cols.questions or none, batch)
            except ArrayFormatError as exc:
                data.complete = False
                self.findings.error(
                    "annotations.format",
                    f"{exc.message} (line {exc.line}, column {exc.column}); the records before it were checked, the rest of the file was not",
                    "fix the JSON at that line and column (a JSON array of objects: [{...}, {...}])",
                    f"{file}:{exc.line}:{exc.column}",
                )
            except OSError as exc:
                data.complete = False
                self.findings.error("annotations.format", f"cannot read the annotations: {exc.strerror or exc}", "check the path and its permissions", file)
        rows.flush()

    def records_at(self, indices: list[int]) -> Iterator[tuple[int, Any]]:
        """The records behind some rows, in order: from their parts, else by streaming the file again."""
        if self.parts is not None:
            yield from self.parts.iter_records_at(indices)
            return
        wanted, start = sorted(set(indices)), 0
        pos = 0
        try:
            for batch in iter_batches(self.data.file):
                while pos < len(wanted) and wanted[pos] < start + len(batch):
                    yield wanted[pos], batch[wanted[pos] - start]
                    pos += 1
                start += len(batch)
                if pos == len(wanted):
                    return
        except (ArrayFormatError, OSError):
            return


@contextmanager
def _no_gc() -> Iterator[None]:
    """Parsed records hold no cycles; the collector would only rescan them (a third of the time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Checks:
    """The dataset-wide checks, as queries over the records table."""

    def __init__(self, data: Dataset, options: ScanOptions, findings: Findings, reader: _Reader) -> None:
        self.data, self.options, self.findings, self.reader = data, options, findings, reader
        self.con, self.t = data.con, data.table
        self.media = media_mod.MediaIndex(options.media_root)
        self.data.media_root = self.media.root
        self.root_ok = os.path.isdir(self.media.root)
        self.bad: dict[str, str] = {}
        self.first: dict[str, int] = {}
        self.repeats = False

    def run(self) -> None:
        self._counts()
        self._media()
        if self.options.overlap_with is not None:
            self._overlap(self.options.overlap_with)
        if self.options.budget is not None:
            counted = self._budget(self.options.budget)
            if self.options.probe_sample:
                self._pick_probe(counted)
        if self.options.decode_sample:
            self._sample()
        self._unique_ids()
        self._finish()
        self.data.folders_listed = self.media.folders_listed

    def _query(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def _where(self, index: int) -> str:
        return f"{self.data.file}#{index}"

    def _counts(self) -> None:
        """Records per media kind, the first of each, and whether any id repeats: one pass over the table."""
        [(videos, first_video, images, first_image, ids, distinct)] = self._query(
            f"SELECT count(video), min(idx) FILTER (video IS NOT NULL), count(image), min(idx) FILTER (image IS NOT NULL), "
            f"count(id_key), count(DISTINCT id_key) FROM {self.t}")
        self.data.videos, self.data.images = videos, images
        self.first = {k: v for k, v in (("video", first_video), ("image", first_image)) if v is not None}
        self.repeats = ids != distinct

    def _unique_ids(self) -> None:
        """The records whose id an earlier record has (the distinct count in _counts says whether any does)."""
        if not self.repeats:
            return
        rows = self._query(
            f"SELECT idx, id_key, first FROM (SELECT idx, id_key, min(idx) OVER (PARTITION BY id_key) AS first FROM {self.t} "
            "WHERE id_key IS NOT NULL) WHERE idx <> first ORDER BY idx")
        for index, key, earlier in rows:
            self.findings.error(
                "annotations.unique_id",
                f"record {index} (id {id_of_key(key)!r}): field id repeats the id of record {earlier}",
                "give every record a unique id",
                self._where(index),
                group=self.data.file,
            )

    def _media(self) -> None:
        if not self.root_ok:
            return  # one finding for the missing folder, in _finish()
        distinct = [row[0] for row in self._query(f"SELECT DISTINCT path FROM {self.t}_media")]
        self.bad = self.media.problems(distinct)
        if not self.bad:
            return
        rows = self._with_table("sb_bad", {"path": list(self.bad), "verdict": list(self.bad.values())},
                                f"SELECT m.idx, m.kind, m.path, b.verdict, r.id_key FROM {self.t}_media m JOIN sb_bad b USING (path) "
                                f"LEFT JOIN {self.t} r USING (idx) ORDER BY m.idx, m.kind DESC, m.ord")
        root = self.media.root
        for index, kind, path, verdict, key in rows:
            label = _label(index, key)
            if verdict == media_mod.ESCAPES:
                self.findings.error(
                    "annotations.media_escape",
                    f"{label}: field {kind} {path!r} points outside the media folder {root}",
                    "use a path relative to the media folder, without '..' (or move the file under it)",
                    self._where(index),
                    group=self.data.file,
                )
            else:
                self.findings.error(
                    "annotations.media_exists",
                    f"{label}: field {kind} {path!r} does not exist under the media folder ({self.media.resolve(path)} is missing)",
                    "check the media folder setting and the record's path, or drop the record",
                    self._where(index),
                    group=self.data.file,
                )

    def _with_table(self, name: str, columns: dict[str, list[Any]], sql: str) -> list[tuple]:
        """Run `sql` with `columns` (text) as the temporary table `name`."""
        table.load(self.con, name, columns, dict.fromkeys(columns, "VARCHAR"))
        try:
            return self._query(sql)
        finally:
            self.con.execute(f"DROP TABLE {name}")

    def _overlap(self, other: Dataset) -> None:
        """Train records that share an id with the validation set, or its media and question."""
        mine, theirs = self.t, other.table
        ids = f"SELECT m.idx, max(o.idx) AS other FROM {mine} m JOIN {theirs} o USING (id_key) GROUP BY m.idx"
        parts = [f"SELECT idx, other, NULL AS key_other FROM ({ids})"]
        if other.keys:
            key = self._media_key_in(other.media_root)
            keys = (f"SELECT m.idx, min(o.idx) AS key_other FROM (SELECT idx, {key} AS media_key, question FROM {mine}) m "
                    f"JOIN (SELECT idx, coalesce(mkey, video, image) AS media_key, question FROM {theirs}) o USING (media_key, question) "
                    "WHERE m.question IS NOT NULL GROUP BY m.idx")
            parts.append(f"SELECT idx, NULL AS other, key_other FROM ({keys})")
        hits = " UNION ALL ".join(parts)
        rows = self._query(f"SELECT h.idx, r.id_key, max(h.other), min(h.key_other) FROM ({hits}) h JOIN {mine} r USING (idx) "
                           "GROUP BY h.idx, r.id_key ORDER BY h.idx")
        for index, key, same_id, same_key in rows:
            if same_id is not None:
                what = f"id {id_of_key(key)!r} is also record {same_id} of {other.file}"
            else:
                what = f"same media and question as record {same_key} of {other.file}"
            self.findings.warning(
                "annotations.overlap",
                f"{_label(index, key)} of the {self.data.role} set: {what} (the {other.role} set overlaps it, so its scores are optimistic)",
                "remove the shared records from one of the two sets",
                self._where(index),
                group=self.data.file,
            )

    def _media_key_in(self, other_root: str) -> str:
        """SQL: a record's media (its path, or its paths as a JSON list) as seen from the other set's
        media folder (os.path.relpath of each file); plain relative paths in SQL, the rest one by one."""
        key, path = "coalesce(mkey, video, image)", "coalesce(video, image)"
        root = self.media.root
        if other_root == root:
            return key
        rel = os.path.relpath(root, other_root)
        prefix = "" if rel == "." else rel.replace("'", "''") + "/"
        plain = f"(mkey IS NULL AND regexp_full_match({path}, '{media_mod.PLAIN_RE2}'))"
        odd = self._query(f"SELECT DISTINCT mkey, {path} FROM {self.t} WHERE {path} IS NOT NULL AND NOT {plain}")

        def moved(p: str) -> str:
            return os.path.relpath(os.path.join(root, p), other_root)

        mapped = [(m, json.dumps([moved(p) for p in json.loads(m)])) if m is not None else (p, moved(p)) for m, p in odd]
        self.con.execute("CREATE OR REPLACE TEMP TABLE sb_remap (path VARCHAR, mapped VARCHAR)")
        if mapped:
            self.con.executemany("INSERT INTO sb_remap VALUES (?, ?)", mapped)
        return f"CASE WHEN {plain} THEN '{prefix}' || {path} ELSE (SELECT mapped FROM sb_remap WHERE sb_remap.path = {key}) END"

    def _budget(self, budget: VisionBudget) -> list[str]:
        """The token budget of every record that states its clip's length: the estimate once per
        distinct clip and text length (Python, the rule's one implementation), the findings per
        record and the tally as queries. Returns the clips counted. With every clip probed
        (PROBE_ALL), a clip without frame size is left to the probe, which reads it exactly."""
        clips = self._clip_estimates(budget)
        deferred: list[str] = []
        if self.options.probe_sample == PROBE_ALL:
            deferred = [k for k, (c, _) in clips.items() if c.width is None]
            for key in deferred:
                del clips[key]
        if not clips and not deferred:
            return []
        texts = {n: budget.text_tokens(n) for (n,) in self._query(f"SELECT DISTINCT chars FROM {self.t} WHERE clip IS NOT NULL")}
        ok = {k: (c, e) for k, (c, e) in clips.items() if isinstance(e, Estimate)}
        failed = [k for k, (_, e) in clips.items() if not isinstance(e, Estimate)]
        table.load(self.con, "sb_clips", {"clip": list(ok), "low": [e.vision_low for _, e in ok.values()],
                                         "high": [e.vision_high for _, e in ok.values()], "seconds": [c.duration for c, _ in ok.values()]},
                   {"clip": "VARCHAR", "low": "BIGINT", "high": "BIGINT", "seconds": "DOUBLE"})
        table.load(self.con, "sb_texts", {"chars": list(texts), "text": list(texts.values())}, {"chars": "BIGINT", "text": "BIGINT"})
        table.load(self.con, "sb_failed", {"clip": failed}, {"clip": "VARCHAR"})
        try:
            [(self.data.with_meta,)] = self._query(  # the deferred clips state a length too
                f"SELECT count(*) FROM {self.t} WHERE clip IN (SELECT clip FROM sb_clips UNION ALL SELECT clip FROM sb_failed "
                "UNION ALL SELECT unnest(?::VARCHAR[]))", [deferred])
            [tally] = self._query(
                "SELECT count(*), sum(c.high + t.text), max(c.high + t.text), min(c.high + t.text), count(*) FILTER (c.low = c.high), "
                f"max(c.seconds) FROM {self.t} r JOIN sb_clips c USING (clip) JOIN sb_texts t USING (chars)")
            over = self._query(
                f"SELECT r.idx, r.id_key, r.clip, r.chars FROM {self.t} r LEFT JOIN sb_clips c USING (clip) JOIN sb_texts t USING (chars) "
                f"WHERE r.clip IN (SELECT clip FROM sb_failed) OR c.high + t.text > {int(budget.model_max_length)} ORDER BY r.idx")
        finally:
            for name in ("sb_clips", "sb_texts", "sb_failed"):
                self.con.execute(f"DROP TABLE {name}")
        if tally[0]:
            self.data.tokens = TokenTally(tally[0], int(tally[1]), tally[2], tally[3], tally[4], tally[5])
        for index, key, text, chars in over:
            clip, est = clips[text]
            if isinstance(est, Estimate):
                est = Estimate(est.frames, est.vision_low, est.vision_high, texts[chars])
            budget_finding(budget, clip, est, _label(index, key), self._where(index), self.findings, group=self.data.file)
        return list(clips)

    def _pick_probe(self, counted: list[str]) -> None:
        """Keep the video records whose clip the token tally will read from its headers (preflight.probing):
        those the budget did not count, every one (PROBE_ALL: `skillbank plan`) or about K spread evenly
        over the file (every (N/m)-th record, m sized so about K of them are such records); their text
        length from the records table (else from the records themselves: work per picked record)."""
        if not self.root_ok:
            return
        k, total = self.options.probe_sample, self.data.records
        table.load(self.con, "sb_counted", {"clip": counted}, {"clip": "VARCHAR"})
        table.load(self.con, "sb_bad", {"path": list(self.bad)}, {"path": "VARCHAR"})
        wanted = (f"FROM {self.t} WHERE video IS NOT NULL AND video NOT IN (SELECT path FROM sb_bad) "
                  "AND (clip IS NULL OR clip NOT IN (SELECT clip FROM sb_counted))")
        try:
            [(n,)] = self._query(f"SELECT count(*) {wanted}")
            spread = "" if k < 0 or n <= k else f" AND (idx * {-(-k * total // n)}) % {total} < {-(-k * total // n)}"
            rows = self._query(f"SELECT idx, video, id_key, chars {wanted}{spread} ORDER BY idx") if n else []
        finally:
            self.con.execute("DROP TABLE sb_counted")
            self.con.execute("DROP TABLE sb_bad")
        if not rows:
            return
        missing = [row[0] for row in rows if row[3] is None]  # the records table holds the text length of the parts path's clean records
        chars = {index: text_chars(record) if isinstance(record, dict) else 0 for index, record in self.reader.records_at(missing)} if missing else {}
        self.data.probe = [(index, path, text if text is not None else chars.get(index, 0), id_of_key(key) if key is not None else None)
                           for index, path, key, text in rows]

    def _clip_estimates(self, budget: VisionBudget) -> dict[str, tuple[Clip, Estimate | ValueError]]:
        """{clip fields (JSON): (the clip, its vision estimate or why qwen_vl_utils cannot sample it)}."""
        clips: dict[str, tuple[Clip, Estimate | ValueError]] = {}
        for (text,) in self._query(f"SELECT DISTINCT clip FROM {self.t} WHERE clip IS NOT NULL"):
            clip = clip_from_record(dict(zip(CLIP_KEYS, json.loads(text))))
            if clip is None:
                continue
            try:
                clips[text] = (clip, budget.estimate(clip, 0))
            except ValueError as exc:
                clips[text] = (clip, exc)
        return clips

    def _sample(self) -> None:
        """K video records at random (all with K < 0) whose file is there, for --decode-sample."""
        if not self.root_ok:
            return
        rows = self._with_table("sb_bad", {"path": list(self.bad)},
                                f"SELECT idx, video FROM {self.t} WHERE video IS NOT NULL AND video NOT IN (SELECT path FROM sb_bad) ORDER BY idx")
        k = self.options.decode_sample
        picked = rows if k < 0 else sorted(random.Random(self.options.seed).sample(rows, min(k, len(rows))))
        paths = dict(picked)
        self.data.sample = [(index, record, self.media.resolve(paths[index])) for index, record in self.reader.records_at(list(paths))]

    def _finish(self) -> None:
        data = self.data
        if data.complete and data.records == 0:
            self.findings.error(
                "annotations.empty",
                f"the {data.role} annotations hold no records",
                "point the spec at a file with records (a JSON array of LLaVA records)",
                data.file,
            )
        if data.videos and data.images:
            self.findings.error(
                "annotations.mixed_media",
                f"{data.videos:,} video records (first: record {self.first['video']}) and {data.images:,} image records "
                f"(first: record {self.first['image']}) in one dataset; the data packer asserts on a mini-batch that mixes them",
                "keep one media type per dataset (split video and image records into separate datasets)",
                data.file,
            )
        if not self.root_ok and (data.videos or data.images):
            self.findings.error(
                "annotations.media_exists",
                f"the media folder {self.media.root} does not exist, so no record's media can be found",
                "set the media folder (custom.*_dataset.media_path / dataset.media_dir) to the folder the records' paths are relative to",
                data.file,
            )


def _label(index: int, key: str | None) -> str:
    return f"record {index} (id {id_of_key(key)!r})" if key is not None else f"record {index}"


def check_clip(
    budget: VisionBudget, clip: Any, record: dict[str, Any], index: int, where: str, findings: Findings, *, group: str = "", chars: int | None = None
) -> Estimate | None:
    """The vision.budget finding of one clip whose length is known; its token estimate (None when it cannot be sampled).
    `chars`: the record's text characters when the record itself is no longer held (a probed clip)."""
    try:
        est: Estimate | ValueError = budget.estimate(clip, text_chars(record) if chars is None else chars)
    except ValueError as exc:
        est = exc
    label = f"record {index} (id {record.get('id')!r})"
    return budget_finding(budget, clip, est, label, where, findings, group=group)


def budget_finding(
    budget: VisionBudget, clip: Clip, est: Estimate | ValueError, label: str, where: str, findings: Findings, *, group: str = ""
) -> Estimate | None:
    """Report a clip whose estimate is over the budget (or that cannot be sampled); its estimate when it has one."""
    if not isinstance(est, Estimate):
        findings.error(
            "vision.budget",
            f"{label}: the clip has {clip.total_frames} frames but custom.vision.nframes asks for {budget.nframes}; qwen_vl_utils raises ({est})",
            "lower custom.vision.nframes, or use custom.vision.fps, or drop clips this short",
            where,
            group=group,
        )
        return None
    limit = budget.model_max_length
    if est.high <= limit:
        return est
    fix = "lower custom.vision.fps / nframes or custom.vision.total_pixels, trim long clips, or raise policy.model_max_length"
    detail = (
        f"{est.frames} frames of a {clip.duration:.1f} s clip -> about {est.vision_low:,}-{est.vision_high:,} vision tokens "
        f"+ ~{est.text:,} text tokens vs policy.model_max_length {limit:,}"
    )
    if est.low > limit:
        why = "truncation breaks vision-token alignment ('vision_embeds ... must be equal to n_tokens')"
        findings.error("vision.budget", f"{label}: the sample exceeds the token budget ({detail}); {why}", fix, where, group=group)
    else:
        findings.warning("vision.budget", f"{label}: the sample may exceed the token budget ({detail}), depending on the frame size", fix, where, group=group)
    return est
