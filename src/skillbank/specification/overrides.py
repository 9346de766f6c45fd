"""Dotted overrides on a nested spec dict: walk the path, assign at the leaf, coerce by field type.

`custom.val_dataset.annotation_path` works although the template holds `val_dataset: null`: missing
or null intermediate sections are created. Setting one member of an `exclusive` pair (fps /
nframes) to a value clears the other unless the same call sets it too.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from pydantic import BaseModel, TypeAdapter, ValidationError

from skillbank.errors import InputError
from skillbank.specification.keys import closest_key, find_field


def parse_assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InputError(f"override {text!r} is not KEY=VALUE", where="--set", fix="write e.g. --set train.optm_lr=2e-5")
    return key.strip(), value.strip()


def _accepts_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return all(isinstance(a, str) for a in typing.get_args(annotation))
    if origin in (Union, types.UnionType):
        return any(_accepts_str(a) for a in typing.get_args(annotation) if a is not type(None))
    return False


def coerce(model: type[BaseModel], key: str, raw: Any) -> Any:
    """Convert a command-line string to the field's type (JSON accepted for lists and null)."""
    found = find_field(model, key)
    assert found is not None
    _, _, info = found
    annotation = info.annotation
    value: Any = raw
    if isinstance(raw, str):
        if raw in ("null", "~") or (raw in ("none", "None") and not _accepts_str(annotation)):
            value = None
        elif not _accepts_str(annotation):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                origin = typing.get_origin(annotation)
                value = [s.strip() for s in raw.split(",") if s.strip()] if origin in (list, tuple) else raw
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{err['msg']} (got {raw!r})", where=key, fix=f"give {key} a value of type {_describe(annotation)}") from None


def _describe(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def resolve_key(model: type[BaseModel], key: str, shorthands: dict[str, str], *,
                keys_at: str = "see the action's schema (skillbank spec --help lists the shorthands)") -> str:
    """The dotted key a --set KEY names (a shorthand resolved); unknown: InputError with the closest key, else `keys_at`."""
    full = shorthands.get(key, key)
    if find_field(model, full) is None:
        near = closest_key(model, full, extra=list(shorthands))
        raise InputError(f"unknown key {key!r}", where=key, fix=f"did you mean {near}?" if near else keys_at)
    return full


def resolve_all(model: type[BaseModel], assignments: list[str] | tuple[str, ...], shorthands: dict[str, str] | None = None,
                **keys_at: str) -> dict[str, Any]:
    """--set KEY=VALUE texts as {dotted key: raw value} of `model` (shorthands resolved; an unknown key: InputError)."""
    out: dict[str, Any] = {}
    for text in assignments:
        key, value = parse_assignment(text)
        out[resolve_key(model, key, shorthands or {}, **keys_at)] = value
    return out


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def get_dotted(data: Mapping[str, Any], key: str, default: Any = None) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def apply_overrides(model: type[BaseModel], data: dict[str, Any], overrides: dict[str, Any]) -> list[str]:
    """Apply {dotted key: value} in place; return notes about implied changes (cleared partners)."""
    notes = []
    for key, raw in overrides.items():
        set_dotted(data, key, coerce(model, key, raw))
    for key in overrides:
        owner, name, _ = find_field(model, key)  # type: ignore[misc]
        prefix = key.rsplit(".", 1)[0] + "." if "." in key else ""
        for first, second in getattr(owner, "exclusive", ()):
            if name in (first, second):
                partner = prefix + (second if name == first else first)
                if get_dotted(data, key) is not None and partner not in overrides and get_dotted(data, partner) is not None:
                    set_dotted(data, partner, None)
                    notes.append(f"{partner} set to null because {key} is set (exactly one of the two)")
    return notes
