"""Markdown parameter tables of an action, from its spec model (spliced into references/parameters.md)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from skillbank.specification.keys import iter_fields


def _type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " \\| ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "anyOf" in schema:
        return " or ".join(_type_name(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array" and "items" in schema:
        return f"list[{_type_name(schema['items'])}]"
    return str(kind)


def _range(schema: dict[str, Any]) -> str:
    for option in schema.get("anyOf", [schema]):
        low = option.get("minimum", option.get("exclusiveMinimum"))
        high = option.get("maximum", option.get("exclusiveMaximum"))
        if low is not None or high is not None:
            left = "(" if "exclusiveMinimum" in option else "["
            right = ")" if "exclusiveMaximum" in option else "]"
            return f"{left}{'' if low is None else low}, {'' if high is None else high}{right}"
    return ""


def _automl(extra: dict[str, Any]) -> str:
    if "automl_enabled" not in extra:
        return ""
    if not extra["automl_enabled"]:
        return "never"
    where = "default" if extra.get("automl_default") else "on request"
    parts = [where]
    if "automl_minimum" in extra:
        parts.append(f"{extra['automl_minimum']}..{extra['automl_maximum']}")
    if extra.get("automl_log"):
        parts.append("log")
    if "math_cond" in extra:
        parts.append(f"`{extra['math_cond']}`")
    if "option_weights" in extra:
        parts.append(f"weights {extra['option_weights']}")
    return ", ".join(parts)


def parameter_table(model: type[BaseModel]) -> str:
    default = model().model_dump(mode="json")
    rows = ["| key | type | default | valid | AutoML | description |", "| --- | --- | --- | --- | --- | --- |"]
    for key, info in iter_fields(model):
        value: Any = default
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        schema = model.model_json_schema()  # cheap enough for a maintainer command
        field_schema = _field_schema(schema, key)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        star = " *" if extra.get("popular") else ""
        depends = f" Needs `{extra['depends_on']}`." if "depends_on" in extra else ""
        description = (info.description or "").replace("|", "\\|") + depends
        rows.append(
            f"| `{key}`{star} | {_type_name(field_schema)} | `{json.dumps(value)}` | {_range(field_schema)} | {_automl(extra)} | {description} |"
        )
    return "\n".join(rows) + "\n\n`*` popular parameters. AutoML ranges are search ranges; `valid` is what the spec accepts.\n"


def _field_schema(schema: dict[str, Any], key: str) -> dict[str, Any]:
    defs = schema.get("$defs", {})
    node = schema
    for part in key.split("."):
        node = _deref(node, defs)["properties"][part]
    return _deref(node, defs)


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return defs[node["$ref"].rsplit("/", 1)[-1]]
    for option in node.get("anyOf", []):
        if "$ref" in option:
            return defs[option["$ref"].rsplit("/", 1)[-1]]
    return node
