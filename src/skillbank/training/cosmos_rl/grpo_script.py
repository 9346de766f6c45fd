"""The dataset script cosmos-rl runs for GRPO (the rl action), as controller, policy and rollout ranks.

    cosmos-rl --config rl.toml --log-dir logs .../skillbank/training/cosmos_rl/grpo_script.py

Prompts are the LLaVA records through the same path as SFT (skillbank.data.chat, stopping before
the answer); each record's first answer is its reference. The rewards named in the TOML's
`train.train_policy.reward_function` become (callable, weight) pairs handed to cosmos-rl's
`worker_entry.main(reward_fns=...)`, which uses them instead of its names: skillbank.training.rewards
(exact_match by the evaluator's answer rules; format, single_choice, boxed_math by cosmos-rl's own
functions), the same rewards the local backend scores with. `--skillbank-check` prints the first prompt,
its reference and the rewards of the reference answer itself, and exits (no cosmos-rl needed).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run by path, this folder is sys.path[0]: its toml.py would shadow the `toml` package cosmos-rl imports.
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import json  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from skillbank.data.chat import build_messages, prompt_and_answer  # noqa: E402
from skillbank.training.cosmos_rl import script as sft_script  # noqa: E402
from skillbank.training.rewards import COSMOS_REWARDS, exact_match_reward, reference_json, reference_text, reward_fns  # noqa: E402,F401


class GrpoPromptDataset(sft_script.LlavaChatDataset):
    """LLaVA records as GRPO prompts (the chat up to the first answer) with their reference answers;
    read from the TOML's `custom` table as the SFT dataset is (from_custom, its train_dataset)."""

    def __getitem__(self, idx: int) -> list[dict[str, Any]]:
        return build_messages(self.records[idx], media_path=self.media_path, system_prompt=self.system_prompt, with_answer=False, **self.vision)

    def get_reference_answer(self, idx: int) -> str:
        """What cosmos-rl hands every reward with the samples of this prompt."""
        question, answer = prompt_and_answer(dict(self.records[idx]))
        return reference_json(answer, question)


def parse_args(argv: Sequence[str] | None = None) -> Any:
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
