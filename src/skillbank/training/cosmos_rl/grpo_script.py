"""The dataset script cosmos-rl runs for GRPO (the rl action), as controller, policy and rollout ranks.

    cosmos-rl --config rl.toml --log-dir logs .../skillbank/training/cosmos_rl/grpo_script.py

Prompts are the LLaVA records through the same path as SFT (skillbank.data.chat, stopping before
the answer); each record's first answer is its reference. The rewards named in the TOML's
`train.train_policy.reward_function` become (callable, weight) pairs handed to cosmos-rl's
`worker_entry.main(reward_fns=...)`, which uses them instead of its names:

- exact_match: skillbank.evaluation.answers, the evaluator's rules (extraction by custom.answer_type,
  labels by custom.task_type): 1.0 when the sample's answer is correct, else 0.0. One rule: the
  reward and `skillbank evaluate` score a response the same way.
- format, single_choice, boxed_math: cosmos-rl's own functions, on the reference text.

The reference cosmos-rl passes around is a JSON text {"gt", "question"} (mcq answers need the
question's options); `reference_text` reads it back. `--skillbank-check` prints the first prompt,
its reference and the rewards of the reference answer itself, and exits (no cosmos-rl needed).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run by path, this folder is sys.path[0]: its toml.py would shadow the `toml` package cosmos-rl imports.
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from skillbank.data.chat import build_messages, prompt_and_answer  # noqa: E402
from skillbank.training.cosmos_rl import script as sft_script  # noqa: E402

COSMOS_REWARDS = {"format": "format_reward_fn", "single_choice": "single_choice_reward_fn", "boxed_math": "boxed_math_reward_fn"}
EXACT_MATCH = "exact_match"


class GrpoPromptDataset(sft_script.LlavaChatDataset):
    """LLaVA records as GRPO prompts (the chat up to the first answer) with their reference answers;
    read from the TOML's `custom` table as the SFT dataset is (from_custom, its train_dataset)."""

    def __getitem__(self, idx: int) -> list[dict[str, Any]]:
        return build_messages(self.records[idx], media_path=self.media_path, system_prompt=self.system_prompt, with_answer=False, **self.vision)

    def get_reference_answer(self, idx: int) -> str:
        """What cosmos-rl hands every reward with the samples of this prompt."""
        question, answer = prompt_and_answer(dict(self.records[idx]))
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


def exact_match_reward(to_be_evaluated: str, reference: Any, *, answer_type: str = "reasoning", task_type: str = "", **_: Any) -> float:
    """1.0 when skillbank's answer rules score the response correct against the reference, else 0.0."""
    from skillbank.evaluation.answers import score_rows

    gt, question = reference_text(reference)
    scored = score_rows([{"question": question, "gt": gt, "response": to_be_evaluated}], task_type, answer_type)
    return 1.0 if scored[0].correct else 0.0


def _cosmos_reward(name: str, to_be_evaluated: str, reference: Any, **kwargs: Any) -> float:
    fn = getattr(importlib.import_module("cosmos_rl.dispatcher.algo.reward"), COSMOS_REWARDS[name])
    return float(fn(to_be_evaluated, reference_text(reference)[0], **kwargs))


def reward_fns(weights: Mapping[str, float], custom: Mapping[str, Any]) -> list[tuple[Callable[..., float], float]]:
    """(callable, weight) per reward named in the TOML, in its order (cosmos-rl sums weight * reward)."""
    out: list[tuple[Callable[..., float], float]] = []
    for name, weight in weights.items():
        if name == EXACT_MATCH:
            fn = functools.partial(exact_match_reward, answer_type=custom.get("answer_type", "reasoning"), task_type=custom.get("task_type", ""))
        elif name in COSMOS_REWARDS:
            fn = functools.partial(_cosmos_reward, name)
        else:
            raise ValueError(f"unknown reward {name!r} in train.train_policy.reward_function (known: {EXACT_MATCH}, {', '.join(COSMOS_REWARDS)})")
        fn.__name__ = f"{name}_reward"  # cosmos-rl logs the callables by name
        out.append((fn, float(weight)))
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """cosmos-rl's worker options plus --skillbank-check (the SFT script's parser)."""
    return sft_script.parse_args(argv, check="print the first prompt, its reference and rewards as JSON and exit")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    config = sft_script.read_config(args.config)
    custom = config.get("custom", {})
    weights = config["train"]["train_policy"]["reward_function"]
    dataset = GrpoPromptDataset.from_custom(custom)
    rewards = reward_fns(weights, custom)
    if args.skillbank_check:
        reference = dataset.get_reference_answer(0)
        gt = reference_text(reference)[0]
        own = f"<think>\n\n</think>\n\n<answer>\n{gt}\n</answer>" if custom.get("answer_type") == "reasoning" else gt
        scores = {fn.__name__: fn(own, reference) for fn, _ in rewards if not fn.__name__.startswith(tuple(COSMOS_REWARDS))}
        print(json.dumps({"family": custom["model_family"], "prompts": len(dataset), "first": dataset[0], "reference": reference, "rewards_of_reference": scores}))
        return
    from cosmos_rl.launcher.worker_entry import main as worker_main

    from skillbank.training.cosmos_rl.script import family, packer_class

    packer = packer_class(family(custom))
    worker_main(dataset=dataset, data_packer=packer(), reward_fns=rewards, args=args)


if __name__ == "__main__":
    main()
