"""Requests to convert or import a dataset route to `skillbank data import` first (route's data_step)."""

from __future__ import annotations

import pytest

from helpers import SKILL, json_out, skillbank
from skillbank.routing.phrases import data_import_from_request
from skillbank.routing.router import DATA_IMPORT_STEP, route

DATA_IN = [
    "convert my dataset to LLaVA", "import my HF dataset", "Please import my Hugging Face dataset and fine-tune",
    "I have clips and label files, get the data in", "convert the parquet shards", "turn my CSV into llava format",
    "ingest these videos", "Convert my HuggingFace video QA dataset and train on it", "bring in my labelled clips",
    "transform my annotations", "import data from labels.jsonl",
]
OTHER = [
    "fine-tune on /data/qa", "no HPO", "import the model", "don't convert the data", "convert the checkpoint to fp8",
    "convert the model for video QA", "get the best model on this data", "", None,
]


@pytest.mark.parametrize("text", DATA_IN)
def test_phrases_asking_for_data_import(text):
    assert data_import_from_request(text), text


@pytest.mark.parametrize("text", OTHER)
def test_phrases_not_asking_for_it(text):
    assert not data_import_from_request(text), text


def test_route_names_the_import_step_and_keeps_the_rest_of_the_decision():
    plain = route(skill=SKILL, action="train", request="fine-tune it, no HPO")
    d = route(skill=SKILL, action="train", request="convert my clips and labels, then fine-tune it, no HPO")
    assert plain.data_step == "" and d.data_step == DATA_IMPORT_STEP and "skillbank data import" in d.data_step
    assert (d.route, d.automl_policy, d.action) == (plain.route, plain.automl_policy, plain.action)
    assert route(skill=SKILL, action="evaluate", request="import my HF dataset").data_step == DATA_IMPORT_STEP


def test_cli_json_carries_data_step():
    proc = skillbank("route", "--skill", SKILL, "--action", "train", "--request", "import my parquet dataset", "--json")
    assert proc.returncode == 0 and json_out(proc)["data_step"] == DATA_IMPORT_STEP
