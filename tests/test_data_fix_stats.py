"""`skillbank data fix` / `data stats` on generated clips, and `preflight --decode-sample all` over train and val."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_preflight_checks import Bank, record, train, write_mp4


@pytest.fixture
def bank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Bank:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return Bank(tmp_path)


def test_decode_sample_all_decodes_the_val_set_too(bank: Bank) -> None:
    """all: every clip train and val read (the val warning no longer asks for the flag just passed); K: train only."""
    write_mp4(bank.media / "videos/c0.mp4", frames=8, fps=4)
    (bank.media / "videos/c1.mp4").write_bytes(b"this is not a video")
    train_records = [record(i, duration=None) for i in range(4)]
    val_records = [record(i, id=f"val-{i}", duration=None) for i in range(10, 14)]
    spec = bank.train_spec(train_records, val=val_records)
    report = train(spec, decode_sample=-1)
    decode = report.stats["decode"]
    assert report.stats["decoded"] == 8 and decode["clips"] == 8 and decode["failed"] == 4
    assert {role: d["clips"] for role, d in decode["datasets"].items()} == {"train": 4, "val": 4}
    broken = [f.where for f in report.findings if f.check == "media.decode"]
    assert any(w.startswith(str(bank.root / "val.json")) for w in broken) and any(w.startswith(str(bank.root / "train.json")) for w in broken)
    unknown = [f for f in report.findings if f.check == "vision.budget" and "state no clip length" in f.message]
    assert all("val set" not in f.message or "2 of 4" in f.message for f in unknown)  # only the broken clips stay unmeasured
    sampled = train(spec, decode_sample=3)
    assert sampled.stats["decoded"] == 3 and "datasets" not in sampled.stats["decode"]
    [val_warning] = [f for f in sampled.findings if f.check == "vision.budget" and "val set" in f.message]
    assert "--decode-sample all" in val_warning.fix and "data fix" in val_warning.fix


# ---- data fix ---------------------------------------------------------------------------------------

from helpers import ROOT, json_out, skillbank  # noqa: E402

SKILL_NAME = "tao-finetune-cosmos-reason"


def _rec(i: int, video: str, **meta) -> dict:
    return {"id": f"r{i}", "video": video, **meta, "conversations": [{"from": "human", "value": "<video>\nIs it red?"}, {"from": "gpt", "value": "yes" if i % 2 else "no"}]}


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    """Three clips at 12, 30 and 5 fps (2 s, 1 s, 2 s; 64x48) under tmp_path/videos."""
    for name, frames, fps in (("a", 24, 12), ("b", 30, 30), ("c", 10, 5)):
        write_mp4(tmp_path / f"videos/{name}.mp4", frames=frames, fps=fps)
    return tmp_path


def test_fix_writes_fps_and_length_from_the_containers(clips: Path) -> None:
    records = [
        _rec(0, "videos/a.mp4"),  # nothing stated
        _rec(1, "videos/b.mp4", video_fps=8.0, duration=3, extra="kept"),  # both wrong
        _rec(2, "videos/c.mp4", video_fps=5, duration=2.0, num_frames=10, width=64, height=48),  # right: untouched
        {"id": "img", "image": "x.png", "conversations": []},
    ]
    ann = clips / "ann.json"
    ann.write_text(json.dumps(records))
    before = ann.read_bytes()
    proc = skillbank("data", "fix", str(ann), "--out", str(clips / "fixed.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    assert ann.read_bytes() == before  # the input is never written
    fixed = json.loads((clips / "fixed.json").read_text())
    assert fixed[0] | {} == records[0] | {"video_fps": 12.0, "duration": 2.0, "num_frames": 24, "width": 64, "height": 48}
    assert (fixed[1]["video_fps"], fixed[1]["duration"], fixed[1]["extra"]) == (30.0, 1.0, "kept")
    assert fixed[2] == records[2] and fixed[3] == records[3]
    assert doc["changed_records"] == 2 and doc["written"] == 4 and doc["clips_probed"] == 3
    assert doc["fields"]["video_fps"] == {"added": 1, "corrected": 1, "first_records": [0, 1]}
    assert doc["fields"]["num_frames"] == {"added": 2, "corrected": 0, "first_records": [0, 1]}
    # the fixed copy passes preflight's video_fps rule and its stats agree with the file
    stats = json_out(skillbank("data", "stats", str(clips / "fixed.json"), "--json"))
    assert stats["clips"]["without_length"] == 0 and stats["clips"]["frame_rates"] == {"12": 1, "30": 1, "5": 1}


def test_fix_refuses_in_place_and_names_unreadable_clips(clips: Path) -> None:
    (clips / "videos/broken.mp4").write_bytes(b"not a video")
    records = [_rec(0, "videos/a.mp4"), _rec(1, "videos/broken.mp4"), _rec(2, "videos/missing.mp4")]
    ann = clips / "ann.json"
    ann.write_text(json.dumps(records))
    same = skillbank("data", "fix", str(ann), "--out", str(ann))
    assert same.returncode == 2 and "is the input file" in same.stderr
    out = clips / "fixed.json"
    bad = skillbank("data", "fix", str(ann), "--out", str(out), "--json")
    assert bad.returncode == 2 and not out.exists()
    error = json_out(bad)["error"]
    assert error["where"] == f"{ann}#1" and "record 1 (id 'r1')" in error["message"] and "record 2 (id 'r2')" in error["message"]
    assert "--skip-bad" in error["fix"]
    skipped = json_out(skillbank("data", "fix", str(ann), "--out", str(out), "--skip-bad", "--json"))
    assert [s["record"] for s in skipped["skipped"]] == [1, 2] and skipped["written"] == 1
    assert [r["id"] for r in json.loads(out.read_text())] == ["r0"]


def test_fix_reads_media_from_media_root(clips: Path) -> None:
    ann = clips / "ann" / "train.json"
    ann.parent.mkdir()
    ann.write_text(json.dumps([_rec(0, "videos/c.mp4")]))
    assert skillbank("data", "fix", str(ann), "--out", str(clips / "f.json")).returncode == 2  # relative to ann/ by default
    proc = skillbank("data", "fix", str(ann), "--out", str(clips / "f.json"), "--media-root", str(clips))
    assert proc.returncode == 0 and "1 of 1 records changed" in proc.stdout
    assert json.loads((clips / "f.json").read_text())[0]["video_fps"] == 5.0


# ---- data stats -------------------------------------------------------------------------------------


def test_stats_counts_tokens_as_preflight_does(bank: Bank) -> None:
    """tokens_per_sample is preflight's own figure for the same file and spec; each sample is VisionBudget.estimate."""
    from skillbank.preflight.vision import TokenTally, VisionBudget, clip_from_record, text_chars
    from skillbank.specification.registry import spec_model

    (bank.model / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))  # patch 14
    records = [record(i, duration=2.0 + i, family="color" if i % 3 else "shape") for i in range(6)] + [record(9, duration=None)]
    records[1]["width"], records[1]["height"] = 64, 48
    spec = bank.train_spec(records, custom__vision={"fps": 4.0, "total_pixels": 2_000_000})
    spec_file = bank.root / "train.yaml"
    spec_file.write_text(json.dumps(spec))
    proc = skillbank("data", "stats", str(bank.root / "train.json"), "--spec", str(spec_file), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    budget = VisionBudget.from_train_spec(spec_model(SKILL_NAME, "train").model_validate(spec), 14)
    tally = TokenTally()
    for r in records:
        clip = clip_from_record(r)
        if clip is not None:
            tally.add(budget.estimate(clip, text_chars(r)), clip)
    assert doc["tokens_per_sample"] == tally.to_dict() and tally.samples == 6
    assert doc["vision"]["patch_size"] == 14 and doc["vision"]["fps"] == 4.0 and doc["vision"]["total_pixels"] == 2_000_000
    assert doc["longest_safe_clip_s"] == round(budget.longest_safe_clip(), 3)
    assert doc["tokens_per_sample"] == train(spec, probe_sample=0).stats["tokens_per_sample"]  # the stated lengths (preflight also probes the rest by default)
    probed = train(spec).stats  # the record that states no length: its clip's headers are read; this bank's file is no mp4
    t = probed["tokens_per_sample"]
    assert probed["probe"]["records"] == 1 and probed["probe"]["unreadable"] == 1 and t["samples"] == 7 and t["budget"] == 1 and t["bound"] == "budget"
    assert t["mean"] == round((tally.total + budget.fill_tokens(text_chars(records[-1]))) / 7, 1)  # an unreadable clip counts the whole vision budget
    assert doc["records"] == 7 and doc["families"] == {"color": 4, "shape": 2, "": 1}
    assert doc["answers"]["color"] == {"distinct": 1, "top": [{"answer": "yes", "records": 4, "answers": 4}]}
    assert doc["turns"] == {"answers": 7, "per_turn": {"1": 7}, "records_by_answers": {"1": 7}, "multi_turn_records": 0}
    assert doc["clips"]["with_length"] == 6 and doc["clips"]["without_length"] == 1
    # lengths are per clip (as `data import` states them): the six records name two clips, c0 and c1, each its first record's length
    assert doc["clips"]["distinct_with_length"] == 2 and doc["clips"]["duration_s"] == {"min": 2.0, "median": 2.5, "max": 3.0}


def test_stats_defaults_to_the_train_template_and_probes_on_request(clips: Path) -> None:
    from skillbank.preflight.vision import Clip, VisionBudget, text_chars
    from skillbank.specification.build import load_template
    from skillbank.specification.registry import spec_model

    ann = clips / "ann.json"
    records = [_rec(0, "videos/a.mp4"), _rec(1, "videos/b.mp4", video_fps=30.0)]
    ann.write_text(json.dumps(records))
    plain = json_out(skillbank("data", "stats", str(ann), "--json"))
    assert plain["vision"]["source"] == "the train template" and plain["tokens_per_sample"] is None
    assert plain["clips"]["without_length"] == 2 and plain["clips"]["frame_rates"] == {"30": 1}
    probed = json_out(skillbank("data", "stats", str(ann), "--probe", "--json"))
    assert probed["probed"]["clips"] == 2 and probed["probed"]["failed"] == 0
    assert probed["clips"]["duration_s"] == {"min": 1.0, "median": 1.5, "max": 2.0} and probed["clips"]["frame_rates"] == {"30": 1, "12": 1}
    budget = VisionBudget.from_train_spec(spec_model(SKILL_NAME, "train").model_validate(load_template(SKILL_NAME, "train")), 16)
    highs = [budget.estimate(c, text_chars(r)).high for c, r in zip((Clip(24, 12.0, 64, 48), Clip(30, 30.0, 64, 48)), records)]
    assert probed["tokens_per_sample"]["max"] == max(highs) and probed["tokens_per_sample"]["bound"] == "exact"
    text = skillbank("data", "stats", str(ann))
    assert text.returncode == 0 and "state no length" in text.stdout and "train template" in text.stdout


def test_stats_refuses_a_spec_without_a_token_budget(tmp_path: Path) -> None:
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps([_rec(0, "videos/a.mp4", video_fps=4.0)]))
    spec = tmp_path / "eval.yaml"
    spec.write_text(json.dumps({"model": {"model_name": "nvidia/Cosmos-Reason2-8B"}, "dataset": {"annotation_path": str(ann)}}))
    proc = skillbank("data", "stats", str(ann), "--spec", str(spec), "--json")
    assert proc.returncode == 2 and json_out(proc)["error"]["where"] == "--spec"


def test_stats_and_fix_help_import_no_torch(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_agent_commands_fast import HEAVY, PROBE

    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps([_rec(0, "videos/a.mp4", video_fps=4.0, duration=3.0)]))
    for argv in (["data", "stats", str(ann), "--json"], ["data", "fix", "--help"]):
        proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1:] in ([], [""]), f"{argv} imported {proc.stdout.strip()}"
