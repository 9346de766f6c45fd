"""rollout.max_response_length from the data: what `skillbank spec --action rl` writes when you set none.

A policy that has not learned to stop (an untrained or barely trained one) runs every rollout to
rollout.max_response_length, so the cap is the cost of a GRPO step: local generation goes token by
token, and the loss runs over every sampled token. The template's 2048 is a reasoning model's room; a
task whose answers are a word needs a few dozen. The rule, from the longest reference answer A (in
tokens of the start model's tokenizer):

- short answers: 2 x A + 16 (room for a longer phrasing of the answer and the end-of-turn token);
- reasoning (custom.answer_type reasoning, or a system prompt that asks for <think>): the same plus a
  thinking budget of 1024 tokens (the <think> and <answer> tags fit in the 16).

A comes from the start model's tokenizer.json (a local folder, or a hub id's cached snapshot), read
with `tokenizers` (no torch), over the longest distinct answers by characters; without one it is
estimated at skillbank.data.chat.CHARS_PER_TOKEN characters per token. The value you set is kept.
Light: no torch, no transformers.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEY = "rollout.max_response_length"
SHORT_FACTOR = 2  # x the longest answer
SHORT_EXTRA = 16  # tokens: the end-of-turn token, tags, a longer phrasing
THINK_BUDGET = 1024  # tokens of <think> a reasoning answer gets
TOKENIZED = 256  # distinct answers tokenized (the longest by characters): the token count follows the characters


@dataclass(frozen=True)
class Answers:
    """The records of an annotations file and its longest distinct reference answers (longest first)."""

    records: int
    longest: list[str]


@dataclass(frozen=True)
class ResponseLength:
    """The rule's value and its terms, said in one line."""

    value: int
    answer_tokens: int
    counted_by: str
    reasoning: bool

    def why(self) -> str:
        tokens = f"{self.answer_tokens} token{'s' if self.answer_tokens != 1 else ''}"
        rule = f"{SHORT_FACTOR} x {self.answer_tokens} + {SHORT_EXTRA}"
        if self.reasoning:
            rule += f" + a thinking budget of {THINK_BUDGET} (answer_type reasoning)"
        else:
            rule += " (short answers)"
        return f"the longest reference answer is {tokens} ({self.counted_by}): {rule}"


def read_answers(path: str, keep: int = TOKENIZED) -> Answers:
    """Stream the file once: its record count and the `keep` longest distinct reference answers (each
    record's first answer turn, what the rewards check). InputError when it is no JSON array."""
    from skillbank.data.chat import prompt_and_answer
    from skillbank.data.jsonstream import ArrayFormatError, iter_batches
    from skillbank.errors import InputError

    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"annotation file not found: {file}", where=str(file), fix="check custom.train_dataset.annotation_path")
    count, seen, heap = 0, set(), []  # heap: (len, answer) of the longest so far
    try:
        for batch in iter_batches(str(file)):
            count += len(batch)
            for record in batch:
                try:
                    answer = prompt_and_answer(record)[1].strip()
                except (InputError, KeyError, TypeError, AttributeError):
                    continue  # preflight names malformed records
                if not answer or answer in seen or (len(heap) >= keep and len(answer) <= heap[0][0]):
                    continue
                seen.add(answer)
                (heapq.heappush if len(heap) < keep else heapq.heapreplace)(heap, (len(answer), answer))
    except ArrayFormatError as exc:
        raise InputError(f"annotation file is not a JSON array of records: {exc}", where=str(file),
                         fix="run `skillbank preflight` for every problem of the file") from None
    return Answers(count, [a for _, a in sorted(heap, reverse=True)])


def tokenizer_file(start: str) -> Path | None:
    """The start model's tokenizer.json here: its folder's, or a hub id's cached snapshot's."""
    from skillbank import modelref

    if not start.strip():
        return None
    ref = modelref.parse(start)
    if ref.kind == "local" and ref.path is not None:
        path = Path(ref.path) / "tokenizer.json"
        return path if path.is_file() else None
    if ref.kind == "hub" and ref.repo:
        return modelref.cached_file(ref.repo, "tokenizer.json")
    return None


def answer_tokens(answers: list[str], start: str) -> tuple[int, str]:
    """(the most tokens of one answer, how they were counted)."""
    from skillbank.data.chat import CHARS_PER_TOKEN

    if not answers:
        return 0, "no reference answers"
    file = tokenizer_file(start)
    if file is not None:
        try:
            from tokenizers import Tokenizer

            encoded = Tokenizer.from_file(str(file)).encode_batch(answers, add_special_tokens=False)
            return max(len(e.ids) for e in encoded), "the start model's tokenizer"
        except Exception:  # noqa: BLE001 - a tokenizer this library cannot read: the estimate below
            pass
    chars = max(len(a) for a in answers)
    return math.ceil(chars / CHARS_PER_TOKEN), f"{chars} characters at {CHARS_PER_TOKEN} per token: no tokenizer.json of the start model here"


def asks_reasoning(spec: Any) -> bool:
    """Whether the rollouts think before they answer: answer_type reasoning, or a prompt asking for <think>."""
    from skillbank.training.cosmos_rl.grpo import system_prompt

    return spec.custom.answer_type == "reasoning" or "<think>" in system_prompt(spec)


def response_length(spec: Any, answers: Answers, *, start: str | None = None) -> ResponseLength:
    """The rule's value for `spec` over `answers` (`start`: the start model as this machine sees it),
    at most policy.model_max_length."""
    tokens, how = answer_tokens(answers.longest, spec.policy.model_name_or_path if start is None else start)
    reasoning = asks_reasoning(spec)
    value = SHORT_FACTOR * tokens + SHORT_EXTRA + (THINK_BUDGET if reasoning else 0)
    return ResponseLength(min(value, spec.policy.model_max_length), tokens, how, reasoning)
