"""The rules every backend, preflight and gap analysis share: the validation split off train, the media
folder of an empty media path, the default pixel budget. Each lives once (skillbank.data); these tests
pin the rule itself and check that every user of it gets the same answer."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from skillbank.data import split, video
from skillbank.data.media import media_root
from skillbank.errors import InputError
from skillbank.specification.train import TrainSpec


def write_records(path: Path, n: int) -> Path:
    records = [
        {"id": f"r{i}", "video": f"videos/v{i}.mp4", "video_fps": 4.0, "duration": 2.0,
         "conversations": [{"from": "human", "value": "<video>\nRed?"}, {"from": "gpt", "value": "yes"}]}
        for i in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    return path


def spec_for(tmp_path: Path, n: int, *, test_size=None, val: dict | None = None, media_path: str = "") -> TrainSpec:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    data = {
        "train": {"train_batch_per_replica": 1, "train_policy": {"mini_batch": 1, "dataset": {"test_size": test_size}},
                  "output_dir": str(tmp_path / "out")},
        "policy": {"model_name_or_path": str(model), "parallelism": {"dp_shard_size": 1}},
        "validation": {"enable": True, "batch_size": 1},  # one validation sample per rank: the split's batches are not what is tested
        "custom": {"train_dataset": {"annotation_path": str(write_records(tmp_path / "data" / "train.json", n)), "media_path": media_path}},
    }
    if val is not None:
        data["custom"]["val_dataset"] = val
    return TrainSpec.model_validate(data)


# ---- validation split -------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 8, 15, 19, 100])
@pytest.mark.parametrize("test_size", [None, 0.0, 0.05, 0.1, 0.5, 0.99, 3, 200])
def test_validation_count_is_cosmos_rls_split(n: int, test_size) -> None:
    torch = pytest.importorskip("torch")
    util = pytest.importorskip("cosmos_rl.utils.util")

    class Records(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> int:
            return i

    # the TOML writes a count (>= 1) as an int and a fraction as a float, as cosmos-rl tells them apart
    size = None if test_size is None else (int(test_size) if test_size >= 1 else float(test_size))
    config = SimpleNamespace(train=SimpleNamespace(train_policy=SimpleNamespace(dataset=SimpleNamespace(test_size=size))))
    _, held = util.split_train_n_val_dataset(Records(), config)
    assert split.validation_count(n, test_size) == len(held)


def test_split_only_without_a_val_dataset(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, 10)
    assert split.uses_train_split(spec) and split.train_split_size(spec, 10) == 1
    val = {"annotation_path": str(write_records(tmp_path / "data" / "val.json", 3)), "media_path": ""}
    assert split.train_split_size(spec_for(tmp_path, 10, val=val), 10) == 0


def test_a_val_dataset_without_annotations_is_bad_input_everywhere(tmp_path: Path) -> None:
    from skillbank.preflight.report import Findings
    from skillbank.preflight.spec_checks import validation_data
    from skillbank.training.cosmos_rl.toml import train_steps
    from skillbank.training.local.launch import plan_local

    spec = spec_for(tmp_path, 10, val={"annotation_path": "", "media_path": ""})
    assert not split.uses_train_split(spec)
    for call in (lambda: plan_local(spec, dry_run=True), lambda: train_steps(spec)):
        with pytest.raises(InputError) as exc:
            call()
        assert exc.value.where == "custom.val_dataset.annotation_path"
    findings = Findings()
    validation_data(spec, findings)
    assert [f.where for f in findings.items] == ["custom.val_dataset.annotation_path"]


@pytest.mark.parametrize(("n", "test_size", "train"), [(19, None, 18), (15, 0.5, 8), (10, 4, 6), (8, None, 7)])
def test_local_plan_cosmos_plan_and_preflight_count_the_same_train_records(tmp_path: Path, n: int, test_size, train: int) -> None:
    from skillbank.preflight.report import Findings
    from skillbank.preflight.spec_checks import steps_per_rank
    from skillbank.training.cosmos_rl.toml import train_steps
    from skillbank.training.local.launch import plan_local

    spec = spec_for(tmp_path, n, test_size=test_size)
    assert plan_local(spec, dry_run=True).train_records == train
    assert train_steps(spec).train == train
    findings = Findings()
    steps_per_rank(spec.model_copy(update={"train": spec.train.model_copy(update={"train_batch_per_replica": train + 1})}), n, None, findings)
    [finding] = [f for f in findings.items if f.severity == "error"]
    assert f"{n - train:,} taken by the validation split" in finding.message and finding.message.startswith(f"{train:,} train records")


# ---- media folder -----------------------------------------------------------------------------------


def test_media_root_of_an_empty_media_path_is_the_annotation_folder() -> None:
    assert media_root("/media", "/data/a.json") == "/media"
    assert media_root("", "/data/train/a.json") == "/data/train"
    assert media_root("", "a.json") == "."
    assert media_root("", "/a.json") == "/"
    assert media_root("", "s3://bucket/set/a.json") == "s3://bucket/set"


def test_cosmos_toml_and_preflight_resolve_an_empty_media_path_alike(tmp_path: Path) -> None:
    from skillbank.preflight.report import Findings
    from skillbank.preflight.spec_checks import media_folder
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.toml import build_toml

    spec = spec_for(tmp_path, 4)
    toml = build_toml(spec, model="nvidia/Cosmos-Reason2-8B", family=family_of("nvidia/Cosmos-Reason2-8B"),
                      run_dir=tmp_path / "run", run_id="1", resume=False)
    assert toml.data["custom"]["train_dataset"]["media_path"] == str((tmp_path / "data").resolve())
    findings = Findings()
    paths = spec.custom.train_dataset
    assert media_folder("custom.train_dataset.media_path", paths.media_path, paths.annotation_path, findings) == str(tmp_path / "data")
    assert [f.severity for f in findings.items] == ["warning"]


# ---- pixel budget -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "patch"), [("nvidia/Cosmos-Reason2-8B", 16), ("nvidia/Cosmos-Reason1-7B", 14)])
def test_default_total_pixels_is_one_number(tmp_path: Path, model: str, patch: int) -> None:
    from skillbank.data.examples import VisionSettings
    from skillbank.preflight.vision import VisionBudget
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.toml import build_toml

    spec = spec_for(tmp_path, 4)
    expected = video.default_total_pixels(spec.policy.model_max_length, (patch * 2) ** 2)
    assert expected == int(spec.policy.model_max_length * (patch * 2) ** 2 * 0.9)
    assert VisionSettings.from_spec(spec, patch_size=patch, merge_size=2).total_pixels == expected
    assert VisionBudget.from_train_spec(spec, patch).total_pixels == expected
    toml = build_toml(spec, model=model, family=family_of(model), run_dir=tmp_path / "run", run_id="1", resume=False)
    assert toml.data["custom"]["vision"]["total_pixels"] == expected


@pytest.mark.parametrize("frames", [2, 4, 16, 64, 768])
@pytest.mark.parametrize("max_pixels", [None, 50_000])
def test_trainer_and_preflight_share_the_frame_budget(frames: int, max_pixels) -> None:
    from skillbank.data.examples import ExampleBuilder, VisionSettings
    from skillbank.preflight.vision import VIDEO_MAX_TOKENS, VIDEO_MIN_TOKENS, VisionBudget

    ppt = 32 * 32
    budget = VisionBudget(4096, 16, 2.0, None, 3_000_000, max_pixels)
    builder = ExampleBuilder.__new__(ExampleBuilder)  # only the pixel arithmetic: no processor needed
    builder.vision = VisionSettings(fps=2.0, total_pixels=3_000_000, max_pixels=max_pixels)
    builder.min_pixels, builder.frame_max_pixels = VIDEO_MIN_TOKENS * ppt, VIDEO_MAX_TOKENS * ppt
    _, high = budget.frame_pixels(frames)
    assert builder.frame_pixels(frames) == int(max(high, builder.min_pixels))
    assert high >= min(int(VIDEO_MIN_TOKENS * ppt * video.MIN_PIXELS_SLACK), max_pixels or high)
