"""Routing knows sizing and layout: "how many GPUs / how long / does it fit" requests route to `skillbank
plan` (route "plan", with where the training goes after it), and a layout of several nodes is never
handed to AutoML, whose trials run one at a time on one node (route "direct", the reason says why)."""

from __future__ import annotations

import pytest
import yaml

from helpers import SKILL, json_out, skillbank
from skillbank.routing.phrases import nodes_from_request, plan_from_request
from skillbank.routing.router import PLAN_STEP, plan_step, route
from test_deft_routing import DEFT
from test_router import AUTO, OFF, SILENT

SIZING = [
    "how many GPUs do I need to fine-tune the 8B on 50k 10-s clips?", "How long will 3 epochs take on one node?",
    "will the 8B fit on one 8xH100 node?", "Does it fit in 80GB?", "can Cosmos-Reason2-8B fit on a single H100",
    "how much GPU memory does batch 8 need", "estimate the training time and GPU-hours", "is there enough VRAM for mini_batch 4",
    "how many nodes should I use", "what's the time to train on 200k clips", "size the job before we launch it",
    "fine-tune it, but first tell me how long it takes", "will it OOM with LoRA off?",
]
NOT_SIZING = [*OFF, *AUTO, *[s for s in SILENT if s], *DEFT, "fine-tune to fit our domain", "make the model fit my data better",
              "train it for as long as needed", "run GRPO on my SFT checkpoint", "convert my clips and labels to LLaVA"]


@pytest.mark.parametrize("text", SIZING)
def test_sizing_questions_route_to_plan(text):
    assert plan_from_request(text), text
    d = route(skill=SKILL, action="train", request=text)
    assert d.route == "plan" and d.target == SKILL and d.plan_step == plan_step(d.model, d.nodes, d.fixed) and "skillbank plan --spec" in d.plan_step
    if d.model is None and d.nodes is None and not d.fixed:
        assert d.plan_step == PLAN_STEP.format(sets="", nodes="")
    assert d.after_plan["route"] in ("automl", "direct")


@pytest.mark.parametrize("text", NOT_SIZING)
def test_other_requests_do_not(text):
    assert not plan_from_request(text), text
    assert route(skill=SKILL, action="train", request=text).route != "plan"


def test_after_the_plan_the_training_goes_where_the_rest_of_the_request_says():
    d = route(skill=SKILL, action="train", request="how long will it take? plain training, no HPO")
    assert d.route == "plan" and d.after_plan["route"] == "direct" and "automl_policy off" in d.after_plan["reason"]
    d = route(skill=SKILL, action="train", request="how many GPUs for GRPO on my SFT checkpoint?")
    assert d.action == "rl" and d.route == "plan"
    assert route(skill=SKILL, action="evaluate", request="how long will evaluation take").route == "model"  # plan sizes training


@pytest.mark.parametrize("text, nodes", [
    ("fine-tune on 4 nodes", 4), ("train it across two 8-GPU nodes with AutoML", 2), ("multi-node training please", 2),
    ("fine-tune on 32 H100s", 4), ("use AutoML on 2 x 8 H100 nodes", 2),
])
def test_a_multi_node_request_is_not_handed_to_automl(text, nodes):
    d = route(skill=SKILL, action="train", request=text)
    assert d.route == "direct" and d.nodes == nodes and d.nodes_source.startswith("the request")
    assert d.reason.startswith("not AutoML:") and "one at a time on one node" in d.reason and "dp_replicate_size=1" in d.reason


@pytest.mark.parametrize("text", ["fine-tune on an 8-GPU node", "train on 8 GPUs", "one 8xH100 node", "fine-tune it"])
def test_one_node_still_goes_to_automl(text):
    assert nodes_from_request(text)[0] in (None, 1)
    assert route(skill=SKILL, action="train", request=text).route == "automl"


def test_the_cli_reads_nodes_from_the_flag_or_the_spec(tmp_path):
    spec = tmp_path / "train.yaml"
    spec.write_text(yaml.safe_dump({"policy": {"parallelism": {"dp_replicate_size": 2, "dp_shard_size": 8}}}))
    doc = json_out(skillbank("route", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--json"))
    assert doc["route"] == "direct" and doc["nodes"] == 2 and "dp_replicate_size 2" in doc["nodes_source"]
    doc = json_out(skillbank("route", "--skill", SKILL, "--action", "train", "--nodes", "1", "--request", "on 4 nodes", "--json"))
    assert doc["route"] == "automl" and doc["nodes"] == 1  # the flag wins over the words
    doc = json_out(skillbank("route", "--skill", SKILL, "--action", "train", "--request", "how many GPUs do I need?", "--json"))
    assert doc["route"] == "plan" and doc["after_plan"]["route"] == "automl"
    bad = skillbank("route", "--skill", SKILL, "--action", "train", "--nodes", "0")
    assert bad.returncode == 2 and "--nodes must be at least 1" in bad.stderr and "Traceback" not in bad.stderr
