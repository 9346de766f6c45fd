"""Generated schemas, manifests, templates and tables: valid, finite, fresh, and consistent with the rules."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys

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


# --- the snapshots that need cosmos-rl or torch (skillbank.generate.snapshots) -----------------------

HIDDEN_PROBE = """
import contextlib, importlib.abc, io, json, sys, time

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {hidden!r}:
            raise ModuleNotFoundError(name)

sys.meta_path.insert(0, Hide())
from skillbank import cli
out = io.StringIO()
start = time.process_time()
with contextlib.redirect_stdout(out):
    try:
        code = cli.main(["schemas", "generate", "--check", "--json"])
    except SystemExit as e:
        code = e.code
print(json.dumps({{"code": code, "doc": json.loads(out.getvalue()), "cpu_seconds": time.process_time() - start,
                  "heavy": [m for m in ("torch", "transformers", "cosmos_rl", "optuna") if m in sys.modules]}}))
"""


def test_generated_files_are_fresh():
    """Snapshots included: this venv has cosmos-rl, torch and transformers, so none goes unchecked."""
    proc = skillbank("schemas", "generate", "--check", "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["ok"] and doc["not_checked"] == [] and doc["failed"] == [], doc


def test_without_cosmos_rl_or_torch_the_snapshots_are_named_not_checked_and_the_check_stays_light():
    hidden = ("cosmos_rl", "torch", "transformers")
    proc = subprocess.run([sys.executable, "-c", HIDDEN_PROBE.format(hidden=hidden)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["doc"]["ok"] and result["heavy"] == []
    unchecked = {item["file"]: item["why"] for item in result["doc"]["not_checked"]}
    assert unchecked == {"src/skillbank/specification/cosmos_rl_defaults.json": "needs cosmos_rl, not importable here",
                         "src/skillbank/models/configs/counts.json": "needs torch, transformers, not importable here"}
    assert result["cpu_seconds"] < 5, result["cpu_seconds"]  # no child started: ~0.5 s of CPU, the schemas alone


FAKE_PRODUCER = """
import os, pathlib

def text():
    counter = pathlib.Path(os.environ["FAKE_SNAPSHOT_CALLS"])
    counter.write_text(counter.read_text() + "x" if counter.exists() else "x")
    return "new\\n"

def broken():
    raise RuntimeError("cannot reach the library")
"""


@pytest.fixture
def fake_snapshot(tmp_path, monkeypatch):
    """A snapshot whose generator is a module of this test (the real ones take seconds to import)."""
    from skillbank.generate import snapshots

    (tmp_path / "fake_producer.py").write_text(FAKE_PRODUCER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_SNAPSHOT_CALLS", str(tmp_path / "calls"))
    snap = snapshots.Snapshot("fake", tmp_path / "snapshot.json", "fake_producer:text", needs=("json",), versions=(), sources=())
    monkeypatch.setattr(snapshots, "SNAPSHOTS", (snap,))
    snap.path.write_text("old\n")
    return snap, tmp_path / "calls"


def test_a_stale_snapshot_is_named_written_and_then_trusted_from_the_cache(fake_snapshot, capsys):
    from skillbank.commands import schemas as command
    from skillbank.generate import snapshots

    snap, calls = fake_snapshot
    assert command.run(argparse.Namespace(check=True, json=False)) == 2
    assert f"stale: {snap.path} (run `skillbank schemas generate`)" in capsys.readouterr().out
    assert snap.path.read_text() == "old\n" and calls.read_text() == "x"
    assert [s.state for s in snapshots.run(write=True)] == ["written"] and snap.path.read_text() == "new\n"
    again = snapshots.run(write=False)
    assert [s.state for s in again] == ["fresh"] and "cached" in again[0].why and calls.read_text() == "xx"  # no child this time
    snap.path.write_text("new\n")  # same text, a new mtime: checked again
    assert [s.state for s in snapshots.run(write=False)] == ["fresh"] and calls.read_text() == "xxx"


def test_a_snapshot_generator_that_fails_is_reported_and_exits_1(fake_snapshot, monkeypatch, capsys):
    from skillbank.commands import schemas as command
    from skillbank.generate import snapshots

    snap, _ = fake_snapshot
    monkeypatch.setattr(snapshots, "SNAPSHOTS", (dataclasses.replace(snap, producer="fake_producer:broken"),
                                                  dataclasses.replace(snap, name="other", needs=("no_such_module_i29",))))
    assert command.run(argparse.Namespace(check=True, json=True)) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["failed"] == [{"file": str(snap.path), "why": "its generator failed: RuntimeError: cannot reach the library"}]
    assert doc["not_checked"] == [{"file": str(snap.path), "why": "needs no_such_module_i29, not importable here"}]
    assert snap.path.read_text() == "old\n"
