"""The search space, read from the packaged train schema (never from the code that generated it).

automl_default_parameters are searched unless the user names others (--param); per field:
minimum / maximum (narrowed by automl_minimum / automl_maximum, log scale with automl_log), enum
with option_weights (weighted choices), math_cond "^ 2" (powers of two), depends_on (skipped when
the field it depends on is off). automl_disabled_parameters are never searched. User ranges
(--range KEY=MIN:MAX) and choices (--choices KEY=A,B) override the schema's. train.optm_lr is searched
over `specification.learning_rate.lr_range` of the base spec (one decade either side of its LoRA or
full fine-tuning default) unless --range names it.

What the user fixed stays fixed: a key the base spec lists in `user_set` (`skillbank spec --set
train.epoch=3`) keeps its value and is left out of the search, unless the user names it (--search KEY,
or --param / --range / --choices KEY). The space lists the fixed values beside the searched ones.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.specification import learning_rate


@dataclass(frozen=True)
class Param:
    key: str
    kind: str  # "float" | "int" | "categorical" | "bool"
    low: float | None = None
    high: float | None = None
    log: bool = False
    pow2: bool = False
    choices: tuple[Any, ...] = ()
    weights: tuple[float, ...] = ()
    depends_on: str | None = None

    def describe(self) -> str:
        if self.kind in ("categorical", "bool"):
            shown = ", ".join(f"{c}" + (f" ({w:g})" if self.weights else "") for c, w in zip(self.choices, self.weights or [None] * len(self.choices)))
            return f"{self.key}: one of {shown}"
        scale = " log" if self.log else (" powers of 2" if self.pow2 else "")
        return f"{self.key}: {self.kind} {self.low:g}..{self.high:g}{scale}"

    def to_dict(self) -> dict[str, Any]:
        """The parameter as a dry run's plan shows it (ranges, scale, choices and their weights)."""
        return {"key": self.key, "kind": self.kind, "low": self.low, "high": self.high, "log": self.log, "pow2": self.pow2,
                "choices": list(self.choices), "weights": list(self.weights), "depends_on": self.depends_on,
                "describe": self.describe()}


@dataclass
class SearchSpace:
    params: list[Param]
    skipped: dict[str, str] = field(default_factory=dict)  # key -> why
    fixed: dict[str, Any] = field(default_factory=dict)  # the base spec's user_set: key -> the user's value
    left_out: list[str] = field(default_factory=list)  # fixed keys the search would have searched

    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def fixed_list(self) -> list[dict[str, Any]]:
        """The user's values as the dry run shows them: each key, its value, whether the search left it out."""
        searched = self.keys()
        return [{"key": k, "value": v, "left_out_of_search": k in self.left_out, "searched": k in searched,
                 "describe": f"{k}={json.dumps(v)} (yours" + (f": not searched; --search {k} searches it)" if k in self.left_out else
                                                           ": searched as you asked, the baseline trains yours)" if k in searched else ")")}
                for k, v in self.fixed.items()]


def field_schema(schema: dict[str, Any], key: str) -> dict[str, Any] | None:
    node = schema
    for part in key.split("."):
        props = node.get("properties")
        if props is None:
            for option in node.get("anyOf", []):
                if "properties" in option:
                    props = option["properties"]
        if not props or part not in props:
            return None
        node = props[part]
    return node


def _numeric(node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    options = node.get("anyOf", [node])
    for option in options:
        if option.get("type") in ("number", "integer"):
            return ("float" if option["type"] == "number" else "int"), option
    return None, {}


def _enum(node: dict[str, Any]) -> list[Any] | None:
    for option in node.get("anyOf", [node]):
        if "enum" in option:
            return list(option["enum"])
    return None


def _setting(schema: dict[str, Any], key: str) -> bool:
    """A number, a flag or a choice (what a search could vary), not a path or a prompt."""
    node = field_schema(schema, key)
    return node is not None and (_numeric(node)[0] is not None or _enum(node) is not None or node.get("type") == "boolean")


def _lookup(spec: dict[str, Any], key: str) -> Any:
    node: Any = spec
    for part in key.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def param_from_schema(schema: dict[str, Any], key: str, *, user_range: tuple[float, float] | None = None,
                      user_choices: list[str] | None = None) -> Param:
    node = field_schema(schema, key)
    if node is None:
        raise InputError(f"{key} is not a key of the train schema", where=key, fix="see automl_default_parameters in the schema")
    depends = node.get("depends_on")
    enum = _enum(node)
    if user_choices is not None or enum is not None or node.get("type") == "boolean":
        if node.get("type") == "boolean":
            choices: list[Any] = [True, False]
            weights: list[float] = []
        else:
            choices = list(enum or [])
            weights = list(node.get("option_weights", []))
        if user_choices is not None:
            allowed = {str(c): c for c in choices} if choices else None
            picked = []
            for text in user_choices:
                if allowed is not None and text not in allowed:
                    raise InputError(f"{text!r} is not a valid value of {key}", where=f"--choices {key}", fix=f"one of {list(allowed)}")
                picked.append(allowed[text] if allowed else text)
            weights = [weights[choices.index(c)] for c in picked] if weights and len(weights) == len(choices) else []
            choices = picked
        return Param(key, "bool" if node.get("type") == "boolean" else "categorical", choices=tuple(choices),
                     weights=tuple(weights), depends_on=depends)
    kind, option = _numeric(node)
    if kind is None:
        raise InputError(f"{key} is neither numeric nor an enum: it cannot be searched", where=key)
    low = node.get("automl_minimum", option.get("minimum", option.get("exclusiveMinimum")))
    high = node.get("automl_maximum", option.get("maximum", option.get("exclusiveMaximum")))
    if user_range is not None:
        low, high = user_range
        valid_low = option.get("minimum", option.get("exclusiveMinimum", -math.inf))
        valid_high = option.get("maximum", option.get("exclusiveMaximum", math.inf))
        if low < valid_low or high > valid_high:
            raise InputError(f"range {low}..{high} leaves the valid range of {key} ({valid_low}..{valid_high})", where=f"--range {key}")
    if low is None or high is None:
        raise InputError(f"{key} has no search range in the schema", where=key, fix=f"pass --range {key}=MIN:MAX")
    if low >= high:
        raise InputError(f"empty range {low}..{high} for {key}", where=f"--range {key}", fix="MIN must be below MAX")
    pow2 = node.get("math_cond") == "^ 2"
    return Param(key, kind, float(low), float(high), log=bool(node.get("automl_log")), pow2=pow2, depends_on=depends)


def load_schema(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError("AutoML is enabled but not runnable until schemas are generated", where=str(path),
                         fix="run `skillbank schemas generate`")
    return json.loads(path.read_text(encoding="utf-8"))


def build_space(schema: dict[str, Any], base_spec: dict[str, Any], *, params: list[str] | None = None,
                ranges: dict[str, tuple[float, float]] | None = None, choices: dict[str, list[str]] | None = None,
                search: list[str] | None = None) -> SearchSpace:
    """`search`: keys searched besides the rest (--search), the base spec's user_set included."""
    ranges, choices, search = ranges or {}, choices or {}, list(search or [])
    disabled = set(schema.get("automl_disabled_parameters", []))
    keys = list(params) if params else list(schema.get("automl_default_parameters", []))
    keys += [k for k in [*ranges, *choices, *search] if k not in keys]
    named = {*(params or []), *ranges, *choices, *search}  # asked for by name: searched even when the user fixed it
    fixed = {k: _lookup(base_spec, k) for k in base_spec.get("user_set") or [] if _setting(schema, k)}
    space = SearchSpace(params=[], fixed=fixed)
    for key in keys:
        if key in fixed and key not in named:
            space.left_out.append(key)
            continue
        if key in disabled:
            raise InputError(f"{key} is in automl_disabled_parameters: it is never searched", where=f"--param {key}",
                             fix="search other parameters (see the schema's automl_default_parameters)")
        param = param_from_schema(schema, key, user_range=ranges.get(key), user_choices=choices.get(key))
        if key == learning_rate.KEY and key not in ranges and not choices.get(key):  # LoRA or full fine-tuning: its own decade pair
            low, high = learning_rate.lr_range(base_spec)
            param = replace(param, low=low, high=high)
        if param.depends_on and param.depends_on not in keys and not _lookup(base_spec, param.depends_on):
            space.skipped[key] = f"depends on {param.depends_on}, which is off in the base spec"
            continue
        space.params.append(param)
    if not space.params:
        also = f" (the spec fixes {', '.join(space.left_out)}: --search KEY searches one anyway)" if space.left_out else ""
        raise InputError(f"nothing to search{also}", where="--param",
                         fix="name parameters with --param or --search, or enable the ones they depend on (e.g. --set policy.lora.enable=true in the spec)")
    return space


def exclusive_apply(model):
    """Sampled values into a trial's spec as `spec --set` puts them: typed by the model, and a value for
    one of an exclusive pair clears the other (fps sampled on an nframes spec trains with fps)."""
    from skillbank.specification.overrides import apply_overrides

    def apply(spec: dict[str, Any], values: dict[str, Any]) -> None:
        apply_overrides(model, spec, values)

    return apply


def null_base_notes(skill: str, base: dict[str, Any], space) -> list[str]:
    """A searched key the base spec leaves null: the baseline keeps it null (nothing is sampled for it);
    the other trials sample it, clearing its exclusive partner."""
    from skillbank.specification.keys import find_field
    from skillbank.specification.overrides import get_dotted
    from skillbank.specification.registry import spec_model

    model, notes = spec_model(skill, "train"), []
    for key in space.keys():
        if get_dotted(base, key) is not None:
            continue
        found = find_field(model, key)
        partner = None
        if found is not None:
            owner, name, _ = found
            prefix = key.rsplit(".", 1)[0] + "." if "." in key else ""
            partner = next((prefix + (b if name == a else a) for a, b in getattr(owner, "exclusive", ()) if name in (a, b)), None)
        if partner and get_dotted(base, partner) is not None:
            notes.append(f"{key} is null in the base spec ({partner}={get_dotted(base, partner)}): the baseline trains with "
                         f"{partner}; the other trials sample {key} and clear {partner}")
        else:
            notes.append(f"{key} is null in the base spec: the baseline keeps it null; the other trials sample it")
    return notes
