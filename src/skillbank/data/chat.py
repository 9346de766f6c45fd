"""LLaVA records -> Hugging Face chat messages, the one shape both training backends consume.

A LLaVA record: {id, video (relative to media_path), video_fps, conversations: [{from: human,
value: "<video>\\n..."}, {from: gpt, value: "..."}, ...]}. A record may open its conversations with
its own system turn {from: system, value: "..."}: that record's chat uses it instead of the run's
system prompt (custom.system_prompt, evaluate's dataset.system_prompt); a system turn anywhere else
is an InputError. The chat carries the vision settings in the video entry exactly as qwen_vl_utils
(cosmos-rl's packers) reads them: fps XOR nframes, and total_pixels / max_pixels / min_pixels when set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from skillbank.errors import InputError

MEDIA_TAG = re.compile(r"\s*<(video|image)>\s*")
CHARS_PER_TOKEN = 3  # text tokens estimated without a tokenizer (preflight's tally, plan, the rl response length)
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def strip_media_tags(text: str) -> str:
    """'<video>\\nIs the ball red?' -> 'Is the ball red?' (the video entry carries the media)."""
    return MEDIA_TAG.sub(" ", text).strip()


def video_path(record: dict[str, Any], media_path: str | os.PathLike[str] = "") -> str:
    video = record.get("video")
    if isinstance(video, list):
        video = video[0] if video else None
    if not video:
        raise InputError(f"record {record.get('id', '?')} has no video", where=f"record {record.get('id', '?')}", fix="every record needs a video path")
    path = Path(video)
    return str(path if path.is_absolute() or not media_path else Path(media_path) / path)


def turns(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) pairs with LLaVA roles mapped to chat roles."""
    out = []
    for i, turn in enumerate(record["conversations"]):
        role = ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            raise InputError(
                f"conversation turn {i} of record {record.get('id', '?')} has role {turn.get('from')!r}",
                where=f"record {record.get('id', '?')}",
                fix="use from: human / gpt",
            )
        out.append((role, str(turn.get("value", ""))))
    return out


def own_system_prompt(record: dict[str, Any]) -> str | None:
    """The record's own system prompt: the value of a system turn opening its conversations (None when
    it has none). It replaces the run's system prompt for this record (build_messages); a system turn
    anywhere but first is an InputError."""
    own = None
    for i, (role, text) in enumerate(turns(record)):
        if role != "system":
            continue
        if i:
            rid = record.get("id", "?")
            raise InputError(
                f"conversation turn {i} of record {rid} is a system turn; only the first turn may be one",
                where=f"record {rid}",
                fix="move the system turn to the start of conversations (it replaces the run's system prompt for this record), or drop it",
            )
        own = text
    return own


def prompt_and_answer(record: dict[str, Any], turn: int = 0) -> tuple[str, str]:
    """The question (tags stripped) and reference answer of assistant turn `turn` (see answer_turns;
    -1: the last). Turn 0: the first human prompt and the first answer after it ("" when none)."""
    if turn == 0:
        pairs = turns(record)
        prompt = next((strip_media_tags(t) for r, t in pairs if r == "user"), "")
        answer = next((t for r, t in pairs if r == "assistant"), "")
        return prompt, answer
    return answer_turns(record)[turn]


def answer_turns(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(question, reference answer) of each assistant turn in order: turn k is the k-th assistant turn,
    its question the first human turn after the previous answer (tags stripped; "" when there is none)."""
    out: list[tuple[str, str]] = []
    question: str | None = None
    for role, text in turns(record):
        if role == "user" and question is None:
            question = strip_media_tags(text)
        elif role == "assistant":
            out.append((question or "", text))
            question = None
    return out


def unanswered(record: dict[str, Any]) -> int:
    """Questions of the record with no reference answer: assistant turns left empty, plus a human turn
    after the last answer (a question the data never answered)."""
    empty = sum(1 for _, answer in answer_turns(record) if not answer.strip())
    roles = [role for role, _ in turns(record) if role != "system"]
    trailing = bool(roles) and roles[-1] == "user" and "assistant" in roles
    return empty + trailing


def through_turn(record: dict[str, Any], turn: int) -> dict[str, Any]:
    """A copy of the record whose conversations end with the answer of assistant turn `turn`: the
    conversation so far, the earlier turns' reference answers as its history (how training saw them).
    Asked with turn=-1 (build_messages, prompt_and_answer), it is that turn's question."""
    seen = -1
    for i, (role, _) in enumerate(turns(record)):
        seen += role == "assistant"
        if seen == turn:
            return {**record, "conversations": list(record["conversations"][: i + 1])}
    raise IndexError(f"record {record.get('id', '?')} has no assistant turn {turn}")


def question_position(record: dict[str, Any], turn: int = 0) -> int | None:
    """Where (index in conversations) the question of assistant turn `turn` is (-1: the last answer's; a
    record without answers: its first human turn); None when there is none."""
    roles = [role for role, _ in turns(record)]
    answers = [i for i, role in enumerate(roles) if role == "assistant"]
    if answers:
        end = answers[turn]
        start = max((a for a in answers if a < end), default=-1) + 1
    else:
        start, end = 0, len(roles)
    return next((i for i in range(start, end) if roles[i] == "user"), None)


def video_entry(
    path: str,
    *,
    fps: float | None = None,
    nframes: int | None = None,
    total_pixels: int | None = None,
    max_pixels: int | None = None,
    min_pixels: int | None = None,
) -> dict[str, Any]:
    if (fps is None) == (nframes is None):
        raise InputError("set exactly one of custom.vision.fps and custom.vision.nframes", where="custom.vision", fix="remove one of them")
    entry: dict[str, Any] = {"type": "video", "video": path}
    entry.update({"fps": float(fps)} if fps is not None else {"nframes": int(nframes)})
    for key, value in (("total_pixels", total_pixels), ("max_pixels", max_pixels), ("min_pixels", min_pixels)):
        if value is not None:
            entry[key] = int(value)
    return entry


def build_messages(
    record: dict[str, Any],
    *,
    media_path: str | os.PathLike[str] = "",
    system_prompt: str | None = None,
    fps: float | None = None,
    nframes: int | None = None,
    total_pixels: int | None = None,
    max_pixels: int | None = None,
    min_pixels: int | None = None,
    with_answer: bool = True,
    turn: int = 0,
) -> list[dict[str, Any]]:
    """The HF chat of one record: system, user [video, text], assistant (and any further turns).

    The system message is the record's own system turn when its conversations open with one (an empty
    one means no system message), else `system_prompt` (the run's); see own_system_prompt.
    with_answer=False stops before the answer of assistant turn `turn` (the prompt for generation):
    0, the first (GRPO's prompt); -1, the last (evaluate asks a record cut by through_turn), the earlier
    turns' reference answers kept as the conversation so far, exactly as training sees them.
    """
    video = video_entry(
        video_path(record, media_path), fps=fps, nframes=nframes, total_pixels=total_pixels, max_pixels=max_pixels, min_pixels=min_pixels
    )
    own = own_system_prompt(record)
    system = own if own is not None else system_prompt
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    placed = False
    pairs = turns(record)
    stop = turn % max(1, sum(role == "assistant" for role, _ in pairs)) if turn < 0 else turn
    seen = -1
    for role, text in pairs:
        if role == "system":
            continue
        seen += role == "assistant"
        if role == "assistant" and not with_answer and seen == stop:
            break
        if role == "user":
            content: list[dict[str, Any]] = []
            if not placed:
                content.append(video)
                placed = True
            content.append({"type": "text", "text": strip_media_tags(text)})
            messages.append({"role": "user", "content": content})
        else:
            messages.append({"role": "assistant", "content": text})
    if not placed:
        raise InputError(f"record {record.get('id', '?')} has no human turn", where=f"record {record.get('id', '?')}", fix="start conversations with from: human")
    return messages
