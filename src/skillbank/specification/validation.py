"""Turn pydantic's errors into findings that name the dotted key, say what is wrong and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from skillbank.errors import InputError
from skillbank.specification.keys import closest_key, find_field


@dataclass(frozen=True)
class SpecProblem:
    key: str
    message: str
    fix: str


def problems(model: type[BaseModel], exc: ValidationError) -> list[SpecProblem]:
    found = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        ctx = err.get("ctx") or {}
        if err["type"] == "rule":
            key = ".".join([*loc, ctx["key"]])
            found.append(SpecProblem(key, ctx["message"], ""))
            continue
        key = ".".join(loc)
        if err["type"] == "extra_forbidden":
            near = closest_key(model, key)
            fix = f"did you mean {near}?" if near else "remove it; see the action's schema for valid keys"
            found.append(SpecProblem(key, "unknown key", fix))
            continue
        got = err.get("input")
        shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
        found.append(SpecProblem(key, f"{err['msg']} (got {shown})", _fix_for(err, _why(model, key))))
    return found


def _why(model: type[BaseModel], key: str) -> str:
    """The field's own description (why its range is what it is), or ''."""
    found = find_field(model, key)
    return (found[2].description or "").strip() if found else ""


def _fix_for(err: dict[str, Any], why: str = "") -> str:
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "literal_error":
        return f"use one of {ctx.get('expected')}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next((f"{word} {ctx[k]}" for k, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")) if k in ctx), "in the allowed range")
        return f"use a value {bound}" + (f": {why}" if why else " (see the schema's minimum / maximum)")
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return "use a value of the field's type (see the schema)"
    return "see the action's schema for what this key accepts"


def validate(model: type[BaseModel], data: Any, *, source: str = "spec") -> BaseModel:
    """Validate a spec dict; on failure raise one InputError listing every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        found = problems(model, exc)
        first = found[0]
        lines = [f"{p.key}: {p.message}" + (f" ({p.fix})" if p.fix else "") for p in found]
        raise InputError(
            f"{len(found)} problem(s) in the {model.__name__} spec:\n    " + "\n    ".join(lines),
            where=f"{source}: {first.key}",
            fix=first.fix,
        ) from None
