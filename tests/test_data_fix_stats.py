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
