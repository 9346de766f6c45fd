"""Which keys of a source hold the question, the answer and the clip: common names, or the user's.

Decided once per source from every key its rows use, so one odd row cannot silently switch fields.
Two candidates both present (say `answer` and `label`) is an error that names them and the flag to pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skillbank.errors import InputError
from skillbank.intake.items import qa_conversations

QUESTION_KEYS = ("question", "prompt", "query", "instruction")
ANSWER_KEYS = ("answer", "response", "label", "gt", "ground_truth", "target")
VIDEO_KEYS = ("video", "video_path", "videos", "clip", "clip_path", "path", "file", "filename", "file_name", "media", "video_file")


def choose(seen: Iterable[str], names: tuple[str, ...], forced: str | None, *, what: str, flag: str, where: str) -> str | None:
    """The one key among `names` (case-insensitive) that the rows use; `forced` when given.

    None when no row uses any of them (each item then fails on its own); several -> InputError.
    """
    if forced:
        return forced
    hits = sorted({key for key in seen if key.lower() in names})
    if len(hits) > 1:
        raise InputError(f"the {what} could be in any of the keys {', '.join(hits)}", where=where, fix=f"pass {flag} KEY (one of {', '.join(hits)})")
    return hits[0] if hits else None


@dataclass(frozen=True)
class QAKeys:
    question: str | None
    answer: str | None

    @classmethod
    def of(cls, seen: Iterable[str], question: str | None, answer: str | None, *, where: str) -> QAKeys:
        seen = list(seen)
        return cls(
            choose(seen, QUESTION_KEYS, question, what="question", flag="--question-key", where=where),
            choose(seen, ANSWER_KEYS, answer, what="answer", flag="--answer-key", where=where),
        )

    def used(self) -> dict[str, str]:
        return {k: v for k, v in (("question", self.question), ("answer", self.answer)) if v}

    def names_any(self, row: dict[str, Any]) -> bool:
        """The row has the question or the answer key (so it is meant as a label)."""
        return any(key is not None and key in row for key in (self.question, self.answer))

    def conversations(self, row: dict[str, Any]) -> list[dict[str, str]] | str:
        """The row's two turns, or why it has none."""
        question, why = _text(row, self.question, "question", QUESTION_KEYS)
        if why:
            return why
        answer, why = _text(row, self.answer, "answer", ANSWER_KEYS)
        return why or qa_conversations(question, answer)

    def extra(self, row: dict[str, Any], *skip: str | None) -> dict[str, Any]:
        """The row's other keys (kept on the record)."""
        drop = {self.question, self.answer, *skip}
        return {k: v for k, v in row.items() if k not in drop}


def _text(row: dict[str, Any], key: str | None, what: str, names: tuple[str, ...]) -> tuple[str, str]:
    """(the value as text, "") or ("", why there is none)."""
    if key is None:
        return "", f"no {what} (no key named {', '.join(names)}; pass --{what}-key KEY)"
    if key not in row:
        return "", f"no {what}: key {key!r} is missing"
    value = row[key]
    if value is None:
        return "", f"no {what}: key {key!r} is empty"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "", f"no {what}: key {key!r} holds a {type(value).__name__}, not text"
    text = str(value).strip()
    return (text, "") if text else ("", f"no {what}: key {key!r} is empty")
