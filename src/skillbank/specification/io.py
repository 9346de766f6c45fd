"""Reading and writing spec files: YAML, JSON or TOML (the evaluate config), told by the file name."""

from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.specification.validation import validate


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """Load a YAML, JSON or TOML spec file into a dict (never modifies it)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"spec file not found: {p}", where=str(p), fix="pass the path of a spec written by `skillbank spec -o FILE`")
    text = p.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot parse spec: {exc}", where=str(p), fix="fix the syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError("a spec must be a mapping of sections", where=str(p), fix="start from the skill's spec template")
    return data


@dataclass(frozen=True)
class LoadedSpec:
    """A spec file read and parsed once: a command passes it down (to preflight, the path map, the model)
    instead of its path, so no one reads the file again. `data` is the file as read: never changed
    (`raw()` hands out copies)."""

    path: str
    data: dict[str, Any]

    @classmethod
    def read(cls, path: str | Path) -> "LoadedSpec":
        return cls(str(path), read_spec_file(path))

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)

    def recorded_map(self) -> Any:
        """The path map the spec records (paths.map) when it applies on this machine (an empty PathMap otherwise)."""
        from skillbank.specification.pathmap import recorded

        return recorded(self.data)

    def model(self, model: type[BaseModel]) -> BaseModel:
        """The validated spec as this machine reads it: a map the spec records (paths.map, written by
        `skillbank spec --path-map`) moves the node's paths to their LOCAL side (skillbank.specification.pathmap)."""
        from skillbank.specification.pathmap import local_view

        return validate(model, local_view(self.raw(), model), source=self.path)


def load_spec(path: str | Path, model: type[BaseModel]) -> BaseModel:
    """The validated spec of a file (LoadedSpec.model): read, its recorded path map applied, validated."""
    return LoadedSpec.read(path).model(model)


def spec_with_flags(model: type[BaseModel], path: str | Path | None, values: dict[str, Any]) -> BaseModel:
    """A command's spec: the spec file (or the model's defaults) with the flags the user gave
    (`values`: spec key -> value, None for a flag not given) applied as `--set` overrides (setting
    one of an exclusive pair clears the other), validated as one spec: a wrong flag gets the same
    error, naming the same key, as a wrong value in the file."""
    from skillbank.specification.overrides import apply_overrides

    from skillbank.specification.pathmap import local_view

    data = local_view(read_spec_file(path), model) if path else {}
    apply_overrides(model, data, {key: value for key, value in values.items() if value is not None})
    return validate(model, data, source=str(path) if path else "command line")


def dump_yaml(data: dict[str, Any]) -> str:
    return atomic.with_newline(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120))


def drop_none(value: Any) -> Any:
    """TOML has no null: leave unset keys out (the model's default, or cosmos-rl's, applies)."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [drop_none(v) for v in value]
    return value


def spec_text(path: str | Path, data: dict[str, Any], model: type[BaseModel] | None = None) -> str:
    """A spec in the format its file name says: .toml TOML, .json JSON, anything else YAML.

    TOML leaves null keys out; with `model` the result is read back to prove it means the same spec
    (an exclusive pair's partner reads back as unset), else the key that would change is an InputError."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if suffix != ".toml":
        return dump_yaml(data)
    import tomli_w

    kept = drop_none(data)
    if model is not None:
        back = validate(model, kept, source=str(path)).model_dump(mode="json")
        changed = _first_difference(data, back)
        if changed is not None:
            key, value = changed
            raise InputError(
                f"TOML has no null: {key} = null would read back as {value!r}",
                where=key,
                fix=f"write YAML or JSON instead (-o {Path(path).with_suffix('.yaml').name}), or give {key} a value",
            )
    return atomic.with_newline(tomli_w.dumps(kept))


def _first_difference(a: Any, b: Any, prefix: str = "") -> tuple[str, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            found = _first_difference(a[key], b.get(key), f"{prefix}{key}.")
            if found is not None:
                return found
        return None
    return None if a == b else (prefix.rstrip("."), b)


def write_spec(path: str | Path, spec: BaseModel | dict[str, Any], model: type[BaseModel] | None = None) -> Path:
    """Write a spec atomically in the format of the file's extension (see spec_text)."""
    if isinstance(spec, BaseModel):
        model, data = model or type(spec), spec.model_dump(mode="json")
    else:
        data = spec
    return atomic.write_text(path, spec_text(path, data, model))
