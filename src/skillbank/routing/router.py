"""The train action policy of the seed, as code.

A train request that asks for RL (GRPO, reinforcement learning; "no RL, just SFT" does not) goes to
the rl action. A train request to improve the model with more data from a pool ("mine my pool", "it
keeps failing on X, fix it with more data", "run DEFT") goes to `tao-skill-bank:tao-run-deft`. Explicit automl_policy wins; else the request's wording; else "auto". With auto, a
model whose skill_info says automl_enabled, whose action schema and template are packaged (and
parse) and whose schema marks parameters for AutoML (automl_default_parameters) goes to
`tao-skill-bank:tao-run-automl`; otherwise training is direct. Other actions stay with the model
skill. The override is for this run only: nothing in the skill changes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from skillbank.errors import InputError
from skillbank.paths import bank_root, skill_dir
from skillbank.routing.phrases import data_import_from_request, deft_from_request, policy_from_request, rl_from_request
from skillbank.skillinfo import schema_path, skill_info, template_path

POLICIES = ("auto", "off")
NOT_RUNNABLE = "AutoML is enabled but not runnable until schemas are generated"
TRAINING_ACTIONS = ("train", "rl")  # actions that train, so AutoML may take them
DATA_IMPORT_STEP = "skillbank data import SOURCE --out DIR; skillbank data stats DIR/train/annotations.json; then spec --dataset-root DIR"
DEFT_TARGET = "tao-skill-bank:tao-run-deft"  # improve a model with more data from a pool


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
    action_source: str = "explicit"  # "request": a train request that asked for RL became the rl action
    data_step: str = ""  # the request asks to convert / import a dataset: run this first (DATA_IMPORT_STEP)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _packaged(skill: str, action: str = "train") -> str | None:
    """None when the action's schema and template exist and parse, else what is missing."""
    schema, template = schema_path(skill, action), template_path(skill, action)
    for path in (schema, template):
        if not path.is_file():
            return f"{path.name} is missing"
    try:
        json.loads(schema.read_text(encoding="utf-8"))
        yaml.safe_load(template.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        return f"a packaged {action} schema or template does not parse ({exc.__class__.__name__})"
    return None


def _searched(skill: str, action: str) -> bool:
    """The action's schema marks parameters AutoML searches by default (read after _packaged)."""
    schema = json.loads(schema_path(skill, action).read_text(encoding="utf-8"))
    return bool(schema.get("automl_default_parameters"))


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
    action_source = "explicit"
    if action == "train" and "rl" in actions and rl_from_request(request):
        action, action_source = "rl", "request"
    policy, source = resolve_policy(automl_policy, request)
    enabled = bool(info.get("automl_enabled"))
    common = dict(skill=skill, action=action, automl_policy=policy, policy_source=source,
                  skill_dir=folder.relative_to(bank_root()).as_posix(), automl_enabled=enabled, action_source=action_source,
                  data_step=DATA_IMPORT_STEP if data_import_from_request(request) else "")
    what = "RL (GRPO) training" if action == "rl" else "model training"
    if action_source == "request":
        what += " (the request asks for RL: the rl action)"
    if action not in TRAINING_ACTIONS:
        return RouteDecision(**common, route="model", target=skill, runnable=True,
                             reason=f"{action} is not a train action: it stays with the model skill")
    if action == "train" and action_source == "explicit" and deft_from_request(request):
        return RouteDecision(**common, route="deft", target=DEFT_TARGET, runnable=True,
                             reason="the request asks to improve the model with more data from a pool (mine it, fix failures with more data): "
                                    "the DEFT loop finds the gaps, mines the pool and retrains; not AutoML, which searches hyperparameters on fixed data")
    if policy == "off":
        return RouteDecision(**common, route="direct", target=skill, runnable=True,
                             reason=f"automl_policy off ({source}): direct {what} for this run only")
    if not enabled:
        return RouteDecision(**common, route="direct", target=skill, runnable=True,
                             reason=f"automl_enabled is false for this model: direct {what}")
    missing = _packaged(skill, action)
    if missing:
        return RouteDecision(**common, route="direct", target=skill, runnable=False,
                             reason=f"{NOT_RUNNABLE} ({missing}; run `skillbank schemas generate`)")
    if not _searched(skill, action):
        return RouteDecision(**common, route="direct", target=skill, runnable=True,
                             reason=f"the {action} schema marks no parameters for AutoML (automl_default_parameters is empty): direct {what}")
    return RouteDecision(**common, route="automl", target=info.get("automl_target", "tao-skill-bank:tao-run-automl"),
                         runnable=True, reason=f"automl_policy auto ({source}), automl_enabled, {action} schema and template packaged")
