"""Generated schemas, manifests, templates and tables: valid, finite, fresh, and consistent with the rules."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest
import yaml

from helpers import ROOT, SKILL, skillbank
from skillbank.generate.bank import all_outputs
from skillbank.specification.registry import SPEC_MODELS
from skillbank.specification.validation import validate

SKILL_DIR = ROOT / "skills" / "models" / SKILL
ACTIONS = sorted(SPEC_MODELS[SKILL])


def _finite(node) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(_finite(v) for v in node.values())
    if isinstance(node, list):
        return all(_finite(v) for v in node)
    return True


@pytest.mark.parametrize("action", ACTIONS)
def test_schema_is_json_schema_2020_12_with_finite_numbers(action):
    text = (SKILL_DIR / "schemas" / f"{action}.schema.json").read_text()
    schema = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite constant {c}"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert _finite(schema)
    for key in ("default", "automl_default_parameters", "automl_disabled_parameters", "popular"):
        assert key in schema


@pytest.mark.parametrize("action", ACTIONS)
def test_template_validates_against_schema_and_every_rule(action):
    schema = json.loads((SKILL_DIR / "schemas" / f"{action}.schema.json").read_text())
    template = yaml.safe_load((SKILL_DIR / "references" / f"spec_template_{action}.yaml").read_text())
    assert template == schema["default"]
    jsonschema.validate(template, schema)
    validate(SPEC_MODELS[SKILL][action], template)


def test_train_schema_carries_automl_metadata():
    schema = json.loads((SKILL_DIR / "schemas" / "train.schema.json").read_text())
    props = schema["properties"]
    assert "train.optm_lr" in schema["automl_default_parameters"]
    assert "train.train_policy.mini_batch" in schema["automl_disabled_parameters"]
    lr = props["train"]["properties"]["optm_lr"]
    assert lr["automl_enabled"] and lr["automl_log"] and lr["automl_minimum"] < lr["automl_maximum"]
    decay = props["train"]["properties"]["optm_decay_type"]
    assert len(decay["option_weights"]) == len(decay["enum"])
    rank = props["policy"]["properties"]["lora"]["properties"]["r"]
    assert rank["math_cond"] == "^ 2" and rank["depends_on"] == "policy.lora.enable"


def test_schema_rejects_fps_with_nframes():
    schema = json.loads((SKILL_DIR / "schemas" / "train.schema.json").read_text())
    spec = json.loads(json.dumps(schema["default"]))
    spec["custom"]["vision"]["nframes"] = 8
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(spec, schema)


def test_manifest_lists_every_action_and_automl_support_names_the_skill():
    manifest = json.loads((SKILL_DIR / "schemas" / "manifest.json").read_text())
    assert set(manifest["actions"]) == set(ACTIONS)
    assert manifest["automl_enabled"] is True
    support = json.loads((ROOT / "skills" / "models" / "automl_support.json").read_text())
    assert support["skills"][SKILL]["actions"] == ["train"]


def test_generated_files_are_fresh():
    proc = skillbank("schemas", "generate", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_names_a_stale_file(tmp_path, monkeypatch):
    outputs = all_outputs()
    target = SKILL_DIR / "schemas" / "manifest.json"
    original = target.read_text()
    try:
        target.write_text(original.replace('"schema_version": 1', '"schema_version": 0'))
        proc = skillbank("schemas", "generate", "--check")
        assert proc.returncode == 2
        assert "schemas/manifest.json" in proc.stdout
    finally:
        target.write_text(original)
    assert target.read_text() == outputs[target]


def test_parameter_tables_are_generated_from_the_models():
    text = (SKILL_DIR / "references" / "parameters.md").read_text()
    assert "| `train.optm_lr` * |" in text
    assert "| `custom.vision.nframes` |" in text
