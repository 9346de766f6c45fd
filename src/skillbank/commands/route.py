"""`skillbank route`: where a request for a skill action goes (AutoML handoff, direct training, model skill)."""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_json, add_nodes, add_skill, add_spec, command_parser

DESCRIPTION = """\
Decide where a request goes. An explicit --automl-policy wins; otherwise the request's wording
("turn off AutoML", "no HPO", "plain training" mean off); otherwise auto. Train with auto on an
AutoML-enabled model with its train schema and template packaged routes to
tao-skill-bank:tao-run-automl; off trains directly; other actions stay with the model skill.
The policy applies to this run only: the skill's metadata never changes. A train request that asks
for RL, GRPO or reinforcement learning ("no RL, just SFT" does not) goes to the rl action
("action": "rl", "action_source": "request"), which trains directly unless its schema marks
parameters for AutoML. A request to convert or import a dataset ("convert my clips and labels",
"import my HF dataset") sets "data_step": run `skillbank data import SOURCE --out DIR` (then
`skillbank data stats`) first and build the spec on DIR; "" otherwise.
A train request to improve the model with more data from a pool ("mine my
pool", "it keeps failing on X, fix it with more data", "run DEFT") routes to
tao-skill-bank:tao-run-deft ("route": "deft"), not to AutoML; "deft_step" has its first commands
(deft init, then the dry run) and "failing_on" the words for what the request says the model fails on
("keeps failing on left turns": "left turns"; the step then carries --adopt-on FAMILY: the pool's name for it).
A train or rl request that asks how many GPUs, how long, or whether it fits ("how many GPUs for 50k
10-s clips", "will the 8B fit on one node", "how long will 3 epochs take"), or for a plan ("plan LoRA
SFT of the 8B on one GPU"), routes to `skillbank plan` ("route": "plan", "plan_step": the commands,
with the request's model, fixed values and nodes), before anything is launched.
A request that names a model of the model table (`skillbank models list`: its id, or a short name such as
"Cosmos-Reason2-8B", "Qwen2.5-VL-3B") sets "model" (and "model_source": the words), and the commands of
plan_step and data_step carry it (`--set model=ID`); plan_step carries the nodes the request states too.
What the request fixes ("for 3 epochs", "on one 80 GB GPU", "LoRA SFT" / "full fine-tuning") is listed
in "fixed": [{key, value, words, set}] and plan_step carries each as --set; a spec built with those --set
values records them (user_set) and AutoML leaves them out of its search. A route to AutoML (a study of
several trials) says in its reason how to get one direct run: skillbank train --spec train.yaml --automl-policy off.
A layout of several nodes ("on 4 nodes", "multi-node", more than 8 GPUs; --nodes N; a --spec whose
policy.parallelism.dp_replicate_size is > 1) is never handed to AutoML, whose trials run one at a
time on one node: the route is "direct" and the reason says why ("nodes", "nodes_source" in the JSON).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "route", DESCRIPTION)
    add_skill(p, "model skill, e.g. tao-finetune-cosmos-reason", required=True)
    p.add_argument("--action", required=True, help="train, rl, evaluate, inference, quantize, export")
    p.add_argument("--request", metavar="TEXT", help="the user's words, e.g. 'fine-tune it, no HPO'")
    p.add_argument("--automl-policy", choices=("auto", "off"), help="explicit policy (wins over the request)")
    add_nodes(p, "nodes the run trains on (wins over --spec and the request's words)", metavar="N")
    add_spec(p, "the train / rl spec: its policy.parallelism.dp_replicate_size is the nodes it trains on", metavar="FILE")
    add_json(p, "print one JSON object (the default output is JSON too)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.routing.router import route

    nodes, source = _nodes(args)
    decision = route(skill=args.skill, action=args.action, request=args.request, automl_policy=args.automl_policy, nodes=nodes, nodes_source=source)
    print(json.dumps(decision.to_dict(), indent=None if args.json else 2))
    return 0


def _nodes(args: argparse.Namespace) -> tuple[int | None, str]:
    """(nodes, what says so) from --nodes, else the spec's dp_replicate_size; (None, "") for the request's words."""
    from skillbank.errors import InputError

    if args.nodes is not None:
        if args.nodes < 1:
            raise InputError(f"--nodes must be at least 1 (got {args.nodes})", where="--nodes", fix="pass a positive node count")
        return args.nodes, f"--nodes {args.nodes}"
    if not args.spec:
        return None, ""
    from skillbank.specification.io import read_spec_file

    replicas = ((read_spec_file(args.spec).get("policy") or {}).get("parallelism") or {}).get("dp_replicate_size")
    if isinstance(replicas, int) and replicas >= 1:
        return replicas, f"the spec ({args.spec}: policy.parallelism.dp_replicate_size {replicas})"
    return None, ""
