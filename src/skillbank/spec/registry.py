"""Which spec model each skill action uses. Adding an action: add its model here and regenerate."""

from __future__ import annotations

from pydantic import BaseModel

from skillbank.errors import InputError
from skillbank.spec.actions import ExportSpec, InferenceSpec, QuantizeSpec
from skillbank.spec.evaluate import EvaluateSpec
from skillbank.spec.train import TrainSpec

SPEC_MODELS: dict[str, dict[str, type[BaseModel]]] = {
    "tao-finetune-cosmos-reason": {
        "train": TrainSpec,
        "evaluate": EvaluateSpec,
        "inference": InferenceSpec,
        "quantize": QuantizeSpec,
        "export": ExportSpec,
    },
}


def spec_model(skill: str, action: str) -> type[BaseModel]:
    actions = SPEC_MODELS.get(skill)
    if actions is None:
        raise InputError(f"skill {skill!r} has no spec models", where="--skill", fix=f"one of: {', '.join(SPEC_MODELS)}")
    if action not in actions:
        raise InputError(f"skill {skill} has no action {action!r}", where="--action", fix=f"one of: {', '.join(actions)}")
    return actions[action]
