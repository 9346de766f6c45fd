"""JSON Schema 2020-12 of an action, from its spec model.

Self-contained (every $ref inlined, so agents and the AutoML search walk one nested tree), finite
numbers only, and carrying the AutoML keywords of `skillbank.specification.meta.param` per field plus the
top-level `default` (the whole default spec), `automl_default_parameters`,
`automl_disabled_parameters` and `popular` that agents of the public bank already read.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from skillbank.specification.keys import iter_fields

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**_inline(target, defs), **{k: _inline(v, defs) for k, v in node.items() if k != "$ref"}}
            return merged
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _check_finite(node: Any, path: str = "") -> None:
    if isinstance(node, float) and not math.isfinite(node):
        raise ValueError(f"non-finite number in generated schema at {path or '/'}")
    if isinstance(node, dict):
        for k, v in node.items():
            _check_finite(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_finite(v, f"{path}/{i}")


def automl_lists(model: type[BaseModel]) -> tuple[list[str], list[str], dict[str, Any]]:
    """(searched by default, never searched, popular key -> default value) as dotted keys."""
    default = model().model_dump(mode="json")
    searched, disabled, popular = [], [], {}
    for key, info in iter_fields(model):
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("automl_default"):
            searched.append(key)
        if extra.get("automl_enabled") is False:
            disabled.append(key)
        if extra.get("popular"):
            value: Any = default
            for part in key.split("."):
                value = value[part] if isinstance(value, dict) else None
            popular[key] = value
    return searched, disabled, popular


def action_schema(model: type[BaseModel], *, skill: str, action: str) -> dict[str, Any]:
    raw = model.model_json_schema(mode="validation")
    defs = raw.pop("$defs", {})
    body = _inline(raw, defs)
    searched, disabled, popular = automl_lists(model)
    schema = {
        "$schema": DIALECT,
        "$id": f"skillbank://{skill}/schemas/{action}.schema.json",
        "title": f"{skill} {action} spec",
        "description": (model.__doc__ or f"{action} spec").strip().splitlines()[0],
        **{k: v for k, v in body.items() if k != "description"},
        "default": model().model_dump(mode="json"),
        "automl_default_parameters": searched,
        "automl_disabled_parameters": disabled,
        "popular": popular,
    }
    _check_finite(schema)
    return schema
