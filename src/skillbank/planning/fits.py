"""`fits_with`: settings that make a layout fit, each re-planned and verified, with its memory.

Tried on the spec's own layout when it does not fit, least change first, one at a time: gradient
checkpointing (when off), the largest smaller train.train_policy.mini_batch that fits, liger's fused
lm_head + cross-entropy (policy.enable_liger_fused_cross_entropy; when the logits are a large part and
tp = cp = 1), LoRA. When no single one fits, they are tried together in that order. Each entry is the
`--set KEY=VALUE` list to apply (`skillbank spec --from SPEC --set ...`, or `skillbank plan --set ...`
to see it), planned again with the same tokens: only settings that fit are listed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from skillbank.planning import layouts
from skillbank.models.params import ParamCount

MOST = 4
LOGITS_SHARE = 0.15  # the fused loss is proposed when the logits are at least this share of the memory
KEYS = {
    "checkpointing": "policy.model_gradient_checkpointing",
    "mini_batch": "train.train_policy.mini_batch",
    "fused": "policy.enable_liger_fused_cross_entropy",
    "lora": "policy.lora.enable",
}


def _with(spec: Any, changes: dict[str, Any]) -> Any:
    from skillbank.specification.overrides import set_dotted

    data = spec.model_dump(mode="json")
    for key, value in changes.items():
        set_dotted(data, key, value)
    return type(spec).model_validate(data)


def _text(changes: dict[str, Any]) -> list[str]:
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in changes.items()]


def candidates(s: layouts.Setting, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Single changes worth trying on this row, least change first (mini_batch: every smaller divisor, largest first)."""
    spec, parts = s.spec, row["memory_breakdown_gib"]
    out: list[dict[str, Any]] = []
    if not spec.policy.model_gradient_checkpointing:
        out.append({KEYS["checkpointing"]: True})
    batch, mini = spec.train.train_batch_per_replica, spec.train.train_policy.mini_batch
    out += [{KEYS["mini_batch"]: m} for m in range(mini - 1, 0, -1) if batch % m == 0]
    par = spec.policy.parallelism
    if not spec.policy.enable_liger_fused_cross_entropy and par.tp_size == par.cp_size == 1 and parts["logits"] >= LOGITS_SHARE * sum(parts.values()):
        out.append({KEYS["fused"]: True})
    if not spec.policy.lora.enable:
        out.append({KEYS["lora"]: True})
    return out


def fits_with(s: layouts.Setting, row: dict[str, Any], recount: Callable[[Any], ParamCount]) -> list[dict[str, Any]]:
    """Settings that make `row` (a layout that does not fit) fit; [] when it fits or nothing found."""
    if row["fits"]:
        return []

    def plan(changes: dict[str, Any]) -> dict[str, Any] | None:
        try:
            spec = _with(s.spec, changes)
        except Exception:  # noqa: BLE001 - a combination the spec's rules refuse is not a setting to offer
            return None
        count = recount(spec) if spec.policy.lora.enable != s.spec.policy.lora.enable else s.count
        again = layouts.layout(dataclasses.replace(s, spec=spec, count=count), row["nodes"], row["gpus_per_node"])
        return {"set": _text(changes), "memory_per_gpu_gib": again["memory_per_gpu_gib"], "fits": again["fits"],
                "step_time_s": again["step_time_s"], "total_time_h": again["total_time_h"]}

    found: list[dict[str, Any]] = []
    tried_mini = False
    for change in candidates(s, row):
        if KEYS["mini_batch"] in change and tried_mini:
            continue
        result = plan(change)
        if result and result["fits"]:
            found.append(result)
            tried_mini = tried_mini or KEYS["mini_batch"] in change
    if not found:
        together: dict[str, Any] = {}
        for change in candidates(s, row):
            if KEYS["mini_batch"] in change and change[KEYS["mini_batch"]] != 1:
                continue
            together.update(change)
            result = plan(dict(together))
            if result and result["fits"]:
                found.append(result)
                break
    return found[:MOST]
