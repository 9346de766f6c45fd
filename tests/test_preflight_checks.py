"""One failing example per preflight check, on tiny files written here (no network, no GPU)."""

from __future__ import annotations

import hashlib
import json
from collections import namedtuple
from pathlib import Path

import pytest
import yaml

from skillbank.preflight import env_checks
from skillbank.preflight.run import run_preflight
from skillbank.specification.overrides import set_dotted

SKILL = "tao-finetune-cosmos-reason"


def record(i: int, **changes) -> dict:
    rec = {
        "id": f"clip-{i}",
        "video": f"videos/c{i % 2}.mp4",
        "video_fps": 4.0,
        "duration": 2.0,
        "conversations": [{"from": "human", "value": f"<video>\nIs clip {i} red?"}, {"from": "gpt", "value": "yes"}],
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not None}


def write_mp4(path: Path, frames: int = 8, fps: int = 4, size: tuple[int, int] = (64, 48)) -> Path:
    import av
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            image = np.full((size[1], size[0], 3), (i * 30) % 255, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


class Bank:
    """A tmp folder with a tiny local model, media, annotations and a train spec."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.media = root / "media"
        for i in range(2):
            (self.media / "videos").mkdir(parents=True, exist_ok=True)
            (self.media / f"videos/c{i}.mp4").write_bytes(b"\0")
        self.model = root / "model"
        self.model.mkdir()
        (self.model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
        (self.model / "model.safetensors").write_bytes(b"\0" * 1024)

    def annotations(self, records, name: str = "train.json") -> Path:
        path = self.root / name
        path.write_text(records if isinstance(records, str) else json.dumps(records, indent=1))
        return path

    def train_spec(self, records=None, *, val=None, **sections) -> dict:
        train = self.annotations(records if records is not None else [record(i) for i in range(16)])
        spec = {
            "train": {"train_batch_per_replica": 4, "output_dir": str(self.root / "out"), "train_policy": {"mini_batch": 2}},
            "policy": {"model_name_or_path": str(self.model), "parallelism": {"dp_shard_size": 1}},
            "validation": {"enable": False},
            "custom": {"train_dataset": {"annotation_path": str(train), "media_path": str(self.media)}},
        }
        if val is not None:
            spec["custom"]["val_dataset"] = {"annotation_path": str(self.annotations(val, "val.json")), "media_path": str(self.media)}
        for key, value in sections.items():
            set_dotted(spec, key.replace("__", "."), value)
        return spec


@pytest.fixture
def bank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Bank:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
    return Bank(tmp_path)


def train(spec: dict, **kw):
    kw.setdefault("backend", "local")
    return run_preflight(skill=SKILL, action="train", spec=spec, **kw)


def only(report, check: str):
    found = [f for f in report.findings if f.check == check]
    assert found, f"no {check} finding in {[(f.check, f.message) for f in report.findings]}"
    return found


def test_a_clean_spec_passes(bank: Bank) -> None:
    report = train(bank.train_spec(), gpus_per_node=1, nodes=1)
    assert report.ok, report.findings
    assert report.findings == []
    assert report.stats["records"] == {"train": 16}
    assert report.stats["checked"] == 16


def test_spec_schema_names_the_dotted_key(bank: Bank) -> None:
    spec = bank.train_spec(train__epoch=0, train__train_batch_per_replica=3)
    spec["policy"]["lora"] = {"rank": 8}
    report = train(spec)
    wheres = {f.where for f in only(report, "spec.schema")}
    assert {"train.epoch", "train.train_batch_per_replica", "policy.lora.rank"} <= wheres
    assert not report.ok
    # the other checks still ran, on the spec with those keys back at their defaults
    assert report.stats["records"] == {"train": 16}


def test_spec_schema_from_a_file_and_unknown_skill(bank: Bank) -> None:
    path = bank.root / "spec.yaml"
    path.write_text("train: [unclosed\n")
    report = run_preflight(skill=SKILL, action="train", spec_path=path)
    assert only(report, "spec.schema")[0].where == str(path)
    report = run_preflight(skill="no-such-skill", action="train", spec={})
    assert only(report, "spec.schema")[0].where == "--skill"


def test_spec_parallelism(bank: Bank) -> None:
    report = train(bank.train_spec(), gpus_per_node=8, nodes=2)
    found = {f.where: f for f in only(report, "spec.parallelism")}
    assert "dp_shard_size=8" in found["policy.parallelism.dp_shard_size"].fix
    assert "dp_replicate_size=2" in found["policy.parallelism.dp_replicate_size"].fix


def test_spec_steps_per_rank_counts_the_validation_split(bank: Bank) -> None:
    spec = bank.train_spec([record(i) for i in range(8)], validation={"enable": True}, train__train_batch_per_replica=8)
    [finding] = only(train(spec), "spec.steps_per_rank")  # the local backend validates every record
    assert finding.severity == "error" and finding.where == "train.train_batch_per_replica"
    assert "state_dict" in finding.message and "1 taken by the validation split" in finding.message
    # not the largest batch that fits (6: one step per epoch) but batches that train, with their steps
    assert "train_batch_per_replica=6" not in finding.fix
    assert "train.train_batch_per_replica=2 (3 steps per epoch, 9 in all)" in finding.fix
    assert "train.train_batch_per_replica=1 with train.train_policy.mini_batch=1 (7 steps per epoch, 21 in all)" in finding.fix
    # cosmos-rl drops the incomplete validation batch too: 1 validation record and batch_size 8 validate nothing (an error of the plan)
    [_, val_batches] = only(train(spec, backend="cosmos-rl"), "spec.steps_per_rank")
    assert val_batches.severity == "error" and val_batches.where == "validation.batch_size" and "validation.batch_size=1" in val_batches.fix


def test_spec_validation_data(bank: Bank) -> None:
    spec = bank.train_spec(validation={"enable": True})
    spec["custom"]["val_dataset"] = {"annotation_path": "", "media_path": str(bank.media)}
    assert only(train(spec), "spec.validation_data")[0].where == "custom.val_dataset.annotation_path"


def test_spec_dataset_paths_empty_annotation_path(bank: Bank) -> None:
    spec = bank.train_spec()
    spec["custom"]["train_dataset"]["annotation_path"] = ""
    [finding] = only(train(spec), "spec.dataset_paths")
    assert finding.severity == "error" and "--dataset-root" in finding.fix and "--set" in finding.fix


def test_annotations_format_reports_line_and_column(bank: Bank) -> None:
    text = json.dumps([record(i) for i in range(4)], indent=1).replace('"id": "clip-2"', '"id": "clip-2",,')
    [finding] = only(train(bank.train_spec(text)), "annotations.format")
    file, line, column = finding.where.rsplit(":", 2)
    assert file.endswith("train.json") and int(line) > 1 and int(column) > 1
    assert "record 2" in finding.message


def test_annotations_format_json_lines(bank: Bank) -> None:
    text = "\n".join(json.dumps(record(i)) for i in range(3))
    assert "JSON Lines" in only(train(bank.train_spec(text)), "annotations.format")[0].message


def test_annotations_record_not_an_object(bank: Bank) -> None:
    [finding] = only(train(bank.train_spec([record(0), ["not", "a", "record"], record(2)])), "annotations.record")
    assert finding.where.endswith("train.json#1")


def test_annotations_unique_id(bank: Bank) -> None:
    records = [record(i) for i in range(6)] + [record(9, id="clip-1")]
    [finding] = only(train(bank.train_spec(records)), "annotations.unique_id")
    assert finding.where.endswith("#6") and "record 1" in finding.message


def test_annotations_conversations(bank: Bank) -> None:
    records = [record(i) for i in range(4)]
    records[1]["conversations"] = records[1]["conversations"][:1]
    records[2]["conversations"][1]["value"] = "  "
    found = {f.where.rsplit("#", 1)[1]: f for f in only(train(bank.train_spec(records)), "annotations.conversations")}
    assert set(found) == {"1", "2"}
    assert "clip-1" in found["1"].message and "conversations" in found["1"].message


def test_annotations_media_key(bank: Bank) -> None:
    records = [record(i) for i in range(4)]
    records[3]["image"] = "a.png"
    assert only(train(bank.train_spec(records)), "annotations.media_key")[0].where.endswith("#3")


def test_annotations_video_fps_names_field_index_and_id(bank: Bank) -> None:
    records = [record(i) for i in range(6)]
    del records[3]["video_fps"]
    records[4]["video_fps"] = 0
    found = only(train(bank.train_spec(records)), "annotations.video_fps")
    assert [f.where.rsplit("#", 1)[1] for f in found] == ["3", "4"]
    assert "video_fps" in found[0].message and "record 3" in found[0].message and "clip-3" in found[0].message


def test_annotations_mixed_media(bank: Bank) -> None:
    (bank.media / "a.png").write_bytes(b"\0")
    records = [record(i) for i in range(4)] + [{"id": "img", "image": "a.png", "conversations": record(0)["conversations"]}]
    assert "packer" in only(train(bank.train_spec(records)), "annotations.mixed_media")[0].message


def test_annotations_media_exists(bank: Bank) -> None:
    records = [record(i) for i in range(3)] + [record(3, video="videos/missing.mp4")]
    [finding] = only(train(bank.train_spec(records)), "annotations.media_exists")
    assert finding.where.endswith("#3") and "missing.mp4" in finding.message


def test_annotations_media_escape(bank: Bank) -> None:
    (bank.root / "outside.mp4").write_bytes(b"\0")
    records = [record(0, video="../outside.mp4"), record(1, video=str(bank.root / "outside.mp4")), record(2)]
    found = only(train(bank.train_spec(records)), "annotations.media_escape")
    assert [f.where.rsplit("#", 1)[1] for f in found] == ["0", "1"]


def test_annotations_overlap_is_a_warning(bank: Bank) -> None:
    val = [record(100, id="clip-3"), record(101, conversations=record(5)["conversations"], video=record(5)["video"])]
    report = train(bank.train_spec(val=val))
    found = only(report, "annotations.overlap")
    assert {f.where.rsplit("#", 1)[1] for f in found} == {"3", "5"}
    assert all(f.severity == "warning" for f in found)
    assert report.ok


def test_annotations_empty(bank: Bank) -> None:
    assert only(train(bank.train_spec([])), "annotations.empty")[0].severity == "error"


def test_findings_are_capped_per_check_and_file(bank: Bank) -> None:
    records = [record(i, video_fps=None) for i in range(50)]
    found = only(train(bank.train_spec(records)), "annotations.video_fps")
    assert len(found) == 21
    assert "30 more" in found[-1].message and "50 in all" in found[-1].message


def test_vision_budget_long_clip(bank: Bank) -> None:
    records = [record(i) for i in range(4)] + [record(4, duration=900.0)]
    [finding] = only(train(bank.train_spec(records)), "vision.budget")
    assert finding.severity == "error" and finding.where.endswith("#4")
    assert "model_max_length" in finding.message and "vision_embeds" in finding.message


def test_vision_budget_nframes_longer_than_the_clip(bank: Bank) -> None:
    records = [record(i) for i in range(4)] + [record(4, duration=None, num_frames=6)]
    spec = bank.train_spec(records)
    spec["custom"]["vision"] = {"nframes": 16}
    found = only(train(spec), "vision.budget")
    assert any("6 frames" in f.message and f.where.endswith("#4") for f in found)


def test_vision_budget_unknown_lengths_warn_once(bank: Bank) -> None:
    records = [record(i, duration=None) for i in range(30)]
    [finding] = only(train(bank.train_spec(records)), "vision.budget")
    assert finding.severity == "warning" and "30 of 30" in finding.message and "--decode-sample" in finding.fix


def test_env_redis(bank: Bank, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(bank.root / "empty-bin"))
    [finding] = only(train(bank.train_spec(), backend="cosmos-rl"), "env.redis")
    assert finding.severity == "error" and "127" in finding.message


def test_env_hf_token_is_checked_by_name_never_printed(bank: Bank, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = bank.train_spec(policy={"model_name_or_path": "hf_model://nvidia/Cosmos-Reason2-8B", "parallelism": {"dp_shard_size": 1}})
    spec["train"]["ckpt"] = {"enable_checkpoint": False}
    [finding] = only(train(spec), "env.hf_token")
    assert finding.severity == "error" and "HF_TOKEN" in finding.message
    secret = "hf_" + "s3cr3t" * 5
    monkeypatch.setenv("HF_TOKEN", secret)
    report = train(spec)
    assert not [f for f in report.findings if f.check == "env.hf_token"]
    assert secret not in json.dumps(report.to_dict())


def test_env_model(bank: Bank) -> None:
    spec = bank.train_spec(policy={"model_name_or_path": str(bank.root / "no-such-model"), "parallelism": {"dp_shard_size": 1}})
    [finding] = only(train(spec), "env.model")
    assert finding.where == "policy.model_name_or_path" and "does not exist" in finding.message
    for ok in ("Qwen/Qwen3-VL-2B-Instruct", "hf_model://Qwen/Qwen2.5-VL-3B-Instruct", str(bank.model)):
        assert env_checks.resolve("k", ok).where in ("hub", "local")


def test_env_disk(bank: Bank, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(env_checks.shutil, "disk_usage", lambda path: usage(10, 10, 0))
    [finding] = only(train(bank.train_spec()), "env.disk")
    assert finding.severity == "error" and finding.where == "train.output_dir"


def test_media_decode_reports_a_broken_video(bank: Bank) -> None:
    write_mp4(bank.media / "videos/c0.mp4", frames=8, fps=4)
    (bank.media / "videos/c1.mp4").write_bytes(b"this is not a video")
    records = [record(0, id="good"), record(1, id="broken")]
    report = train(bank.train_spec(records), decode_sample=5)
    [finding] = only(report, "media.decode")
    assert finding.severity == "error" and finding.where.endswith("#1") and "c1.mp4" in finding.message
    assert report.stats["decoded"] == 2


def test_media_decode_measures_the_clip_for_the_budget(bank: Bank) -> None:
    write_mp4(bank.media / "videos/c0.mp4", frames=6, fps=4)
    spec = bank.train_spec([record(0, duration=None)])
    spec["custom"]["vision"] = {"nframes": 16}
    found = only(train(spec, decode_sample=1), "vision.budget")
    assert any("6 frames" in f.message for f in found)


def test_decode_sample_says_what_it_measured(bank: Bank) -> None:
    """--decode-sample reports the clip lengths it measured and the frames the spec's fps samples from them."""
    write_mp4(bank.media / "videos/c0.mp4", frames=8, fps=4)  # 2.0 s
    write_mp4(bank.media / "videos/c1.mp4", frames=24, fps=4)  # 6.0 s
    spec = bank.train_spec([record(0), record(1)])
    spec["custom"]["vision"] = {"fps": 2.0}
    decode = train(spec, decode_sample=2).stats["decode"]
    assert decode["clips"] == decode["decoded"] == 2 and decode["failed"] == 0
    assert decode["duration_s"] == {"min": 2.0, "median": 4.0, "max": 6.0}
    assert decode["frames_sampled"] == {"min": 4, "median": 8.0, "max": 12} and decode["sampling"] == "fps 2"
    assert "2 of 2 clip(s) decoded" in decode["summary"] and "frames sampled at fps 2" in decode["summary"]


def test_decode_sample_all_checks_every_clip(bank: Bank) -> None:
    write_mp4(bank.media / "videos/c0.mp4", frames=8, fps=4)
    (bank.media / "videos/c1.mp4").write_bytes(b"this is not a video")
    records = [record(i) for i in range(10)]  # 5 records on each file
    report = train(bank.train_spec(records), decode_sample=-1)
    assert report.stats["decoded"] == 10 and report.stats["decode"]["requested"] == "all"
    assert report.stats["decode"]["failed"] == 5 and len(only(report, "media.decode")) == 5


def test_decode_sample_flag_accepts_all() -> None:
    from skillbank.commands.flags import parse_count
    from skillbank.preflight.decode import ALL

    assert parse_count("all") == ALL and parse_count("3") == 3
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_count("-2")


def test_cache_stale(bank: Bank) -> None:
    cache = bank.media / ".skillbank_cache"
    cache.mkdir()
    (cache / "cache_meta.json").write_text(json.dumps({"fps": 1.0, "nframes": None, "total_pixels": 1000, "max_pixels": None}))
    other = cache / "0123456789abcdef"
    other.mkdir()
    (other / "cache_key.json").write_text(json.dumps({"format": 1, "fps": 4.0, "nframes": None, "total_pixels": 1000, "max_pixels": None}))
    found = only(train(bank.train_spec()), "cache.stale")
    severities = {Path(f.where).name: f.severity for f in found}
    assert severities == {"cache_meta.json": "error", "0123456789abcdef": "warning"}
    assert "fps=1.0" in found[0].message


def test_inputs_are_never_modified(bank: Bank) -> None:
    spec = bank.train_spec([record(i) for i in range(5)] + [record(1)])
    spec_path = bank.root / "train.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    files = [spec_path, Path(spec["custom"]["train_dataset"]["annotation_path"])]
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    listing = sorted(str(p) for p in bank.root.rglob("*"))
    report = run_preflight(skill=SKILL, action="train", spec_path=spec_path, backend="local")
    assert not report.ok
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == before
    assert sorted(str(p) for p in bank.root.rglob("*")) == listing


def test_evaluate_action(bank: Bank) -> None:
    ann = bank.annotations([record(0), record(1, video="videos/none.mp4")], "eval.json")
    spec = {"dataset": {"annotation_path": str(ann), "media_dir": str(bank.media)}, "model": {"model_name": str(bank.root / "missing")}}
    report = run_preflight(skill=SKILL, action="evaluate", spec=spec, gpus_per_node=1, nodes=1)
    assert {f.check for f in report.errors} == {"annotations.media_exists", "env.model"}
    assert report.stats["records"] == {"eval": 2}


@pytest.mark.parametrize(
    ("action", "spec", "check"),
    [
        ("inference", {"model_path": "./nowhere/model", "video": "x.mp4"}, "env.model"),
        ("quantize", {"model_path": ""}, "spec.model"),  # names nothing anywhere: a spec error
        ("export", {"source": "/no/such/step_10"}, "env.model"),
        ("inference", {"model_path": "Qwen/Qwen3-VL-2B-Instruct", "fps": 0}, "spec.schema"),
    ],
)
def test_other_actions(action: str, spec: dict, check: str) -> None:
    report = run_preflight(skill=SKILL, action=action, spec=spec)
    assert check in {f.check for f in report.errors}



def test_evaluate_spec_from_toml(bank: Bank) -> None:
    ann = bank.annotations([record(0), record(1)], "eval.json")
    path = bank.root / "eval.toml"
    path.write_text(f'[dataset]\nannotation_path = "{ann}"\nmedia_dir = "{bank.media}"\n\n[model]\nmodel_name = "{bank.model}"\n')
    report = run_preflight(skill=SKILL, action="evaluate", spec_path=path)
    assert report.ok and report.findings == [] and report.stats["records"] == {"eval": 2}


def test_spec_model_family_the_cosmos_rl_backend_cannot_train(bank: Bank, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_checks.shutil, "which", lambda name: "/usr/bin/" + name)
    (bank.model / "config.json").write_text(json.dumps({"model_type": "llava"}))
    [finding] = only(train(bank.train_spec(), backend="cosmos-rl"), "spec.model")  # wrong wherever the job runs
    assert "llava" in finding.message and finding.where == "policy.model_name_or_path"


def test_vision_budget_nframes_too_many_for_every_sample(bank: Bank) -> None:
    spec = bank.train_spec()
    spec["custom"]["vision"] = {"nframes": 1000}
    found = [f for f in only(train(spec), "vision.budget") if f.where == "custom.vision.nframes"]
    assert found and found[0].severity == "error"


def test_annotations_overlap_compares_files_across_media_folders(bank: Bank) -> None:
    other_media = bank.root / "other"
    (other_media / "videos").mkdir(parents=True)
    for i in range(2):
        (other_media / f"videos/c{i}.mp4").write_bytes(b"\0")
    val = [record(100, conversations=record(5)["conversations"], video=record(5)["video"])]
    spec = bank.train_spec(val=val)
    spec["custom"]["val_dataset"]["media_path"] = str(other_media)  # same relative path, another file
    assert not [f for f in train(spec).findings if f.check == "annotations.overlap"]
    spec["custom"]["val_dataset"]["media_path"] = str(bank.root)
    val[0]["video"] = "media/" + val[0]["video"]  # the same file, named from another folder
    bank.annotations(val, "val.json")
    assert [f.where.rsplit("#", 1)[1] for f in only(train(spec), "annotations.overlap")] == ["5"]


def test_quantize_calibration_keys_are_said_unused(bank: Bank) -> None:
    """No scheme calibrates today (round to nearest): a calibration set given is a warning, so no agent reports the
    model as calibrated (an agent benchmark found preflight silent)."""
    ann = bank.annotations([record(0)], "cal.json")
    spec = {"model_path": str(bank.model), "scheme": "W4A16", "calibration_annotation_path": str(ann), "output_dir": str(bank.root / "q")}
    report = run_preflight(skill=SKILL, action="quantize", spec=spec)
    [warning] = [f for f in report.findings if f.check == "spec.calibration_unused"]
    assert warning.severity == "warning" and "round" in warning.message
