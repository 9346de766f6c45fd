"""The learning-rate default of a train spec, full fine-tuning or LoRA: the one rule the spec builder
(`skillbank spec`) and the AutoML search range read.

Full fine-tuning 1e-5, LoRA 1e-4, as LLaMA-Factory's Qwen3-VL recipes set them
(examples/train_full/qwen3vl_full_sft.yaml `learning_rate: 1.0e-5`, examples/train_lora/qwen3vl_lora_sft.yaml
`learning_rate: 1.0e-4`): adapters start at zero and hold a small share of the weights, so they want about
ten times the full-weight rate (QLoRA, Dettmers et al. 2023, trained 7B-13B adapters at 2e-4 and 33B-65B at
1e-4). AutoML searches one decade either side of the default (log scale).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillbank.specification.overrides import get_dotted, set_dotted

KEY = "train.optm_lr"
LORA_KEY = "policy.lora.enable"
FULL_LR = 1e-5
LORA_LR = 1e-4
SOURCE = "LLaMA-Factory's Qwen3-VL LoRA recipe, examples/train_lora/qwen3vl_lora_sft.yaml"
DECADES = 1  # the AutoML range: the default / 10 .. x 10


def shown(lr: float) -> str:
    """1e-4, not 0.0001."""
    return f"{lr:.0e}".replace("e-0", "e-").replace("e+0", "e")


def lora_enabled(spec: Any) -> bool:
    """policy.lora.enable of a train spec (a TrainSpec or its dict)."""
    if isinstance(spec, Mapping):
        return bool(get_dotted(spec, LORA_KEY, False))
    lora = getattr(getattr(spec, "policy", None), "lora", None)
    return bool(getattr(lora, "enable", False))


def default_lr(spec: Any) -> float:
    """The learning rate a spec gets when the user sets none: LoRA's or full fine-tuning's."""
    return LORA_LR if lora_enabled(spec) else FULL_LR


def lr_range(spec: Any) -> tuple[float, float]:
    """The AutoML search range of train.optm_lr for this spec: one decade either side of default_lr."""
    lr = default_lr(spec)
    return float(f"{lr / 10**DECADES:.12g}"), float(f"{lr * 10**DECADES:.12g}")  # 1e-6, not 1.0000000000000002e-06


def apply_lora_default(data: dict[str, Any], *, set_now: set[str], base: Mapping[str, Any] | None = None) -> list[str]:
    """Set train.optm_lr to the LoRA default in a spec dict being built, where LoRA is on and the learning
    rate is nobody's choice: not set in this call (`set_now`, the dotted keys of --set / the dataset root),
    and, when building from a file (`base`), the file had LoRA off and the full fine-tuning default.
    Returns the line that says so (empty when nothing changed)."""
    if not lora_enabled(data) or KEY in set_now or get_dotted(data, "train") is None:
        return []
    if base is not None and (lora_enabled(base) or get_dotted(base, KEY, FULL_LR) != FULL_LR):
        return []
    if get_dotted(data, KEY, FULL_LR) == LORA_LR:
        return []
    set_dotted(data, KEY, LORA_LR)
    return [f"{KEY} set to {shown(LORA_LR)} for LoRA ({SOURCE}; full fine-tuning keeps {shown(FULL_LR)}); "
            "set it to keep yours (--set learning_rate=...)"]
