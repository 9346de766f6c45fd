"""`skillbank spec`: template + dataset root + dotted overrides -> validated nested YAML."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import SKILL, json_out, skillbank
from skillbank.errors import InputError
from skillbank.specification.build import build_spec


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


def test_lora_without_a_learning_rate_gets_the_lora_default_and_says_so(tmp_path, capsys):
    from skillbank.cli import main
    from skillbank.specification.learning_rate import FULL_LR, LORA_LR, default_lr, lr_range

    built = build_spec(SKILL, "train", ["lora=true"])
    assert built.spec.train.optm_lr == LORA_LR == default_lr(built.spec) == 1e-4 and "train.optm_lr" not in built.explicit
    assert built.notes == ["train.optm_lr set to 1e-4 for LoRA (LLaMA-Factory's Qwen3-VL LoRA recipe, examples/train_lora/qwen3vl_lora_sft.yaml; "
                           "full fine-tuning keeps 1e-5); set it to keep yours (--set learning_rate=...)"]
    assert build_spec(SKILL, "train", ["policy.lora.enable=true", "lr=3e-5"]).spec.train.optm_lr == 3e-5  # yours stays
    assert build_spec(SKILL, "train", []).spec.train.optm_lr == FULL_LR and lr_range(build_spec(SKILL, "train", []).spec) == (1e-6, 1e-4)
    full = tmp_path / "full.yaml"
    assert main(["spec", "--skill", SKILL, "--action", "train", "-o", str(full)]) == 0
    lora = tmp_path / "lora.yaml"
    assert main(["spec", "--from", str(full), "--set", "lora=true", "-o", str(lora)]) == 0  # a file at the full default: LoRA's
    assert "note: train.optm_lr set to 1e-4 for LoRA" in capsys.readouterr().err
    assert yaml.safe_load(lora.read_text())["train"]["optm_lr"] == LORA_LR
    mine = build_spec(SKILL, "train", ["lora=true"], base={"train": {"optm_lr": 5e-6}}).spec.train.optm_lr
    again = build_spec(SKILL, "train", ["lora_r=8"], base=yaml.safe_load(lora.read_text()))
    assert mine == 5e-6 and again.spec.train.optm_lr == LORA_LR and not again.notes  # a rate in the file is the user's


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


# ---- shorthands per action, --from FILE, output formats -----------------------------------------------


def spec_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`skillbank spec ...` in this process (fast); (exit code, stdout, stderr)."""
    from skillbank.cli import main

    rc = main(["spec", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("action", "assignments", "expected"),
    [
        ("evaluate", ["num_gpus=0", "model=/m", "fps=4", "batch_size=2"], {"num_gpus": 0, "model.model_name": "/m", "vision.fps": 4.0, "evaluation.batch_size": 2}),
        ("evaluate", ["nframes=8"], {"vision.num_frames": 8, "vision.fps": None}),
        ("inference", ["model=/m", "nframes=6"], {"model_path": "/m", "num_frames": 6, "fps": None}),
        ("quantize", ["model=/m"], {"model_path": "/m"}),
        ("train", ["num_gpus=4", "nframes=8"], {"policy.parallelism.dp_shard_size": 4, "custom.vision.nframes": 8, "custom.vision.fps": None}),
    ],
)
def test_shorthands_resolve_per_action(action, assignments, expected):
    from skillbank.specification.overrides import get_dotted

    data = build_spec(SKILL, action, assignments).spec.model_dump(mode="json")
    assert {key: get_dotted(data, key) for key in expected} == expected


def test_help_lists_the_shorthands_per_action():
    proc = skillbank("spec", "--help")
    assert proc.returncode == 0
    assert "evaluate: num_gpus, model=model.model_name" in proc.stdout and "fps=vision.fps" in proc.stdout
    assert "train: dp_shard_size=policy.parallelism.dp_shard_size" in proc.stdout


@pytest.mark.parametrize(
    ("action", "assignments"),
    [
        ("train", ["epochs=2", "nframes=8", "policy.lora.enable=true", "custom.val_dataset.annotation_path=/v.json"]),
        ("evaluate", ["num_gpus=0", "nframes=8", "evaluation.limit=5"]),
        ("inference", ["model=/m", "video=/c.mp4", "prompt=Red?"]),
        ("quantize", ["model=/m", "scheme=W4A16"]),
        ("export", ["model=/run/step_4", "merge_lora=false"]),
    ],
)
@pytest.mark.parametrize("suffix", [".toml", ".json", ".yaml"])
def test_every_action_round_trips_through_every_format(tmp_path, capsys, action, assignments, suffix):
    """-o FILE.toml writes TOML (nulls left out), .json JSON, else YAML; --from reads each back, infers
    the action, and yields the same spec; evaluate --config's reader loads the TOML."""
    from skillbank.specification.io import load_spec
    from skillbank.specification.registry import spec_model

    out = tmp_path / f"spec{suffix}"
    rc, stdout, err = spec_cli(capsys, "--action", action, *[a for s in assignments for a in ("--set", s)], "-o", str(out), "--json")
    assert rc == 0, err
    written = json.loads(stdout)["spec"]
    if suffix == ".toml":
        import tomllib

        assert "null" not in out.read_text() and tomllib.loads(out.read_text())
    elif suffix == ".json":
        assert json.loads(out.read_text()) == written
    assert load_spec(out, spec_model(SKILL, action)).model_dump(mode="json") == written
    rc, stdout, _ = spec_cli(capsys, "--from", str(out), "--json")
    again = json.loads(stdout)
    assert rc == 0 and again["action"] == action and again["spec"] == written


def test_from_keeps_every_value_and_applies_the_overrides(tmp_path, capsys):
    src = tmp_path / "train.yaml"
    base = build_spec(SKILL, "train", ["train.optm_lr=2e-5", "policy.lora.enable=true", "custom.vision.fps=4"]).spec
    src.write_text(yaml.safe_dump(base.model_dump(mode="json")))
    before = src.read_text()
    rc, stdout, err = spec_cli(capsys, "--from", str(src), "--set", "epochs=1", "--set", "nframes=8", "--json")
    assert rc == 0, err
    doc = json.loads(stdout)
    assert doc["action"] == "train" and doc["spec"]["train"]["optm_lr"] == 2e-5 and doc["spec"]["policy"]["lora"]["enable"] is True
    assert doc["spec"]["train"]["epoch"] == 1 and doc["spec"]["custom"]["vision"] == {**doc["spec"]["custom"]["vision"], "fps": None, "nframes": 8}
    assert any("custom.vision.fps set to null" in n for n in doc["notes"])
    assert src.read_text() == before  # the input is not modified


@pytest.mark.parametrize("action", ["train", "evaluate", "inference"])
def test_setting_one_of_fps_and_nframes_clears_the_other_both_ways(tmp_path, action):
    """What the docs say: setting one clears the other, from the template and from a file holding the other."""
    prefix = {"train": "custom.vision.", "evaluate": "vision.", "inference": ""}[action]
    frames = {"train": "nframes", "evaluate": "num_frames", "inference": "num_frames"}[action]
    from skillbank.specification.overrides import get_dotted

    with_frames = build_spec(SKILL, action, ["nframes=8"]).spec.model_dump(mode="json")
    assert get_dotted(with_frames, prefix + "fps") is None and get_dotted(with_frames, prefix + frames) == 8
    back = build_spec(SKILL, action, ["fps=3"], base=with_frames).spec.model_dump(mode="json")
    assert get_dotted(back, prefix + "fps") == 3.0 and get_dotted(back, prefix + frames) is None


def test_from_an_ambiguous_or_foreign_file_asks_for_the_action(tmp_path, capsys):
    flat = tmp_path / "spec.yaml"
    flat.write_text("model_path: /m\n")  # inference and quantize both have model_path and nothing else is set
    rc, _, err = spec_cli(capsys, "--from", str(flat))
    assert rc == 2 and "--action" in err and "inference" in err and "quantize" in err
    assert spec_cli(capsys, "--from", str(flat), "--action", "quantize", "--json")[0] == 0
    foreign = tmp_path / "other.toml"
    foreign.write_text('[trainer]\nsteps = 3\n')
    rc, _, err = spec_cli(capsys, "--from", str(foreign))
    assert rc == 2 and "cannot tell the action" in err and "Traceback" not in err
    assert spec_cli(capsys)[0] == 2  # neither --action nor --from


def test_a_toml_that_cannot_hold_a_null_is_refused(tmp_path):
    """TOML has no null: a null whose default is not null would read back differently."""
    from skillbank.specification.io import spec_text
    from skillbank.specification.train import TrainSpec

    data = TrainSpec().model_dump(mode="json")
    data["custom"]["vision"]["fps"] = None  # nframes is null too: not a valid spec, and TOML would bring fps back
    with pytest.raises(InputError, match="TOML has no null: custom.vision.fps = null would read back as 2.0") as exc:
        spec_text(tmp_path / "x.toml", data, TrainSpec)
    assert exc.value.where == "custom.vision.fps" and "x.yaml" in exc.value.fix
