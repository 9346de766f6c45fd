"""An rl spec filled from its start model's recipe: `skillbank spec --action rl` (user > recipe > template).

GRPO samples from the SFT checkpoint it starts at, so the prompts must look like the ones that
checkpoint was trained on: the same video sampling, system prompt and answer format. The template
assumes a reasoning model (<think>/<answer> and the format reward); on a checkpoint trained on short
answers every sample would fail the format and the extraction, score 0, and GRPO learn nothing. So
each setting the user did not set comes from the start model's skillbank_recipe.json (skillbank.recipe),
else the template's; a user setting that differs from the recipe's is a warning, worded as evaluate's.
The rewards follow the answer format: a short-answer start drops the format reward, so does a
reasoning start whose system prompt does not ask for <think> and <answer>. Light: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillbank import recipe
from skillbank.specification.overrides import set_dotted

# recipe key -> the rl spec's dotted key
KEYS = {
    "fps": "custom.vision.fps",
    "nframes": "custom.vision.nframes",
    "total_pixels": "custom.vision.total_pixels",
    "max_pixels": "custom.vision.max_pixels",
    "system_prompt": "custom.system_prompt",
    "answer_type": "custom.answer_type",
}
TASK_KEY = "custom.task_type"
REWARDS_KEY = "train.train_policy.reward_function"
START_KEY = "policy.model_name_or_path"


@dataclass
class RlFill:
    """The filled spec, where each recipe setting came from, the recipe's file, warnings and notes."""

    spec: Any
    sources: dict[str, str] = field(default_factory=dict)  # dotted key -> user | recipe | template
    recipe_path: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.recipe_path, "sources": self.sources, "warnings": self.warnings}


def fill_from_recipe(spec: Any, explicit: set[str], *, start_here: str | None = None) -> RlFill:
    """The rl spec with every recipe setting the user did not set (`explicit`: dotted keys) taken from
    the start model's recipe. `start_here`: the start model as this machine sees it (under a path map)."""
    start = start_here if start_here is not None else spec.policy.model_name_or_path
    found = recipe.read(start) if start else None
    if found is None:
        return RlFill(spec, notes=[_no_recipe_note(start)] if start else [])
    data = spec.model_dump(mode="json")
    current = _values(data)
    user = {k: current[k] if KEYS[k] in explicit else None for k in KEYS}
    if user["fps"] is not None or user["nframes"] is not None:  # the sampling is one pair: the other key was cleared
        user["fps"], user["nframes"] = current["fps"], current["nframes"]
    applied = recipe.apply(user, found.recipe, current, names=KEYS, recipe_source=f"the start model's recipe ({found.source})")
    for key, dotted in KEYS.items():
        set_dotted(data, dotted, applied.values[key])
    sources = {KEYS[k]: ("template" if s == "default" else s) for k, s in applied.sources.items()}
    task = found.recipe.get("task_type")
    if TASK_KEY not in explicit and task is not None:
        set_dotted(data, TASK_KEY, task)
        sources[TASK_KEY] = "recipe"
    notes: list[str] = []
    if REWARDS_KEY not in explicit:
        rewards, why = _rewards(data["train"]["train_policy"]["reward_function"], applied.values)
        if why:
            set_dotted(data, REWARDS_KEY, rewards)
            notes.append(f"{REWARDS_KEY} {rewards}: {why}")
        sources[REWARDS_KEY] = "recipe" if why else "template"
    return RlFill(type(spec).model_validate(data), sources, found.source, list(applied.warnings), notes)


def _values(data: dict[str, Any]) -> dict[str, Any]:
    custom = data["custom"]
    return {**{k: custom["vision"].get(k) for k in recipe.VISION_KEYS},
            "system_prompt": custom.get("system_prompt"), "answer_type": custom.get("answer_type")}


def _rewards(rewards: dict[str, float], values: dict[str, Any]) -> tuple[dict[str, float], str | None]:
    """The template's rewards without `format` when the answer format makes it pay nothing (with why),
    the other weights scaled to the same total; (rewards, None) when they stand."""
    if "format" not in rewards:
        return rewards, None
    prompt = values["system_prompt"]
    if values["answer_type"] != "reasoning":
        why = "the start model answers short (its recipe's answer_type), so the format reward (<think>/<answer>) would score 0; dropped"
    elif prompt is not None and not ("<answer>" in prompt and "<think>" in prompt):
        why = "the start model's system prompt asks for no <think>/<answer>, so the format reward would score 0; dropped"
    else:
        return rewards, None
    kept = {k: w for k, w in rewards.items() if k != "format"} or {"exact_match": 1.0}
    total, left = sum(rewards.values()), sum(kept.values())
    return {k: round(w * total / left, 6) for k, w in kept.items()}, why


def _no_recipe_note(start: str) -> str:
    return (f"{START_KEY} {start} has no {recipe.RECIPE_FILE} (a hub id, or a folder skillbank did not write): the template's "
            "answer format (reasoning, with the format reward), system prompt and vision settings are kept; if it was trained on "
            "short answers, set custom.answer_type=short (and the vision settings it was trained at)")
