"""`skillbank validate` on the bank, each check on a broken copy, and PyPI's skills-ref on every skill."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, SKILL, json_out, skillbank

SKILLS = sorted(p.parent for p in (ROOT / "skills").glob("*/*/SKILL.md"))


def test_the_bank_validates():
    proc = skillbank("validate", "--json")
    doc = json_out(proc)
    assert proc.returncode == 0 and doc["ok"], json.dumps(doc["checks"], indent=2)


@pytest.mark.parametrize("folder", SKILLS, ids=lambda p: p.name)
def test_skills_ref_accepts_every_skill(folder):
    agentskills = Path(sys.executable).parent / "agentskills"
    proc = subprocess.run([str(agentskills), "validate", str(folder)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def bank(tmp_path):
    copy = tmp_path / "bank"
    for name in ("skills", "schemas", "workflow", "scripts", ".claude-plugin", ".codex-plugin"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, copy / name)
    shutil.copy(ROOT / "config.json", copy / "config.json")
    shutil.copy(ROOT / "README.md", copy / "README.md")
    return copy


def test_the_skills_index_names_every_skill_and_is_pointed_to(bank):
    index = bank / "skills" / "README.md"
    text = index.read_text()
    index.write_text("\n".join(line for line in text.splitlines() if "tao-run-deft" not in line) + "\n")
    found = run_on(bank)["checks"]["index"]
    assert any("names no link to tao-run-deft (skills/applications/tao-run-deft/SKILL.md)" in p for p in found)
    index.write_text(text.replace("references/slurm.md)", "references/nowhere.md)"))
    manifest = bank / ".codex-plugin" / "plugin.json"
    manifest.write_text(manifest.read_text().replace(" (index: skills/README.md)", ""))
    found = run_on(bank)["checks"]["index"]
    assert any("links platform/tao-run-platform/references/nowhere.md, which does not exist" in p for p in found)
    assert ".codex-plugin/plugin.json: does not point to skills/README.md" in found
    index.unlink()
    assert run_on(bank)["checks"]["index"] == ["skills/README.md: missing (the bank's skills, one line each, with what to open first)"]


def run_on(bank: Path) -> dict:
    return json_out(skillbank("validate", "--json", env={"SKILLBANK_ROOT": str(bank)}))


def test_frontmatter_extra_key_and_flow_style(bank):
    md = bank / "skills" / "models" / SKILL / "SKILL.md"
    md.write_text(md.read_text().replace("license: Apache-2.0", "license: Apache-2.0\ntags: [video, vlm]", 1))
    found = run_on(bank)["checks"]["frontmatter"]
    assert any("'tags' is not allowed" in p for p in found)
    assert any("flow-style" in p for p in found)


def test_frontmatter_name_must_equal_folder(bank):
    md = bank / "skills" / "models" / SKILL / "SKILL.md"
    md.write_text(md.read_text().replace(f"name: {SKILL}", "name: other-name", 1))
    assert any("must equal the folder name" in p for p in run_on(bank)["checks"]["frontmatter"])


def test_missing_link_target(bank):
    (bank / "skills" / "models" / SKILL / "references" / "troubleshooting.md").unlink()
    assert any("troubleshooting.md" in p for p in run_on(bank)["checks"]["links"])


def test_manifest_must_agree_with_spec_models(bank):
    path = bank / "skills" / "models" / SKILL / "schemas" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["actions"]["export"]
    path.write_text(json.dumps(manifest))
    checks = run_on(bank)["checks"]
    assert checks["manifests"] and checks["generated"]


def test_skill_info_keys_must_exist(bank):
    info = bank / "skills" / "models" / SKILL / "references" / "skill_info.yaml"
    text = info.read_text().replace("learning_rate: train.optm_lr", "learning_rate: train.optm_lrate")
    info.write_text(text.replace("fps: vision.fps", "fps: custom.vision.fps"))  # a train key as an evaluate shorthand
    found = run_on(bank)["checks"]["manifests"]
    assert any("train.optm_lrate" in p for p in found)
    assert any("spec_shorthand_keys.evaluate.fps names custom.vision.fps, which is not a key of the evaluate spec" in p for p in found)


def test_registry_must_list_every_skill(bank):
    config = json.loads((bank / "config.json").read_text())
    config["skills"] = config["skills"][:1]
    (bank / "config.json").write_text(json.dumps(config))
    assert run_on(bank)["checks"]["registry"]


def test_nested_references_are_rejected(bank):
    (bank / "skills" / "models" / SKILL / "references" / "deeper").mkdir()
    assert run_on(bank)["checks"]["depth"]
