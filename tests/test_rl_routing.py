"""Routing to the rl action: a train request that asks for RL / GRPO / reinforcement learning goes to
rl (negations respected); rl trains directly because its schema marks no AutoML parameters."""

from __future__ import annotations

import json

import pytest

from helpers import SKILL, json_out, skillbank
from skillbank.routing.phrases import policy_from_request, rl_from_request
from skillbank.routing.router import route

RL = [
    "run GRPO on my SFT checkpoint", "GRPO", "grpo please", "after SFT, do reinforcement learning",
    "fine-tune it, then RL", "do SFT and then RL with GRPO", "I want RL", "RL please",
    "use reinforcement fine-tuning", "reinforcement-learning on the video QA set", "now run DAPO",
    "no automl; GRPO on my SFT checkpoint", "RL instead of SFT", "let's do RL, not plain SFT",
    "we need reinforcement learning with a KL penalty", "train with GRPO (4 GPUs)",
]
NOT_RL = [
    "no RL, just SFT", "No RL.", "SFT instead of RL", "don't use RL", "do not run GRPO", "RL isn't needed",
    "skip GRPO", "without reinforcement learning", "no need for RL", "I don't want RL", "not RL, plain SFT",
    "train it, RL off", "GRPO later; SFT first", "run GRPO... actually, no GRPO",
]
SILENT = [
    "train with cosmos-rl", "train --backend cosmos-rl on 8 GPUs", "fine-tune Cosmos-Reason on my data",
    "control the robot", "turn off AutoML", "", None,
]


@pytest.mark.parametrize("text", RL)
def test_requests_asking_for_rl(text):
    assert rl_from_request(text) is True, text
    d = route(skill=SKILL, action="train", request=text)
    assert (d.action, d.action_source, d.route, d.target) == ("rl", "request", "direct", SKILL), d


@pytest.mark.parametrize("text", NOT_RL)
def test_requests_declining_rl(text):
    assert rl_from_request(text) is False, text
    assert route(skill=SKILL, action="train", request=text).action == "train"


@pytest.mark.parametrize("text", SILENT)
def test_requests_saying_nothing_about_rl(text):
    assert rl_from_request(text) is None
    assert route(skill=SKILL, action="train", request=text).action == "train"


def test_automl_wording_still_read_beside_rl():
    d = route(skill=SKILL, action="train", request="no HPO, GRPO on the SFT export")
    assert (d.action, d.automl_policy, d.route) == ("rl", "off", "direct")
    assert policy_from_request("no RL, just SFT") == "off"  # "just SFT" keeps meaning plain training


def test_rl_is_direct_because_its_schema_marks_nothing_for_automl():
    from skillbank.skillinfo import schema_path

    assert json.loads(schema_path(SKILL, "rl").read_text())["automl_default_parameters"] == []
    d = route(skill=SKILL, action="rl")
    assert (d.action, d.action_source, d.route, d.runnable) == ("rl", "explicit", "direct", True)
    assert "marks no parameters for AutoML" in d.reason
    assert route(skill=SKILL, action="train").route == "automl"  # train keeps its AutoML default


def test_other_actions_ignore_rl_wording():
    d = route(skill=SKILL, action="evaluate", request="evaluate the GRPO checkpoint")
    assert (d.action, d.route) == ("evaluate", "model")


def test_route_cli_with_action_rl_and_an_rl_request():
    out = json_out(skillbank("route", "--skill", SKILL, "--action", "rl", "--json"))
    assert out["action"] == "rl" and out["route"] == "direct"
    out = json_out(skillbank("route", "--skill", SKILL, "--action", "train", "--request", "no RL, just SFT", "--json"))
    assert out["action"] == "train" and out["automl_policy"] == "off"
