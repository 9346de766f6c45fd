"""The rules of one LLaVA record, and the columns of a batch that the dataset-wide checks need.

A record: {"id", "video" (or "image"), "video_fps", "conversations": [{"from": "human", "value":
"<video>\\n..."}, {"from": "gpt", "value": "..."}, ...]}. Roles follow what `skillbank.data.chat`
accepts (human/user, gpt/assistant, an optional leading system turn); the turns alternate, start
with a human turn and end with an answer.

`exact_columns` applies the rules record by record and says what is wrong with each record.
`fast_columns` proves a whole batch clean with C-speed passes (map, set, slicing) instead; it
accepts only batches on which `exact_columns` would find nothing (a test holds the two together),
and returns None for anything else, so every rule and every message lives in `exact_columns`.
"""

from __future__ import annotations

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
        fix = 'conversations: [{"from": "human", "value": "<video>\\nQUESTION"}, {"from": "gpt", "value": "ANSWER"}]'
        conv = record.get("conversations")
        if not isinstance(conv, list):
            what = "is missing" if "conversations" not in record else f"must be a list of turns (got {_kind(conv)})"
            self._error("annotations.conversations", f"{label}: field conversations {what}", fix, where)
            return None
        turns = conv[1:] if conv and isinstance(conv[0], dict) and str(conv[0].get("from", "")).lower() == SYSTEM else conv
        problem = None
        for i, turn in enumerate(turns):
            n = i + len(conv) - len(turns)
            if not isinstance(turn, dict):
                problem = f"turn {n} is a JSON {_kind(turn)}, not an object"
                break
            role = turn.get("from")
            expected, name = (HUMAN, "human") if i % 2 == 0 else (GPT, "gpt")
            if str(role).lower() not in expected:
                problem = f"turn {n} has from={role!r}; expected {name!r} (turns alternate human, gpt, human, gpt, ...)"
                break
            value = turn.get("value")
            if not isinstance(value, str) or not value.strip():
                got = "missing" if "value" not in turn else "empty" if isinstance(value, str) else f"a {_kind(value)}"
                problem = f"turn {n} ({name}) has a value that is {got}; it must be non-empty text"
                break
        else:
            if len(turns) < 2:
                problem = f"has {len(turns)} turn(s); at least a human question and a gpt answer are needed"
            elif len(turns) % 2:
                problem = "ends with a human turn; the last turn must be the gpt answer"
        if problem is not None:
            self._error("annotations.conversations", f"{label}: field conversations {problem}", fix, where)
            return None
        return question_of(turns[0]["value"])

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


def _media_value(value: Any) -> Media:
    if type(value) is str:
        return value or None
    if isinstance(value, list) and value and all(type(v) is str and v for v in value):
        return tuple(value)
    return None


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)
