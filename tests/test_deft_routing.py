"""Routing to DEFT: a train request to improve the model with more data from a pool ("mine my pool",
"it keeps failing on X, fix it with more data") goes to tao-run-deft, not to AutoML; declining DEFT
and requests about hyperparameters or plain training route as before."""

from __future__ import annotations

import pytest

from helpers import SKILL, json_out, skillbank
from skillbank.routing.phrases import deft_from_request, failing_on
from skillbank.routing.router import DEFT_TARGET, route
from test_router import AUTO, OFF
from test_rl_routing import NOT_RL, RL

DEFT = [
    "mine my pool", "Mine the pool for more examples", "it keeps failing on left turns, fix it with more data",
    "It keeps getting directionality wrong - fix it with more data from my pool", "run DEFT on it",
    "improve it with more data from the unlabelled pool", "use my pool to fix the gaps", "mining the video pool for hard cases",
    "the model is weak on directionality; I have a pool of 5000 labelled clips", "fix it by adding more training data",
    "it still fails on night footage, add more targeted data", "pull more clips out of our pool and retrain",
]
NOT_DEFT = ["no DEFT, just train", "don't run DEFT", "without mining the pool"]
SILENT = ["fine-tune Cosmos-Reason on my video QA data", "tune hyperparameters to improve accuracy", "fix the learning rate",
          "train on /data/qa for 3 epochs", "fine-tune on more data", "", None]


@pytest.mark.parametrize("text", DEFT)
def test_requests_for_more_data_from_a_pool_route_to_deft(text):
    assert deft_from_request(text) is True, text
    d = route(skill=SKILL, action="train", request=text)
    assert (d.route, d.target, d.action) == ("deft", DEFT_TARGET, "train") and "not AutoML" in d.reason, d


@pytest.mark.parametrize("text", NOT_DEFT + SILENT)
def test_other_requests_do_not_route_to_deft(text):
    assert deft_from_request(text) is not True, text
    assert route(skill=SKILL, action="train", request=text).route != "deft"


@pytest.mark.parametrize("text", OFF + AUTO + RL + NOT_RL)
def test_automl_and_rl_phrasings_never_read_as_deft(text):
    assert deft_from_request(text) is None, text


def test_deft_is_for_train_requests_and_the_cli_says_so():
    assert route(skill=SKILL, action="evaluate", request="mine my pool").route == "model"
    doc = json_out(skillbank("route", "--skill", SKILL, "--action", "train", "--request", "it keeps failing on X, fix it with more data", "--json"))
    assert doc["route"] == "deft" and doc["target"] == "tao-skill-bank:tao-run-deft" and doc["skill_dir"] == f"skills/models/{SKILL}"


FAILING = {"it keeps failing on left turns, fix it with more data": "left turns",
           "It keeps getting directionality wrong - fix it with more data from my pool": "directionality",
           "the model is weak on directionality; I have a pool of 5000 labelled clips": "directionality",
           "it still fails on night footage, add more targeted data": "night footage",
           "my model keeps failing on directionality; mine more data from the pool": "directionality",
           "mine my pool": None, "run DEFT on it": None, "it keeps failing on it, mine the pool": None}


@pytest.mark.parametrize("text", FAILING)
def test_a_deft_route_names_its_first_commands_and_what_the_request_says_fails(text):
    """route "deft" carries deft_step (deft init, then the dry run) as plan_step does for a plan; a request that says what
    the model fails on gives failing_on (the words) and --adopt-on FAMILY in the step (the pool's name for that family)."""
    assert failing_on(text) == FAILING[text]
    d = route(skill=SKILL, action="train", request=text)
    assert d.route == "deft" and d.deft_step.startswith("skillbank deft init --model MODEL --pool POOL --benchmark BENCHMARK --out DIR")
    assert "skillbank deft --config DIR/deft.yaml --dry-run" in d.deft_step and d.failing_on == FAILING[text]
    assert ("--adopt-on FAMILY" in d.deft_step) == (FAILING[text] is not None)
    assert route(skill=SKILL, action="train", request="plain training, no HPO").deft_step == ""
