"""Field metadata shared by every spec model: a description plus the AutoML keywords.

`param()` is the only way spec fields are declared, so each field's validity bounds (pydantic
`ge`/`le`, emitted as JSON Schema minimum/maximum) and its AutoML search metadata sit side by side:

- automl: "default" (searched unless the user names other parameters), "enabled" (searchable on
  request), "disabled" (never searched), or None (not a hyperparameter).
- search: (low, high) search range when narrower than the validity bounds; log: sample on a log scale.
- option_weights: sampling weights of an enum, in the enum's order.
- math_cond: "^ 2" restricts integer search to powers of two.
- depends_on: a dotted key this field only matters with (e.g. LoRA rank needs policy.lora.enable).
- popular: shown first to agents and in the parameter tables.

Fields that name a file or folder are typed `PathStr` (or `ModelRefStr`: a model folder or a hub id):
that one declaration is what `--path-map LOCAL=REMOTE` rewrites (skillbank.specification.pathmap); the JSON
Schema still says "string".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

AutoML = Literal["default", "enabled", "disabled"]


@dataclass(frozen=True)
class SpecPath:
    """Marks a spec field that names a path on the machine that runs the job; `model`: it may also
    name a hub model (owner/repo, hf_model://), which is never a path."""

    model: bool = False


PathStr = Annotated[str, SpecPath()]
ModelRefStr = Annotated[str, SpecPath(model=True)]


def param(
    default: Any = ...,
    description: str = "",
    *,
    default_factory: Any = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    automl: AutoML | None = None,
    search: tuple[float, float] | None = None,
    log: bool = False,
    option_weights: list[float] | None = None,
    math_cond: str | None = None,
    depends_on: str | None = None,
    popular: bool = False,
    examples: list[Any] | None = None,
) -> Any:
    extra: dict[str, Any] = {}
    if automl is not None:
        extra["automl_enabled"] = automl != "disabled"
        extra["automl_default"] = automl == "default"
    if search is not None:
        extra["automl_minimum"], extra["automl_maximum"] = search
    if log:
        extra["automl_log"] = True
    if option_weights is not None:
        extra["option_weights"] = option_weights
    if math_cond is not None:
        extra["math_cond"] = math_cond
    if depends_on is not None:
        extra["depends_on"] = depends_on
    if popular:
        extra["popular"] = True
    kwargs: dict[str, Any] = dict(description=description, ge=ge, gt=gt, le=le, lt=lt, json_schema_extra=extra or None)
    if examples is not None:
        kwargs["examples"] = examples
    if default_factory is not None:
        return Field(default_factory=default_factory, **kwargs)
    return Field(default, **kwargs)


def rule_error(key: str, message: str) -> Exception:
    """A cross-field rule violation that names the dotted key to fix (kept in the error's ctx)."""
    from pydantic_core import PydanticCustomError

    return PydanticCustomError("rule", "{message}", {"message": message, "key": key})
