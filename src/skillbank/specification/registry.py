"""Which spec model each skill action uses. Adding an action: add its model here and regenerate."""

from __future__ import annotations

from pydantic import BaseModel

from skillbank.errors import InputError
from skillbank.specification.actions import ExportSpec, InferenceSpec, QuantizeSpec
from skillbank.specification.deft import DeftConfig
from skillbank.specification.evaluate import EvaluateSpec
from skillbank.specification.rl import RlSpec
from skillbank.specification.train import TrainSpec

SPEC_MODELS: dict[str, dict[str, type[BaseModel]]] = {
    "tao-finetune-cosmos-reason": {
        "train": TrainSpec,
        "evaluate": EvaluateSpec,
        "inference": InferenceSpec,
        "quantize": QuantizeSpec,
        "export": ExportSpec,
        "rl": RlSpec,
    },
}


# Config models of application skills (workflows with one config file, not actions of a model skill):
# `skillbank schemas generate` writes their schemas/<name>.schema.json and references/spec_template_<name>.yaml.
APP_CONFIGS: dict[str, dict[str, type[BaseModel]]] = {
    "tao-run-deft": {"deft": DeftConfig},
}


def spec_models(skill: str) -> dict[str, type[BaseModel]]:
    """{action: spec model} of a skill."""
    actions = SPEC_MODELS.get(skill)
    if actions is None:
        raise InputError(f"skill {skill!r} has no spec models", where="--skill", fix=f"one of: {', '.join(SPEC_MODELS)}")
    return actions


def spec_model(skill: str, action: str) -> type[BaseModel]:
    actions = spec_models(skill)
    if action not in actions:
        raise InputError(f"skill {skill} has no action {action!r}", where="--action", fix=f"one of: {', '.join(actions)}")
    return actions[action]
