"""The base of every spec section.

Unknown keys are errors (cosmos-rl silently drops them). `exclusive` declares pairs of fields of
which exactly one must be set (fps / nframes; at most one with `exclusive_may_be_unset`): the rule, its error, and the spec builder's
"setting one clears the other" all read this one declaration.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from skillbank.specification.meta import rule_error


def _exclusive_in_schema(schema: dict[str, Any], cls: type["Section"]) -> None:
    """Mirror `exclusive` in the JSON Schema: both members non-null is invalid."""
    for first, second in getattr(cls, "exclusive", ()):
        schema.setdefault("allOf", []).append(
            {
                "description": f"exactly one of {first} and {second}",
                "not": {"required": [first, second], "properties": {first: {"not": {"type": "null"}}, second: {"not": {"type": "null"}}}},
            }
        )


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, json_schema_extra=_exclusive_in_schema)

    exclusive: ClassVar[tuple[tuple[str, str], ...]] = ()
    exclusive_may_be_unset: ClassVar[bool] = False  # both null allowed: "from the model's recipe, else the default"

    @model_validator(mode="before")
    @classmethod
    def _naming_one_of_a_pair_unsets_the_other(cls, data: Any) -> Any:
        """A section that names only `nframes` means "not fps", whatever fps defaults to."""
        if isinstance(data, dict) and cls.exclusive:
            for first, second in cls.exclusive:
                if (first in data) != (second in data):
                    data = {**data, (second if first in data else first): None}
        return data

    @model_validator(mode="after")
    def _exactly_one_of_each_exclusive_pair(self) -> "Section":
        for first, second in self.exclusive:
            a, b = getattr(self, first), getattr(self, second)
            if a is None and b is None and self.exclusive_may_be_unset:
                continue
            if (a is None) == (b is None):
                why = (
                    "both are set; qwen_vl_utils asserts 'Only accept either fps or nframes'"
                    if a is not None
                    else "neither is set"
                )
                raise rule_error(first, f"set exactly one of {first} and {second} ({why})")
        return self
