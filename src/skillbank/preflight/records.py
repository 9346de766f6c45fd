"""The rules of one LLaVA record, and the columns of a batch that the dataset-wide checks need.

A record: {"id", "video" (or "image"), "video_fps", "conversations": [{"from": "human", "value":
"<video>\\n..."}, {"from": "gpt", "value": "..."}, ...]}. Roles follow what `skillbank.data.chat`
accepts (human/user, gpt/assistant, an optional leading system turn); the turns alternate, start
with a human turn and end with an answer.

`RecordChecker` applies the rules record by record and says what is wrong with each record. Two
proofs that records are clean skip it where they can, and each accepts only what the checker
would find nothing in (tests hold them together), so every rule and every message lives in the
checker: `fast_columns` proves a batch of parsed records clean with C-speed passes (map, set,
slicing); `CLEAN_SQL` proves one row of DuckDB's read_json clean (the columns of `READ_COLUMNS`),
so a million records are checked without a Python object each, and only the rows it cannot prove
go through the checker.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from skillbank.preflight.report import Findings

HUMAN = frozenset({"human", "user"})
GPT = frozenset({"gpt", "assistant"})
SYSTEM = "system"
MEDIA_KEYS = ("video", "image")
META_KEYS = ("duration", "num_frames", "frames")
_NUMBER = (int, float)
_ID = itemgetter("id")
_CONVERSATIONS = itemgetter("conversations")
_FPS = itemgetter("video_fps")
_FROM = itemgetter("from")
_VALUE = itemgetter("value")

Media = str | tuple[str, ...] | None


@dataclass
class Columns:
    """What the dataset-wide checks need from a batch, one entry per record (None: unusable)."""

    ids: list[Any]
    videos: list[Media] | None  # None: no record of the batch has a video
    images: list[Media] | None
    questions: list[str | None] | None = None  # first human turn, media tags stripped (overlap)
    meta: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (offset, record) with clip metadata


@dataclass(frozen=True)
class Wants:
    questions: bool = False  # for train/val overlap
    meta: bool = False  # records that carry duration / num_frames / frames (vision budget)


def question_of(text: str) -> str:
    """The question as compared across datasets: media tags and surrounding blanks removed."""
    return text.replace("<video>", "").replace("<image>", "").strip()


# ---- the fast path -------------------------------------------------------------------------------


def fast_columns(batch: list[Any], wants: Wants) -> Columns | None:
    """Columns of a batch proven clean by whole-batch passes; None when any record needs a look.

    Each pass is a C loop (map with itemgetter, set, slicing); a non-object record, a missing key
    or a wrong type raises KeyError / TypeError inside them, which means "look record by record".
    """
    try:
        ids = list(map(_ID, batch))
        if not set(map(type, ids)) <= {str, int} or "" in ids:
            return None
        convs = list(map(_CONVERSATIONS, batch))
        if set(map(type, convs)) != {list}:
            return None
        lengths = list(map(len, convs))
        if min(lengths) < 2 or (max(lengths) > 2 and any(n & 1 for n in lengths)):
            return None
        turns = list(chain.from_iterable(convs))
        froms = list(map(_FROM, turns))
        if not (set(froms[0::2]) <= HUMAN and set(froms[1::2]) <= GPT):
            return None
        values = list(map(_VALUE, turns))
        if "" in values or any(map(str.isspace, values)):
            return None
        videos = list(map(dict.get, batch, repeat("video")))
        images = list(map(dict.get, batch, repeat("image")))
        n_video = len(videos) - videos.count(None)
        n_image = len(images) - images.count(None)
        if n_video == len(batch) and n_image == 0:
            if set(map(type, videos)) != {str} or "" in videos or not _fps_ok(list(map(_FPS, batch))):
                return None
            cols = Columns(ids, videos, None)
        elif n_image == len(batch) and n_video == 0:
            if set(map(type, images)) != {str} or "" in images:
                return None
            cols = Columns(ids, None, images)
        else:
            return None
    except (KeyError, TypeError, ValueError):
        return None
    if wants.questions:
        cols.questions = [question_of(c[0]["value"]) for c in convs]
    if wants.meta and any(any(map(dict.__contains__, batch, repeat(key))) for key in META_KEYS):
        cols.meta = [(i, r) for i, r in enumerate(batch) if not r.keys().isdisjoint(META_KEYS)]
    return cols


def _fps_ok(fps: list[Any]) -> bool:
    if not set(map(type, fps)) <= {float, int} or min(fps) <= 0:
        return False
    total = sum(fps)  # NaN or inf anywhere makes the sum NaN or inf (so does overflow: then the exact path looks)
    return total < math.inf


# ---- the exact path ------------------------------------------------------------------------------


class RecordChecker:
    """Every record rule, with messages that name the field, the record index and its id."""

    def __init__(self, file: str, findings: Findings) -> None:
        self.file, self.findings = file, findings

    def columns(self, batch: list[Any], start: int, wants: Wants) -> Columns:
        cols = Columns([], [], [], [] if wants.questions else None)
        for offset, record in enumerate(batch):
            rid, video, image, question = self.record(record, start + offset)
            cols.ids.append(rid)
            cols.videos.append(video)
            cols.images.append(image)
            if cols.questions is not None:
                cols.questions.append(question)
            if wants.meta and isinstance(record, dict) and not record.keys().isdisjoint(META_KEYS):
                cols.meta.append((offset, record))
        if not any(v is not None for v in cols.videos):
            cols.videos = None
        if not any(v is not None for v in cols.images):
            cols.images = None
        return cols

    def record(self, record: Any, index: int) -> tuple[Any, Media, Media, str | None]:
        """(usable id, video, image, question) of one record, reporting what is wrong with it."""
        where = f"{self.file}#{index}"
        if not isinstance(record, dict):
            self._error(
                "annotations.record",
                f"record {index} is a JSON {_kind(record)}, not an object",
                'each element of the array must be an object {"id", "video", "video_fps", "conversations"}',
                where,
            )
            return None, None, None, None
        rid = record.get("id")
        label = f"record {index} (id {rid!r})" if "id" in record else f"record {index}"
        rid = self._id(record, label, where)
        question = self._conversations(record, label, where)
        video, image = self._media(record, label, where)
        return rid, video, image, question

    def _error(self, check: str, message: str, fix: str, where: str) -> None:
        self.findings.error(check, message, fix, where, group=self.file)

    def _id(self, record: dict[str, Any], label: str, where: str) -> Any:
        if "id" not in record:
            self._error("annotations.unique_id", f"{label}: field id is missing", "give every record a unique id (string)", where)
            return None
        rid = record["id"]
        if type(rid) is int or (type(rid) is str and rid != ""):
            return rid
        self._error("annotations.unique_id", f"{label}: field id must be a non-empty string or an integer (got {_kind(rid)})", "give every record a unique id (string)", where)
        return None

    def _conversations(self, record: dict[str, Any], label: str, where: str) -> str | None:
        """Checks conversations; returns the first human question when they are usable."""
        conv = record.get("conversations")
        if not isinstance(conv, list):
            what = "is missing" if "conversations" not in record else f"must be a list of turns (got {_kind(conv)})"
            self._error("annotations.conversations", f"{label}: field conversations {what}", CONVERSATION_FIX, where)
            return None
        problem = conversation_problem(conv)
        if problem is not None:
            self._error("annotations.conversations", f"{label}: field conversations {problem}", CONVERSATION_FIX, where)
            return None
        return question_of(conv[1 if str(conv[0].get("from", "")).lower() == SYSTEM else 0]["value"])

    def _media(self, record: dict[str, Any], label: str, where: str) -> tuple[Media, Media]:
        present = [k for k in MEDIA_KEYS if record.get(k) is not None]
        if len(present) != 1:
            what = "has both video and image" if present else "has no video or image field"
            fix = "give each record exactly one of video (a path under the media folder) or image"
            self._error("annotations.media_key", f"{label}: {what}; exactly one media key is needed", fix, where)
            return None, None
        key = present[0]
        media = _media_value(record[key])
        if media is None:
            what = f"must be a non-empty path string (or a list of them), got {_kind(record[key])}"
            self._error("annotations.media_key", f"{label}: field {key} {what}", f"set {key} to the file's path relative to the media folder", where)
        if key == "video":
            self._fps(record, label, where)
            return media, None
        return None, media

    def _fps(self, record: dict[str, Any], label: str, where: str) -> None:
        fix = "write a corrected copy with `skillbank data fix ANNOTATIONS --out FILE` (video_fps from each clip's container), or add video_fps: the clip's native frame rate, a positive number (e.g. 30.0)"
        if "video_fps" not in record:
            self._error("annotations.video_fps", f"{label}: field video_fps is missing (video records need it)", fix, where)
            return
        fps = record["video_fps"]
        if type(fps) not in _NUMBER:
            self._error("annotations.video_fps", f"{label}: field video_fps must be a number (got {_kind(fps)} {fps!r})", fix, where)
        elif not (0 < fps < math.inf):
            self._error("annotations.video_fps", f"{label}: field video_fps must be positive and finite (got {fps!r})", fix, where)


CONVERSATION_FIX = 'conversations: [{"from": "human", "value": "<video>\\nQUESTION"}, {"from": "gpt", "value": "ANSWER"}]'


def conversation_problem(conv: list[Any]) -> str | None:
    """Why a conversations list cannot train (None: it can): an optional leading system turn, then
    human and gpt turns alternating from a human one, ending with gpt, each with non-empty text.
    The one rule; `skillbank data import` holds every record it writes to it."""
    turns = conv[1:] if conv and isinstance(conv[0], dict) and str(conv[0].get("from", "")).lower() == SYSTEM else conv
    for i, turn in enumerate(turns):
        n = i + len(conv) - len(turns)
        if not isinstance(turn, dict):
            return f"turn {n} is a JSON {_kind(turn)}, not an object"
        role = turn.get("from")
        expected, name = (HUMAN, "human") if i % 2 == 0 else (GPT, "gpt")
        if str(role).lower() not in expected:
            return f"turn {n} has from={role!r}; expected {name!r} (turns alternate human, gpt, human, gpt, ...)"
        value = turn.get("value")
        if not isinstance(value, str) or not value.strip():
            got = "missing" if "value" not in turn else "empty" if isinstance(value, str) else f"a {_kind(value)}"
            return f"turn {n} ({name}) has a value that is {got}; it must be non-empty text"
    if len(turns) < 2:
        return f"has {len(turns)} turn(s); at least a human question and a gpt answer are needed"
    if len(turns) % 2:
        return "ends with a human turn; the last turn must be the gpt answer"
    return None


def _media_value(value: Any) -> Media:
    if type(value) is str:
        return value or None
    if isinstance(value, list) and value and all(type(v) is str and v for v in value):
        return tuple(value)
    return None


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# ---- the columnar proof (DuckDB) -----------------------------------------------------------------
# read_json types: JSON keeps each value's JSON text (DuckDB writes it back normalised: a string as
# "...", a number as digits, NaN as NaN; a missing key and null are both NULL), so a type is read
# from the text's first character without parsing it again. Turn roles are read as text.
READ_COLUMNS = {
    "id": "JSON", "video": "JSON", "image": "JSON", "video_fps": "JSON",
    "conversations": 'STRUCT("from" VARCHAR, "value" JSON)[]',
    "duration": "JSON", "num_frames": "JSON", "frames": "JSON", "width": "JSON", "height": "JSON",
}
# str.isspace() characters (a test holds this to Python's own table), as an RE2 class
PY_SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_SPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in PY_SPACE) + "]"
# a JSON string text whose content may be blank: only whitespace, raw or escaped
_BLANK_TEXT = '"(?:' + _SPACE_CLASS + "|\\\\[bfnrt/]|\\\\u[0-9a-fA-F]{4})*\""


def _sql_text(value: str) -> str:
    """A JSON value that is a string with something but whitespace in it (checker: non-empty text).
    Byte comparisons settle the common case (a first character that is visible ASCII, not a
    backslash); the others go through the regular expression."""
    text = f"{value}::VARCHAR"
    visible = f"({text} > '\"!' AND {text} <> '\"\"' AND ({text} < '\"\\' OR {text} >= '\"]') AND {text} < '\"' || chr(127))"
    return f"(starts_with({value}, '\"') AND CASE WHEN {visible} THEN true ELSE NOT regexp_full_match({value}, '{_BLANK_TEXT}') END)"


def _sql_turn(turn: str, first: bool) -> str:
    listed = ", ".join(f"'{r}'" for r in sorted(HUMAN if first else GPT))
    role = f'{turn}."from"'
    return f"(CASE WHEN {role} IN ({listed}) THEN true ELSE lower({role}) IN ({listed}) END AND {_sql_text(turn + '.value')})"


_SQL_LONG = (
    "list_bool_and(list_transform(conversations, lambda t, i: "
    f"CASE WHEN i % 2 = 1 THEN {_sql_turn('t', True)} ELSE {_sql_turn('t', False)} END))"
)
SQL_CONVERSATIONS = (  # human / gpt turns alternating from a human one, an even number, each with text
    f"CASE WHEN len(conversations) = 2 THEN {_sql_turn('conversations[1]', True)} AND {_sql_turn('conversations[2]', False)} "
    f"ELSE len(conversations) > 2 AND len(conversations) % 2 = 0 AND {_SQL_LONG} END"
)
SQL_FPS = (  # a positive finite number (the text of a JSON number starts with a digit or '-'); fps_num: SQL_SOURCE
    "(video_fps::VARCHAR >= '0' AND video_fps::VARCHAR < ':' AND isfinite(fps_num) AND fps_num > 0)"
)
SQL_MEDIA = (  # exactly one media key, a non-empty path string; a video record has its fps
    "CASE WHEN image IS NULL THEN starts_with(video, '\"') AND video::VARCHAR <> '\"\"' AND " + SQL_FPS + " "
    "WHEN video IS NULL THEN starts_with(image, '\"') AND image::VARCHAR <> '\"\"' ELSE false END"
)
SQL_ID_KEY = (  # a usable id's JSON text, as DuckDB writes it (equal for equal ids); NULL for an unusable one
    "CASE WHEN starts_with(id, '\"') THEN nullif(id::VARCHAR, '\"\"') WHEN regexp_full_match(id::VARCHAR, '-?[0-9]+') THEN id::VARCHAR END"
)
SQL_SOURCE = {"id_key": SQL_ID_KEY, "fps_num": "TRY_CAST(video_fps::VARCHAR AS DOUBLE)"}  # computed once per row, read by CLEAN_SQL
CLEAN_SQL = f"coalesce(id_key IS NOT NULL AND ({SQL_CONVERSATIONS}) AND ({SQL_MEDIA}), false)"
SQL_QUESTION = (  # question_of() of the first (human) turn of a clean row
    "regexp_replace(replace(replace(json_extract_string(conversations[1].value, '$'), '<video>', ''), '<image>', ''), "
    f"'^{_SPACE_CLASS}+|{_SPACE_CLASS}+$', '', 'g')"
)
SQL_HAS_CLIP = "coalesce(num_frames, frames, duration) IS NOT NULL"  # a record that states its clip's length
SQL_CLIP = "json_array(video_fps, coalesce(num_frames, frames), duration, width, height)"  # clip_fields() as JSON
SQL_CHARS = (  # text_chars() of a clean row
    "list_sum(list_transform(conversations, lambda t: length(json_extract_string(t.value, '$'))))"
)
CLIP_KEYS = ("video_fps", "num_frames", "duration", "width", "height")


def id_of_key(key: str) -> Any:
    """The id behind an id key (for messages)."""
    return json.loads(key)


def clip_fields(record: dict[str, Any]) -> list[Any] | None:
    """What the vision budget reads of a record that states its clip's length (SQL_CLIP), else None."""
    if record.keys().isdisjoint(META_KEYS):
        return None
    frames = record.get("num_frames")
    return [record.get("video_fps"), record.get("frames") if frames is None else frames, record.get("duration"), record.get("width"), record.get("height")]
