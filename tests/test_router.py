"""The train action policy: explicit policy, request phrases (both ways), packaging, non-train actions."""

from __future__ import annotations

import shutil

import pytest

from helpers import ROOT, SKILL, json_out, skillbank
from skillbank.routing.phrases import policy_from_request
from skillbank.routing.router import NOT_RUNNABLE, route

OFF = [
    "turn off AutoML", "Turn AutoML off, please.", "TURN OFF AUTOML!!!", "disable AutoML", "AutoML disabled",
    "please disable auto-ml for this run", "no HPO", "No hpo.", "skip HPO", "skip the HPO step",
    "go without AutoML", "without hyperparameter search", "no hyperparameter tuning", "no hyper-parameter sweep",
    "plain training", "Please do plain training on my data", "just plain fine-tuning please", "plain SFT",
    "don't use AutoML", "do not use automl", "I don't want AutoML", "we'd rather not run HPO", "never use AutoML",
    "no need for AutoML", "AutoML: off", "automl_policy=off", "automl_policy: off", "AutoML off",
    "hpo: disabled", "fine-tune Cosmos-Reason on my video QA data without AutoML", "train it directly",
    "no automl, just train", "AutoML is not needed", "opt out of AutoML", "switch off hyperparameter optimization",
    "use automl... actually no, skip automl", "Can you fine-tune this w/o HPO?", "vanilla training, no sweeps",
]
AUTO = [
    "do use AutoML", "use AutoML", "Use AutoML please.", "run HPO", "with hyperparameter search",
    "turn on AutoML", "enable AutoML", "AutoML on", "don't disable AutoML", "do not turn off automl",
    "I don't want plain training, use AutoML", "not plain training", "AutoML, not plain training",
    "run a hyperparameter sweep", "tune hyperparameters with HPO", "fine-tune with auto ml",
    "no plain training: use hpo", "please keep AutoML", "AutoML: on", "automl_policy=auto",
]
SILENT = ["fine-tune Cosmos-Reason on my video QA data", "train on /data/qa for 3 epochs", "", None]


@pytest.mark.parametrize("text", OFF)
def test_phrases_meaning_off(text):
    assert policy_from_request(text) == "off", text


@pytest.mark.parametrize("text", AUTO)
def test_phrases_meaning_auto(text):
    assert policy_from_request(text) == "auto", text


@pytest.mark.parametrize("text", SILENT)
def test_phrases_saying_nothing(text):
    assert policy_from_request(text) is None


def test_explicit_policy_wins_over_the_request():
    d = route(skill=SKILL, action="train", request="turn off AutoML", automl_policy="auto")
    assert (d.automl_policy, d.policy_source, d.route) == ("auto", "explicit", "automl")
    d = route(skill=SKILL, action="train", request="use AutoML", automl_policy="off")
    assert (d.automl_policy, d.policy_source, d.route) == ("off", "explicit", "direct")


def test_default_auto_routes_to_automl_target():
    d = route(skill=SKILL, action="train")
    assert d.policy_source == "default" and d.route == "automl"
    assert d.target == "tao-skill-bank:tao-run-automl" and d.runnable
    assert d.skill_dir == f"skills/models/{SKILL}"


def test_request_off_routes_direct():
    d = route(skill=SKILL, action="train", request="plain training please")
    assert (d.automl_policy, d.policy_source, d.route, d.target) == ("off", "request", "direct", SKILL)


@pytest.mark.parametrize("action", ["evaluate", "inference", "quantize", "export"])
def test_non_train_actions_stay_with_the_model(action):
    d = route(skill=SKILL, action=action, automl_policy="auto")
    assert d.route == "model" and d.target == SKILL


def test_missing_schema_routes_direct_not_runnable(tmp_path, monkeypatch):
    bank = tmp_path / "bank"
    shutil.copytree(ROOT / "skills", bank / "skills")
    shutil.copy(ROOT / "config.json", bank / "config.json")
    (bank / "skills" / "models" / SKILL / "schemas" / "train.schema.json").unlink()
    proc = skillbank("route", "--skill", SKILL, "--action", "train", "--json", env={"SKILLBANK_ROOT": str(bank)})
    doc = json_out(proc)
    assert doc["route"] == "direct" and doc["runnable"] is False
    assert NOT_RUNNABLE in doc["reason"]


def test_override_changes_nothing_in_the_skill():
    info = ROOT / "skills" / "models" / SKILL / "references" / "skill_info.yaml"
    before = info.read_bytes()
    skillbank("route", "--skill", SKILL, "--action", "train", "--automl-policy", "off", "--json")
    assert info.read_bytes() == before


def test_cli_prints_one_json_object_with_the_contract_keys():
    proc = skillbank("route", "--skill", SKILL, "--action", "train", "--request", "no HPO", "--json")
    assert proc.returncode == 0
    doc = json_out(proc)
    for key in ("skill", "action", "automl_policy", "policy_source", "route", "target", "runnable", "reason"):
        assert key in doc
    assert doc["automl_policy"] == "off"


def test_bad_policy_and_action_exit_2():
    assert skillbank("route", "--skill", SKILL, "--action", "train", "--automl-policy", "maybe").returncode == 2
    proc = skillbank("route", "--skill", SKILL, "--action", "deploy", "--json")
    assert proc.returncode == 2 and json_out(proc)["ok"] is False
