"""The GRPO rewards of the rl action, once: what cosmos-rl's workers call (through grpo_script.py) and
what the local backend scores its rollouts with (skillbank.training.local.grpo).

- exact_match: skillbank.scoring.answers, the evaluator's rules (extraction by custom.answer_type,
  labels by custom.task_type): 1.0 when the sample's answer is correct, else 0.0. The reward and
  `skillbank evaluate` score a response the same way.
- format, single_choice, boxed_math: cosmos-rl 0.4.7's own functions (cosmos_rl.dispatcher.algo.reward),
  on the reference text. Importing them loads cosmos-rl (seconds), so only when one is named, and
  quietly (skillbank.compat.cosmos_rl_import: its import chatter goes to a debug log).

A reference is the JSON text {"gt", "question"} (mcq answers need the question's options);
`reference_text` reads it back, and a plain text is the ground truth alone.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from skillbank.compat.cosmos_rl_import import import_quietly  # light: cosmos_rl loads on the first cosmos reward

EXACT_MATCH = "exact_match"
COSMOS_REWARDS = {"format": "format_reward_fn", "single_choice": "single_choice_reward_fn", "boxed_math": "boxed_math_reward_fn"}


def reference_json(answer: str, question: str) -> str:
    """The reference one prompt's samples are scored against."""
    return json.dumps({"gt": answer, "question": question})


def reference_text(reference: Any) -> tuple[str, str]:
    """(ground truth, question) of a reference; a plain text is the ground truth alone."""
    if isinstance(reference, str):
        try:
            parsed = json.loads(reference)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and "gt" in parsed:
            return str(parsed["gt"]), str(parsed.get("question", ""))
    return ("" if reference is None else str(reference)), ""


def exact_match_batch(responses: Sequence[str], references: Sequence[Any], *, answer_type: str, task_type: str) -> list[float]:
    """exact_match of many samples in one pass of the answer rules."""
    from skillbank.scoring.answers import score_rows

    rows = []
    for response, reference in zip(responses, references, strict=True):
        gt, question = reference_text(reference)
        rows.append({"question": question, "gt": gt, "response": response})
    return [1.0 if s.correct else 0.0 for s in score_rows(rows, task_type, answer_type)] if rows else []


def exact_match_reward(to_be_evaluated: str, reference: Any, *, answer_type: str = "reasoning", task_type: str = "", **_: Any) -> float:
    """1.0 when skillbank's answer rules score the response correct against the reference, else 0.0."""
    return exact_match_batch([to_be_evaluated], [reference], answer_type=answer_type, task_type=task_type)[0]


def cosmos_reward(name: str, to_be_evaluated: str, reference: Any, **kwargs: Any) -> float:
    fn = getattr(import_quietly("cosmos_rl.dispatcher.algo.reward"), COSMOS_REWARDS[name])
    return float(fn(to_be_evaluated, reference_text(reference)[0], **kwargs))


def check_names(weights: Mapping[str, float]) -> None:
    unknown = [name for name in weights if name != EXACT_MATCH and name not in COSMOS_REWARDS]
    if unknown:
        raise ValueError(f"unknown reward {unknown[0]!r} in train.train_policy.reward_function (known: {EXACT_MATCH}, {', '.join(COSMOS_REWARDS)})")


def reward_fns(weights: Mapping[str, float], custom: Mapping[str, Any]) -> list[tuple[Callable[..., float], float]]:
    """(callable, weight) per reward named in the TOML, in its order (cosmos-rl sums weight * reward)."""
    check_names(weights)
    out: list[tuple[Callable[..., float], float]] = []
    for name, weight in weights.items():
        if name == EXACT_MATCH:
            fn = functools.partial(exact_match_reward, answer_type=custom.get("answer_type", "reasoning"), task_type=custom.get("task_type", ""))
        else:
            fn = functools.partial(cosmos_reward, name)
        fn.__name__ = f"{name}_reward"  # cosmos-rl logs the callables by name
        out.append((fn, float(weight)))
    return out


def score(responses: Sequence[str], references: Sequence[Any], weights: Mapping[str, float], *, answer_type: str,
          task_type: str) -> tuple[list[float], dict[str, list[float]]]:
    """(weighted total per sample, each reward's raw values per sample): the local backend's rollouts,
    exact_match in one batch, cosmos-rl's rewards one sample at a time (as its workers call them)."""
    check_names(weights)
    parts: dict[str, list[float]] = {}
    for name in weights:
        if name == EXACT_MATCH:
            parts[name] = exact_match_batch(responses, references, answer_type=answer_type, task_type=task_type)
        else:
            parts[name] = [cosmos_reward(name, r, ref) for r, ref in zip(responses, references, strict=True)]
    totals = [sum(float(weights[name]) * parts[name][i] for name in weights) for i in range(len(responses))]
    return totals, parts
