"""Reading and writing spec files (YAML for specs, TOML for the evaluate config)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.spec.validation import validate


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """Load a YAML, JSON or TOML spec file into a dict (never modifies it)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"spec file not found: {p}", where=str(p), fix="pass the path of a spec written by `skillbank spec -o FILE`")
    text = p.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot parse spec: {exc}", where=str(p), fix="fix the syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError("a spec must be a mapping of sections", where=str(p), fix="start from the skill's spec template")
    return data


def load_spec(path: str | Path, model: type[BaseModel]) -> BaseModel:
    return validate(model, read_spec_file(path), source=str(path))


def spec_with_flags(model: type[BaseModel], path: str | Path | None, values: dict[str, Any]) -> BaseModel:
    """A command's spec: the spec file (or the model's defaults) with the flags the user gave
    (`values`: spec key -> value, None for a flag not given) applied as `--set` overrides (setting
    one of an exclusive pair clears the other), validated as one spec: a wrong flag gets the same
    error, naming the same key, as a wrong value in the file."""
    from skillbank.spec.overrides import apply_overrides

    data = read_spec_file(path) if path else {}
    apply_overrides(model, data, {key: value for key, value in values.items() if value is not None})
    return validate(model, data, source=str(path) if path else "command line")


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


def write_spec(path: str | Path, spec: BaseModel | dict[str, Any]) -> Path:
    data = spec.model_dump(mode="json") if isinstance(spec, BaseModel) else spec
    return atomic.write_text(path, dump_yaml(data))
