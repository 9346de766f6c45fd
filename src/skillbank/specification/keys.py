"""Dotted keys of a spec model: listing them, finding a field by key, suggesting the closest one."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator
from typing import Any, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (unwrapping `X | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = submodel(arg)
            if found is not None:
                return found
    return None


def iter_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """Every leaf field as (dotted key, FieldInfo), depth first in declaration order."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        child = submodel(info.annotation)
        if child is None:
            yield key, info
        else:
            yield from iter_fields(child, f"{key}.")


def leaf_keys(model: type[BaseModel]) -> list[str]:
    return [key for key, _ in iter_fields(model)]


def find_field(model: type[BaseModel], key: str) -> tuple[type[BaseModel], str, FieldInfo] | None:
    """The (owning model, field name, FieldInfo) of a dotted key, or None when it does not exist."""
    parts = key.split(".")
    current: type[BaseModel] | None = model
    for i, part in enumerate(parts):
        if current is None or part not in current.model_fields:
            return None
        info = current.model_fields[part]
        if i == len(parts) - 1:
            return current, part, info
        current = submodel(info.annotation)
    return None


def closest_key(model: type[BaseModel], key: str, extra: list[str] = ()) -> str | None:
    """The valid key nearest to a mistyped one: by leaf name first, then by the whole path."""
    keys = leaf_keys(model) + list(extra)
    leaf = key.rsplit(".", 1)[-1]
    by_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
    if by_leaf:
        return by_leaf[0]
    match = difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
    if match:
        return match[0]
    leaves = {k.rsplit(".", 1)[-1]: k for k in keys}
    match = difflib.get_close_matches(leaf, list(leaves), n=1, cutoff=0.6)
    return leaves[match[0]] if match else None
