"""The train action policy of the seed, as code.

Explicit automl_policy wins; else the request's wording; else "auto". With auto, a model whose
skill_info says automl_enabled and whose train schema and template are packaged (and parse) goes to
`tao-skill-bank:tao-run-automl`; otherwise training is direct. Non-train actions stay with the model
skill. The override is for this run only: nothing in the skill changes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from skillbank.errors import InputError
from skillbank.paths import bank_root, skill_dir
from skillbank.routing.phrases import policy_from_request
from skillbank.skillinfo import schema_path, skill_info, template_path

POLICIES = ("auto", "off")
NOT_RUNNABLE = "AutoML is enabled but not runnable until schemas are generated"


@dataclass(frozen=True)
class RouteDecision:
    skill: str
    action: str
    automl_policy: str
    policy_source: str
    route: str
    target: str
    runnable: bool
    reason: str
    skill_dir: str
    automl_enabled: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _packaged(skill: str) -> str | None:
    """None when the train schema and template exist and parse, else what is missing."""
    schema, template = schema_path(skill, "train"), template_path(skill, "train")
    for path in (schema, template):
        if not path.is_file():
            return f"{path.name} is missing"
    try:
        json.loads(schema.read_text(encoding="utf-8"))
        yaml.safe_load(template.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        return f"a packaged train schema or template does not parse ({exc.__class__.__name__})"
    return None


def resolve_policy(automl_policy: str | None, request: str | None) -> tuple[str, str]:
    if automl_policy is not None:
        if automl_policy not in POLICIES:
            raise InputError(f"automl_policy must be auto or off, got {automl_policy!r}", where="--automl-policy", fix="pass auto or off")
        return automl_policy, "explicit"
    from_request = policy_from_request(request)
    if from_request is not None:
        return from_request, "request"
    return "auto", "default"


def route(*, skill: str, action: str, request: str | None = None, automl_policy: str | None = None) -> RouteDecision:
    folder = skill_dir(skill)
    info = skill_info(skill)
    actions = info.get("actions", {})
    if action not in actions:
        raise InputError(f"skill {skill} has no action {action!r}", where="--action", fix=f"one of: {', '.join(actions)}")
    policy, source = resolve_policy(automl_policy, request)
    enabled = bool(info.get("automl_enabled"))
    common = dict(skill=skill, action=action, automl_policy=policy, policy_source=source,
                  skill_dir=folder.relative_to(bank_root()).as_posix(), automl_enabled=enabled)
    if action != "train":
        return RouteDecision(**common, route="model", target=skill, runnable=True,
                             reason=f"{action} is not a train action: it stays with the model skill")
    if policy == "off":
        return RouteDecision(**common, route="direct", target=skill, runnable=True,
                             reason=f"automl_policy off ({source}): direct model training for this run only")
    if not enabled:
        return RouteDecision(**common, route="direct", target=skill, runnable=True,
                             reason="automl_enabled is false for this model: direct model training")
    missing = _packaged(skill)
    if missing:
        return RouteDecision(**common, route="direct", target=skill, runnable=False,
                             reason=f"{NOT_RUNNABLE} ({missing}; run `skillbank schemas generate`)")
    return RouteDecision(**common, route="automl", target=info.get("automl_target", "tao-skill-bank:tao-run-automl"),
                         runnable=True, reason=f"automl_policy auto ({source}), automl_enabled, train schema and template packaged")
