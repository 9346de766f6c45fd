"""The train action policy of the seed, as code.

A train request that asks for RL (GRPO, reinforcement learning; "no RL, just SFT" does not) goes to
the rl action. A train request to improve the model with more data from a pool ("mine my pool", "it
keeps failing on X, fix it with more data", "run DEFT") goes to `tao-skill-bank:tao-run-deft`. Explicit automl_policy wins; else the request's wording; else "auto". With auto, a
model whose skill_info says automl_enabled, whose action schema and template are packaged (and
parse) and whose schema marks parameters for AutoML (automl_default_parameters) goes to
`tao-skill-bank:tao-run-automl`; otherwise training is direct. Other actions stay with the model
skill. The override is for this run only: nothing in the skill changes.

A request that names a model of the model table (skillbank.models.table: its id, or a short name such as
"Cosmos-Reason2-8B" or "Qwen2.5-VL-3B") sets `model` in the route, and every next step it prints (plan_step,
data_step: the spec and plan commands) carries `--set model=ID`; a request that names none leaves the
skill's default (the template's) in place.

A train or rl request that asks how many GPUs, how long, or whether it fits goes to `skillbank plan`
(route "plan"): sizing comes before a launch. A request whose layout spans several nodes (its words,
--nodes, or the spec's dp_replicate_size) is never handed to AutoML: a study runs its trials one at a
time on one node (`submit --action automl` refuses more), so it trains directly and the reason says
why and how to search on one node first.

What the request fixes (its epochs, GPU count, LoRA on or off: routing.fixed) is named in `fixed`, each
with the `skillbank spec --set` that writes it into the spec, where it stays fixed: AutoML leaves the
spec's user_set out of its search. A route to AutoML says in its reason how to get one direct run instead.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from skillbank.errors import InputError
from skillbank.models import table
from skillbank.paths import bank_root, skill_dir
from skillbank.routing.fixed import fixed_from_request, fixed_keys
from skillbank.routing.phrases import (data_import_from_request, deft_from_request, failing_on, nodes_from_request, plan_from_request, policy_from_request,
                                       rl_from_request)
from skillbank.skillinfo import schema_path, skill_info, template_path

POLICIES = ("auto", "off")
NOT_RUNNABLE = "AutoML is enabled but not runnable until schemas are generated"
TRAINING_ACTIONS = ("train", "rl")  # actions that train, so AutoML may take them
DATA_IMPORT_STEP = "skillbank data import SOURCE --out DIR; skillbank data stats DIR/train/annotations.json; then spec --dataset-root DIR"
DEFT_TARGET = "tao-skill-bank:tao-run-deft"  # improve a model with more data from a pool
DEFT_STEP = ("skillbank deft init --model MODEL --pool POOL --benchmark BENCHMARK --out DIR{adopt}; "
             "skillbank deft --config DIR/deft.yaml --dry-run")  # route "deft": the loop's first commands (tao-run-deft)
PLAN_STEP = ("skillbank spec --action train --dataset-root DIR{sets} -o train.yaml; skillbank plan --spec train.yaml{nodes} --json "
             "(a dataset only described: skillbank plan --records N --clip-seconds S{sets}{nodes} --json); then train where after_plan says")
DIRECT_RUN = "one direct run instead: skillbank train --spec train.yaml --automl-policy off (or say 'no AutoML')"


def plan_step(model: str | None = None, nodes: int | None = None, fixed: list[dict[str, Any]] | None = None) -> str:
    """PLAN_STEP with the model the request names (`--set model=ID`), the request's fixed values as --set flags (a spec
    that records them: AutoML does not search them) and the nodes it states (`--nodes N`)."""
    sets = (f" --set model={model}" if model else "") + "".join(f" --set {f['set']}" for f in fixed or [])
    return PLAN_STEP.format(sets=sets, nodes=f" --nodes {nodes}" if nodes else "")


def data_step(model: str | None = None) -> str:
    """DATA_IMPORT_STEP with the model the request names carried into the spec command."""
    return DATA_IMPORT_STEP.replace("spec --dataset-root DIR", f"spec --dataset-root DIR --set model={model}") if model else DATA_IMPORT_STEP


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
    plan_step: str = ""  # route "plan": the commands that answer it (PLAN_STEP)
    nodes: int | None = None  # the nodes the request, --nodes or the spec asks to train on (None: not said)
    nodes_source: str = ""  # what said so
    after_plan: dict[str, Any] | None = None  # route "plan": where the training goes once sized {route, target, reason}
    model: str | None = None  # the model of the table the request names (None: the skill's default); every next step sets it
    model_source: str = ""  # the words that named it
    fixed: list[dict[str, Any]] = field(default_factory=list)  # what the request fixes: [{key, value, words, set}] (routing.fixed)
    deft_step: str = ""  # route "deft": the commands that start the loop (DEFT_STEP)
    failing_on: str | None = None  # route "deft": what the request says the model fails on (the words; --adopt-on takes the pool's family name)

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


def route(*, skill: str, action: str, request: str | None = None, automl_policy: str | None = None,
          nodes: int | None = None, nodes_source: str = "") -> RouteDecision:
    """`nodes`: the layout from --nodes or a spec (nodes_source says which); else the request's words."""
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
    if nodes is None:
        nodes, said = nodes_from_request(request)
        nodes_source = f'the request ("{said}")' if said else ""
    model, model_source = model_from_request(request)
    shorthands = (info.get("spec_shorthand_keys") or {}).get(action) or {}
    fixed = fixed_keys(fixed_from_request(request), shorthands) if action in TRAINING_ACTIONS else []
    common = dict(skill=skill, action=action, automl_policy=policy, policy_source=source,
                  skill_dir=folder.relative_to(bank_root()).as_posix(), automl_enabled=enabled, action_source=action_source,
                  data_step=data_step(model) if data_import_from_request(request) else "", nodes=nodes, nodes_source=nodes_source,
                  model=model, model_source=model_source, fixed=fixed)
    what = "RL (GRPO) training" if action == "rl" else "model training"
    if action_source == "request":
        what += " (the request asks for RL: the rl action)"
    if action not in TRAINING_ACTIONS:
        return RouteDecision(**common, route="model", target=skill, runnable=True,
                             reason=f"{action} is not a train action: it stays with the model skill")
    if plan_from_request(request):
        then = _train_route(common, info, request, what)
        return RouteDecision(**{**common, "plan_step": plan_step(model, nodes, fixed), "after_plan": {"route": then.route, "target": then.target, "reason": then.reason}},
                             route="plan", target=skill, runnable=True,
                             reason="the request asks for a plan (how many GPUs, how long, whether it fits): `skillbank plan` answers it (parameters, "
                                    f"memory per GPU by part, hours, disk, layouts) before anything is launched; then {then.route} "
                                    "(after_plan: where the training itself goes)" + _fixed_said(fixed)
                                    + (f"; {DIRECT_RUN}" if then.route == "automl" else ""))
    return _train_route(common, info, request, what)


def model_from_request(request: str | None) -> tuple[str | None, str]:
    """(the id of the model of the table the request names, what named it); the first one named when it names several."""
    named = table.named_in(request)
    if not named:
        return None, ""
    entry, words = named[0]
    others = [e.id for e, _ in named[1:]]
    return entry.id, f'the request ("{words}")' + (f"; it also names {', '.join(others)}" if others else "")


def _train_route(common: dict[str, Any], info: dict[str, Any], request: str | None, what: str) -> RouteDecision:
    """Where a train / rl request's training goes: DEFT, direct, or AutoML."""
    skill, action, policy, source, enabled = common["skill"], common["action"], common["automl_policy"], common["policy_source"], common["automl_enabled"]
    nodes, nodes_source = common["nodes"], common["nodes_source"]
    if action == "train" and common["action_source"] == "explicit" and deft_from_request(request):
        failing = failing_on(request)
        adopt = " --adopt-on FAMILY" if failing else ""  # the family the request names, as the pool's data calls it (`data stats` lists them)
        return RouteDecision(**common, route="deft", target=DEFT_TARGET, runnable=True, deft_step=DEFT_STEP.format(adopt=adopt), failing_on=failing,
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
    if nodes is not None and nodes > 1:
        return RouteDecision(**common, route="direct", target=skill, runnable=True,
                             reason=f"not AutoML: {nodes_source} asks for {nodes} nodes, and an AutoML study runs its trials one at a time on one "
                                    f"node (`skillbank submit --action automl` refuses a multi-node spec): direct {what} on {nodes} nodes. To search "
                                    "hyperparameters, run the study on one node (policy.parallelism.dp_replicate_size=1), then train its best "
                                    f"spec on {nodes} nodes")
    return RouteDecision(**common, route="automl", target=info.get("automl_target", "tao-skill-bank:tao-run-automl"),
                         runnable=True, reason=f"automl_policy auto ({source}), automl_enabled, {action} schema and template packaged: a study of "
                                               f"several trials" + _fixed_said(common["fixed"]) + f"; {DIRECT_RUN}")


def _fixed_said(fixed: list[dict[str, Any]]) -> str:
    """The request's fixed values, said in the reason: how they stay fixed."""
    if not fixed:
        return ""
    sets = " ".join(f"--set {f['set']}" for f in fixed)
    return f"; the request fixes {', '.join(f['set'] for f in fixed)}: write them into the spec (skillbank spec ... {sets}) and AutoML leaves them out of its search"
