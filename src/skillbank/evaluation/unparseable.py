"""Why most answers could not be read: a run where every answer is unparseable is a run asked the wrong
way (a short-answer model asked to reason, a reasoning model read as short answers, traces cut off at
max_tokens), not a model that knows nothing. When more than half the answers are unparseable, evaluate
and `skillbank score` say which of these the replies show; the facts are counted by the caller (evaluate
from the replies it generated, score with one query over the results).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

THRESHOLD = 0.5  # more than this share of unparseable answers gets a diagnosis
SHOWN = 3  # example replies quoted


@dataclass
class ReplyFacts:
    """Counts over the unparseable replies (None: not known to the caller)."""

    replies: int  # replies counted
    no_tags: int | None = None  # hold neither </think> nor <answer>
    thinking: int | None = None  # hold <think> (a reasoning trace)
    truncated: int | None = None  # reached max_tokens (generation stopped at the limit, not at its end)
    empty: int | None = None  # nothing but whitespace
    max_tokens: int | None = None
    examples: Sequence[str] = field(default_factory=tuple)
    what: str = "unparseable replies"  # which replies were counted (score counts all of them)


def facts(replies: Sequence[str], *, token_counts: Sequence[int] | None = None, max_tokens: int | None = None) -> ReplyFacts:
    """ReplyFacts of unparseable replies (and, when given, their generated token counts)."""
    truncated = None
    if token_counts is not None and max_tokens:
        truncated = sum(1 for n in token_counts if n >= max_tokens)
    shown = [r if len(r) <= 80 else r[:77] + "..." for r in replies[:SHOWN]]
    return ReplyFacts(len(replies), sum(1 for r in replies if "</think>" not in r and "<answer>" not in r),
                      sum(1 for r in replies if "<think>" in r), truncated, sum(1 for r in replies if not r.strip()), max_tokens, shown)


def diagnosis(total: int, unparseable: int, answer_type: str, reply: ReplyFacts | None = None,
              trained_answer_type: str | None = None) -> dict | None:
    """Why most answers are unparseable, as metrics.json's `diagnosis`: {unparseable, total, answer_type,
    causes: [{code, text}], summary (the first cause in a few words, with its fix), message (the first
    cause in full, with the count)}; None under the threshold. Codes: answer_type_not_the_recipes, empty_replies,
    no_reasoning_format (a short-answer model asked to reason), reasoning_read_as_short, truncated,
    unreadable."""
    if not total or unparseable <= THRESHOLD * total:
        return None
    head = f"{unparseable} of {total} answers are unparseable"
    causes: list[tuple[str, str, str]] = []  # (code, summary, text)
    if trained_answer_type and trained_answer_type != answer_type:
        causes.append(("answer_type_not_the_recipes",
                       f"read as {answer_type} answers but the model was trained for {trained_answer_type}: set evaluation.answer_type = "
                       f"{trained_answer_type!r}",
                       f"they are read as {answer_type} answers but the model's recipe says it was trained for {trained_answer_type} "
                       f"answers: set evaluation.answer_type = {trained_answer_type!r} (or leave it unset to follow the recipe)"))
    if reply is not None and reply.replies:
        causes += _reply_causes(reply, answer_type)
    if not causes:
        shown = "; ".join(repr(r) for r in (reply.examples if reply else ()))
        causes.append(("unreadable", "the replies name no answer the rules read: check the prompt asks for the references' format",
                       "the replies name no answer the task's rules read" + (f" (e.g. {shown})" if shown else "")
                       + ": check the prompt asks for the answer format of the references"))
    lines = [{"code": code, "text": f"{head}: {text}"} for code, _, text in causes]
    return {"unparseable": unparseable, "total": total, "answer_type": answer_type, "causes": lines,
            "summary": causes[0][1], "message": lines[0]["text"]}


def diagnose(total: int, unparseable: int, answer_type: str, reply: ReplyFacts | None = None,
             trained_answer_type: str | None = None) -> list[str]:
    """Warnings that say why most answers are unparseable, when the facts tell; [] under the threshold."""
    block = diagnosis(total, unparseable, answer_type, reply, trained_answer_type)
    return [c["text"] for c in block["causes"]] if block else []


def _reply_causes(reply: ReplyFacts, answer_type: str) -> list[tuple[str, str, str]]:
    """What the replies themselves show: blank answers, no reasoning format, an unread trace, cut-off answers."""
    n, what = reply.replies, reply.what
    if reply.empty and reply.empty * 2 > n:
        cut = f"; {reply.truncated} ran to max_tokens {reply.max_tokens} writing only blanks" if reply.truncated else ""
        return [("empty_replies", "the replies are empty: the model wrote no answer",
                 f"{reply.empty} of {n} {what} are empty or only whitespace{cut}: the model wrote no answer "
                 "(an untrained model, or a prompt unlike the one it was trained with?)")]
    causes = []
    if answer_type == "reasoning" and reply.no_tags and reply.no_tags * 2 > n:
        causes.append(("no_reasoning_format",
                       "the replies hold no reasoning format (a short-answer model asked to reason?): try evaluation.answer_type = 'short'",
                       f"{reply.no_tags} of {n} {what} hold neither </think> nor <answer>: the model did not answer in the "
                       "reasoning format (a short-answer model asked to reason?); try answer_type short"))
    if answer_type == "short" and reply.thinking and reply.thinking * 2 > n:
        causes.append(("reasoning_read_as_short", "<think> traces read as short answers: set evaluation.answer_type = 'reasoning'",
                       f"{reply.thinking} of {n} {what} hold a <think> trace: a reasoning model read as short answers; "
                       "set evaluation.answer_type = 'reasoning' (score: --answer-format reasoning)"))
    if reply.truncated and reply.max_tokens and reply.truncated * 2 > n:
        causes.append(("truncated", f"the replies stopped at max_tokens {reply.max_tokens}: raise generation.max_tokens",
                       f"{reply.truncated} of {n} {what} stopped at max_tokens {reply.max_tokens}: raise generation.max_tokens "
                       "(or max_retries, which adds 256 tokens a pass)"))
    return causes
