"""`skillbank spec`: template + dataset root + dotted overrides -> validated nested YAML."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import SKILL, json_out, skillbank
from skillbank.errors import InputError
from skillbank.spec.build import build_spec


def test_overrides_walk_the_nested_spec_and_coerce_types():
    built = build_spec(SKILL, "train", ["train.optm_lr=2e-5", "train.epoch=2", "policy.lora.enable=true",
                                        "policy.lora.target_modules=q_proj,v_proj", "train.optm_betas=[0.9, 0.95]"])
    spec = built.spec
    assert spec.train.optm_lr == 2e-5 and spec.train.epoch == 2 and spec.policy.lora.enable is True
    assert spec.policy.lora.target_modules == ["q_proj", "v_proj"]
    assert spec.train.optm_betas == (0.9, 0.95)


def test_shorthand_keys_from_skill_info():
    spec = build_spec(SKILL, "train", ["batch_size=16", "mini_batch=4", "learning_rate=3e-4", "dp_shard_size=2"]).spec
    assert spec.train.train_batch_per_replica == 16 and spec.train.train_policy.mini_batch == 4
    assert spec.train.optm_lr == 3e-4 and spec.policy.parallelism.dp_shard_size == 2


def test_val_dataset_leaves_valid_although_absent_from_template():
    spec = build_spec(SKILL, "train", ["custom.val_dataset.annotation_path=/v/a.json", "custom.val_dataset.media_path=/v"]).spec
    assert spec.custom.val_dataset.annotation_path == "/v/a.json"


def test_setting_nframes_clears_fps():
    built = build_spec(SKILL, "train", ["custom.vision.nframes=8"])
    assert built.spec.custom.vision.fps is None and built.spec.custom.vision.nframes == 8
    assert any("custom.vision.fps" in note for note in built.notes)


def test_dataset_root_maps_annotations_and_media(tmp_path):
    (tmp_path / "annotations.json").write_text("[]")
    spec = build_spec(SKILL, "train", dataset_root=tmp_path).spec
    assert spec.custom.train_dataset.annotation_path == f"{tmp_path}/annotations.json"
    assert spec.custom.train_dataset.media_path == str(tmp_path)
    assert spec.custom.val_dataset is None
    ev = build_spec(SKILL, "evaluate", dataset_root=tmp_path).spec
    assert ev.dataset.annotation_path == f"{tmp_path}/annotations.json" and ev.dataset.media_dir == str(tmp_path)


def test_dataset_root_with_train_and_val_splits(tmp_path):
    for split in ("train", "val"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "annotations.json").write_text("[]")
    spec = build_spec(SKILL, "train", dataset_root=tmp_path).spec
    assert spec.custom.train_dataset.media_path == str(tmp_path / "train")
    assert spec.custom.val_dataset.annotation_path == f"{tmp_path}/val/annotations.json"


def test_dataset_root_without_annotations_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no annotations.json"):
        build_spec(SKILL, "train", dataset_root=tmp_path)


@pytest.mark.parametrize(
    ("assignment", "where", "words"),
    [
        ("train.optm_lrr=1", "train.optm_lrr", "did you mean train.optm_lr?"),
        ("train.epoch=abc", "train.epoch", "integer"),
        ("batch_size=5", "train.train_batch_per_replica", "multiple of"),
        ("policy.model_max_length=4096", "policy.model_max_length", "40960"),
        ("no_equals_sign", "--set", "KEY=VALUE"),
    ],
)
def test_bad_overrides_exit_2_naming_the_key(assignment, where, words):
    proc = skillbank("spec", "--skill", SKILL, "--action", "train", "--set", assignment)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert where in proc.stderr and words in proc.stderr, proc.stderr


def test_cli_writes_nested_yaml_atomically_and_json_mode(tmp_path):
    out = tmp_path / "train.yaml"
    proc = skillbank("spec", "--skill", SKILL, "--action", "train", "--set", "epoch=1", "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    assert doc["ok"] and doc["spec"]["train"]["epoch"] == 1
    written = yaml.safe_load(out.read_text())
    assert written == doc["spec"]
    assert [p.name for p in tmp_path.iterdir()] == ["train.yaml"]  # no temp file left behind


def test_json_error_is_one_document():
    proc = skillbank("spec", "--skill", SKILL, "--action", "train", "--set", "epoch=0", "--json")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and "train.epoch" in doc["error"]["where"]


def test_unknown_skill_and_action():
    assert skillbank("spec", "--skill", "nope", "--action", "train").returncode == 2
    proc = skillbank("spec", "--skill", SKILL, "--action", "deploy")
    assert proc.returncode == 2 and "train" in proc.stderr
