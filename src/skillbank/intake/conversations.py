"""Reader: conversation records, as LLaVA, LLaMA-Factory (sharegpt / OpenAI) and ms-swift write them.

One record holds the turns of one conversation about one clip:
    {"messages" | "conversations": [turn, ...], "videos" | "video": ["clip.mp4"], "system": "...", other keys}
a turn {"role": user | assistant | system, "content": text} or {"from": human | gpt | system, "value": text}
(a content may also be a list of parts: {"type": "text", "text"}, {"type": "video", "video": PATH}).
The file is a JSON array or JSON lines (ms-swift's .jsonl). Every turn is kept, in the record shape
the bank trains on (LLaVA): conversations [{from: system}?, {from: human, value: "<video>\\n..."},
{from: gpt}, {from: human}, {from: gpt}, ...], each record held to preflight's rule
(`preflight.records.conversation_problem`). A top-level `system` (LLaMA-Factory's system column) becomes
the leading system turn. The clip goes with the first human turn (where the chat builder places it,
whatever turn the tag was in): a missing tag is added there, a tag in a later turn moved there
(`reader_notes.media_tag`). What cannot train is named record by record: images (the bank trains on
video clips), several clips in one record, a URL, a turn of another role (tool calls).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from skillbank.data.chat import ROLES, strip_media_tags
from skillbank.errors import InputError
from skillbank.intake.items import RECORD_KEYS, Bad, Item, Read
from skillbank.preflight.records import conversation_problem

TURN_LISTS = ("messages", "conversations")
VIDEO_KEYS = ("videos", "video")
IMAGE_KEYS = ("images", "image")
LLAVA_ROLE = {"user": "human", "assistant": "gpt", "system": "system"}  # chat role -> the bank's (LLaVA) role
VIDEO_TAG = "<video>"
SHAPE = ('{"messages": [{"role": "user", "content": "<video>QUESTION"}, {"role": "assistant", "content": "ANSWER"}, ...], '
         '"videos": ["clip.mp4"]} (or "conversations" with {"from": "human" / "gpt", "value": ...} turns; "video": "clip.mp4")')
URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|data:)", re.IGNORECASE)
HEAD = 1 << 16


def turn_list_key(record: Any) -> str | None:
    """The key holding the record's turns ("messages" or "conversations"), None when it has none."""
    if isinstance(record, dict):
        return next((k for k in TURN_LISTS if isinstance(record.get(k), list)), None)
    return None


def is_llava(record: Any) -> bool:
    """A LLaVA record: conversations of {from, value} turns and one video path."""
    turns = record.get("conversations") if isinstance(record, dict) else None
    return (isinstance(turns, list) and isinstance(record.get("video"), str) and "messages" not in record
            and all(isinstance(t, dict) and "from" in t for t in turns))


def keys_of(record: Any) -> str:
    return ", ".join(sorted(map(str, record))) if isinstance(record, dict) and record else "(none)"


def sniff(path: Path) -> tuple[str | None, Any]:
    """("array" | "lines" | None, the first record or None): how a .json / .jsonl file holds its records,
    read from its first 64 KiB (an array's first record through the streaming reader)."""
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(HEAD).lstrip("\ufeff \t\r\n")
    except (OSError, UnicodeDecodeError):
        return None, None
    if head.startswith("["):
        from skillbank.data.jsonstream import iter_batches

        try:
            first = next(iter(next(iter_batches(str(path), HEAD), [])), None)
        except Exception:  # noqa: BLE001 - a malformed array: the reader names the error
            first = None
        return "array", first
    if head.startswith("{"):
        try:
            return "lines", json.loads(head.split("\n", 1)[0])
        except ValueError:
            return None, None
    return None, None


def _records(source: Path, layout: str | None, out: Read) -> Iterator[tuple[str, int, Any]]:
    """(where, index, record) of a JSON array or of JSON lines (a malformed line is a Bad of its own)."""
    if layout == "array":
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"not a readable JSON file: {exc}", where=str(source), fix="pass a JSON array of records, or JSON lines") from None
        if not isinstance(data, list):
            raise InputError("the file is a JSON object, not an array of records", where=str(source), fix=f"write a JSON array (or JSON lines) of records like {SHAPE}")
        for index, record in enumerate(data):
            yield f"{source.name}#{index}", index, record
        return
    index = 0
    with source.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                out.bad.append(Bad(f"{source.name}:{number}", "", f"malformed JSON line: {exc}"))
                continue
            yield f"{source.name}:{number}", index, record
            index += 1


def _content(value: Any, media: dict[str, list[Any]]) -> str | None:
    """A turn's text: a string, or a list of parts (text parts joined; a video / image part becomes its
    tag and its path joins the record's media). None when it is neither."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    texts = []
    for part in value:
        kind = str(part.get("type", "")).removesuffix("_url") if isinstance(part, dict) else ""
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("video", "image"):
            where = part.get(kind, part.get(f"{kind}_url"))
            media[kind].append(where.get("url") if isinstance(where, dict) else where)
            texts.append(f"<{kind}>")
        else:
            return None
    return "".join(texts)


def _turns(raw: list[Any], media: dict[str, list[Any]]) -> list[dict[str, str]] | str:
    """The turns in the bank's roles, or why they cannot be read."""
    out = []
    for i, turn in enumerate(raw):
        if not isinstance(turn, dict):
            return f"turn {i} is a JSON {type(turn).__name__}, not an object"
        role_key, text_key = ("from", "value") if "from" in turn else ("role", "content") if "role" in turn else (None, None)
        if role_key is None:
            return f"turn {i} has keys {keys_of(turn)}; a turn is {{role, content}} or {{from, value}}"
        role = ROLES.get(str(turn[role_key]).lower())
        if role is None:
            return (f"turn {i} has {role_key} {turn[role_key]!r}; the bank trains on user / assistant (human / gpt) turns "
                    "after one optional system turn")
        text = _content(turn.get(text_key), media)
        if text is None:
            return f"turn {i} has a {text_key} that is a {type(turn.get(text_key)).__name__}, not text"
        out.append({"from": LLAVA_ROLE[role], "value": text})
    return out


def _paths(record: dict[str, Any], keys: tuple[str, ...]) -> tuple[list[Any], str | None]:
    """The media a record names under the first of `keys` it has (a string or a list), and that key."""
    for key in keys:
        value = record.get(key)
        if value is None or value == [] or value == "":
            continue
        return (list(value) if isinstance(value, list) else [value]), key
    return [], None


def _place_tag(turns: list[dict[str, str]], notes: Counter) -> str | None:
    """The clip's tag at the start of the first human turn (the only place the chat shows it); why not."""
    humans = [t for t in turns if t["from"] == "human"]
    counts = [t["value"].count(VIDEO_TAG) for t in humans]
    if sum(counts) > 1:
        return f"{sum(counts)} {VIDEO_TAG} tags for one video"
    images = sum(t["value"].count("<image>") for t in humans)
    if images:
        return f"{images} <image> tag(s) but no image: the bank trains on one video per record"
    if counts and counts[0]:
        return None
    if humans and sum(counts):
        notes["moved"] += 1
        for turn in humans:
            turn["value"] = strip_media_tags(turn["value"]) if VIDEO_TAG in turn["value"] else turn["value"]
    elif humans:
        notes["added"] += 1
    if humans:
        humans[0]["value"] = f"{VIDEO_TAG}\n{humans[0]['value']}"
    return None


def _item(record: Any, where: str, index: int, root: Path, tags: Counter) -> Item | Bad:
    if not isinstance(record, dict):
        return Bad(where, "", "the record is not a JSON object")
    raw_id = record.get("id")
    rid = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id) else f"{index:06d}"
    key = turn_list_key(record)
    if key is None:
        return Bad(where, rid, f"no conversation: the record has keys {keys_of(record)}; expected {SHAPE}")
    media: dict[str, list[Any]] = {"video": [], "image": []}
    turns = _turns(record[key], media)
    if isinstance(turns, str):
        return Bad(where, rid, f"{key}: {turns}")
    system = record.get("system")
    if isinstance(system, str) and system.strip() and not (turns and turns[0]["from"] == "system"):
        turns.insert(0, {"from": "system", "value": system})
    videos, video_key = _paths(record, VIDEO_KEYS)
    images, _ = _paths(record, IMAGE_KEYS)
    videos, images = videos + media["video"], images + media["image"]
    if not videos:
        what = f"{len(images)} image(s) and no video: the bank trains on video clips" if images else f"no video (keys: {keys_of(record)})"
        return Bad(where, rid, f"{what}; a record names one clip under videos or video")
    if len(videos) > 1:
        return Bad(where, rid, f"{len(videos)} videos in one record; a record holds one clip (write one record per clip)")
    if images:
        return Bad(where, rid, f"{len(images)} image(s) beside its video; a record holds one video and no image")
    video = videos[0]
    if not isinstance(video, str) or not video.strip():
        return Bad(where, rid, f"no video: {video_key or 'the video part'} holds {video!r}, not a path")
    if URL.match(video):
        return Bad(where, rid, f"video {video[:60]!r} is a URL or inline data; data import reads clips on disk (download them, then name the files)")
    why = _place_tag(turns, tags) or conversation_problem(turns)
    if why:
        return Bad(where, rid, f"{key}: {why}")
    full = Path(video) if os.path.isabs(video) else root / video
    if not full.is_file():
        return Bad(where, rid, f"missing clip: {full} does not exist")
    skip = {key, *VIDEO_KEYS, *IMAGE_KEYS, *RECORD_KEYS, "frames"} | ({"system"} if isinstance(system, str) or system is None else set())
    extra = {k: v for k, v in record.items() if k not in skip}
    return Item(rid, where, os.path.abspath(full), video, turns, extra)


def read_conversations(source: Path, *, reader: str = "messages", media_root: Path | None = None,
                       on_clip: Callable[[str], None] | None = None, **_: Any) -> Read:
    layout, _first = sniff(source)
    if layout is None:
        raise InputError("neither a JSON array nor JSON lines of records", where=str(source), fix=f"write records like {SHAPE}")
    root = Path(os.path.abspath(media_root or source.parent))
    out = Read(reader, root=root, on_clip=on_clip)
    tags: Counter = Counter()
    answers: Counter = Counter()
    seen, conversational, first = 0, 0, None
    for where, index, record in _records(source, layout, out):
        seen += 1
        first = first or (where, record)
        conversational += turn_list_key(record) is not None
        got = _item(record, where, index, root, tags)
        if isinstance(got, Bad):
            out.bad.append(got)
            continue
        if not out.fields:
            out.fields = {"question": turn_list_key(record), "answer": turn_list_key(record), "video": _paths(record, VIDEO_KEYS)[1] or "content"}
        answers[sum(t["from"] == "gpt" for t in got.conversations)] += 1
        out.add(got)
    if seen and not conversational:
        raise InputError(f"none of the {seen} records holds a conversation: {first[0]} has keys {keys_of(first[1])}", where=str(source),
                         fix=f"a record here is {SHAPE}; rows with question / answer / video keys are read as JSON lines (one object per line, --format jsonl)")
    out.notes = {"layout": "JSON array" if layout == "array" else "JSON lines",
                 "records_by_answers": {str(n): c for n, c in sorted(answers.items())},
                 "answers": sum(n * c for n, c in answers.items()),
                 "system_turns": sum(1 for i in out.items if i.conversations[0]["from"] == "system"),
                 "media_tag": {"added": tags["added"], "moved": tags["moved"]}}
    return out


def read_messages(source: Path, **kwargs: Any) -> Read:
    return read_conversations(source, reader="messages", **kwargs)


def read_llava(source: Path, **kwargs: Any) -> Read:
    return read_conversations(source, reader="llava", **kwargs)
