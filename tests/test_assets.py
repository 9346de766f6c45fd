"""The embedded default: tiny offline Qwen-VL models and the synthetic demo dataset."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from skillbank.assets import demo_dataset as demo
from skillbank.assets import store
from skillbank.errors import InputError


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# --- tiny model ------------------------------------------------------------------------------------


def test_tiny_model_loads_offline_with_auto_classes(tiny_model_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert 1_000_000 < sum(p.numel() for p in model.parameters()) < 1_500_000
    tok = processor.tokenizer
    assert 1000 <= len(tok) <= 1100
    for special in ("<|im_start|>", "<|im_end|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|endoftext|>"):
        assert tok.convert_tokens_to_ids(special) != tok.unk_token_id
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    # every demo answer is a single token, so exact-match answers are one greedy step
    for word in demo.ANSWER_WORDS:
        assert len(tok.encode(word, add_special_tokens=False)) == 1, word
    chat = [{"role": "user", "content": [{"type": "video", "video": "x.mp4"}, {"type": "text", "text": "Is the ball red?"}]}]
    text = processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|vision_start|><|video_pad|><|vision_end|>Is the ball red?<|im_end|>\n<|im_start|>assistant\n")
    assert processor.video_processor.size["longest_edge"] == 28 * 28 * 256


def test_tiny_model_is_deterministic_given_the_seed(tiny_model_dir, tmp_path):
    from skillbank.assets.tiny_model import build_tiny_model

    same = build_tiny_model(tmp_path / "again", family="qwen2_5_vl", seed=0)
    assert _digest(same) == _digest(tiny_model_dir)
    other = build_tiny_model(tmp_path / "seed1", family="qwen2_5_vl", seed=1)
    assert _digest(other)["model.safetensors"] != _digest(tiny_model_dir)["model.safetensors"]
    assert _digest(other)["tokenizer.json"] == _digest(tiny_model_dir)["tokenizer.json"]


def test_qwen3_vl_family_builds_and_does_a_forward_backward(tiny_qwen3_model_dir, demo_dataset_dir, tmp_path):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from skillbank.data.examples import ExampleBuilder, VisionSettings, collate
    from skillbank.data.records import load_records

    processor = AutoProcessor.from_pretrained(tiny_qwen3_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen3_model_dir)
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    builder = ExampleBuilder(
        processor, model_path=tiny_qwen3_model_dir, vision=VisionSettings(fps=8.0), system_prompt="You are a helpful assistant.",
        media_path=demo_dataset_dir / "train", cache_root=None,
    )
    records = load_records(demo_dataset_dir / "train" / "annotations.json")[:2]
    examples = [builder(r) for r in records]
    assert examples[0]["video_grid_thw"].tolist() == [[8, 4, 4]]  # 16 frames 64x64, patch 16, temporal 2
    batch = collate(examples, processor.tokenizer.pad_token_id)
    out = model(**batch)
    out.loss.backward()
    assert torch.isfinite(out.loss)
    grads = [p.grad for p in model.model.visual.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_unknown_family_is_input_error(tmp_path):
    from skillbank.assets.tiny_model import build_tiny_model

    with pytest.raises(InputError, match="unknown model family"):
        build_tiny_model(tmp_path / "m", family="llava")


# --- demo dataset ----------------------------------------------------------------------------------


def _centre_x(frame) -> float:
    import numpy as np

    lit = frame.sum(axis=-1) > 150
    cols = np.nonzero(lit.any(axis=0))[0]
    return float(cols.mean())


def test_demo_dataset_layout_families_and_answers(demo_dataset_dir):
    from skillbank.data.video import decode_video

    train = json.loads((demo_dataset_dir / "train" / "annotations.json").read_text())
    val = json.loads((demo_dataset_dir / "val" / "annotations.json").read_text())
    assert len(train) == 24 and len(val) == 9
    for split, records in (("train", train), ("val", val)):
        families = Counter(r["family"] for r in records)
        assert set(families) == set(demo.FAMILIES) and min(families.values()) >= 3
        for r in records:
            assert set(r) >= {"id", "video", "video_fps", "conversations", "family"}
            human, gpt = r["conversations"]
            assert human["from"] == "human" and human["value"].startswith("<video>\n")
            assert gpt["from"] == "gpt" and gpt["value"] in demo.ANSWER_WORDS
            assert (demo_dataset_dir / split / r["video"]).is_file()
            if r["family"] == "yes_no":
                assert human["value"].endswith("Answer yes or no.")
            elif r["family"] == "directionality":
                assert human["value"].endswith("Answer left, right or straight.")
            else:
                assert human["value"].endswith("Answer with one word.")
    for split, records in (("train", train), ("val", val)):  # balanced over the ball colours; train adds distractors (no)
        asked = [(r["conversations"][0]["value"].split("Is the ball ")[1].split("?")[0], r["conversations"][1]["value"])
                 for r in records if r["family"] == "yes_no"]
        on_balls = Counter(answer for colour, answer in asked if colour in demo.COLOURS)
        assert on_balls["yes"] - on_balls["no"] in (0, 1) and on_balls["no"] > 0  # yes first: an odd count has one more
        distractors = [answer for colour, answer in asked if colour in demo.DISTRACTORS]
        assert distractors == (["no"] * (len(asked) // demo.DISTRACTOR_EVERY) if split == "train" else [])
    directions = Counter(r["conversations"][1]["value"] for r in train if r["family"] == "directionality")
    assert set(directions) == {"left", "right", "straight"} and max(directions.values()) - min(directions.values()) <= 1

    # the pixels agree with the answers
    for r in train[:9]:
        frames, meta = decode_video(demo_dataset_dir / "train" / r["video"])
        assert tuple(frames.shape) == (16, 3, 64, 64) and meta["fps"] == 8.0 and meta["duration"] == 2.0
        hwc = frames.permute(0, 2, 3, 1).numpy()
        shift = _centre_x(hwc[-1]) - _centre_x(hwc[0])
        direction = r["attributes"]["direction"]
        assert {"left": shift < -30, "right": shift > 30, "straight": abs(shift) < 3}[direction], (r["id"], shift)
        lit = hwc[8][hwc[8].sum(axis=-1) > 150]
        mean = lit.mean(axis=0)
        assert abs(mean - demo.COLOURS[r["attributes"]["colour"]]).max() < 40


def test_demo_dataset_clips_differ_across_splits():
    """No validation clip repeats a training clip byte for byte (the full demo's 2,100 + 315 clips drew
    47 repeats before clips were redrawn; skillbank compare's overlap check reads mp4 bytes)."""
    import random

    used: set[tuple] = set()
    for split_index, count in enumerate(demo.split_sizes(2100).values()):
        rng = random.Random(f"0/{split_index}")
        for i in range(count):
            demo.make_record(rng, "x", i, demo.FAMILIES[i % 3], i // 3, used)
    assert len(used) == 2100 + 315


def test_demo_dataset_is_deterministic_and_cached(tmp_path):
    a = demo.build_demo_dataset(tmp_path / "a", records=6, seed=3)
    b = demo.build_demo_dataset(tmp_path / "b", records=6, seed=3)
    digest = _digest(a)
    assert digest == _digest(b)
    assert _digest(demo.build_demo_dataset(tmp_path / "c", records=6, seed=4)) != digest
    # same folder, same asset: reused; other arguments into it: refused
    assert demo.build_demo_dataset(tmp_path / "a", records=6, seed=3) == a
    with pytest.raises(InputError, match="already exists"):
        demo.build_demo_dataset(tmp_path / "a", records=9, seed=3)
    # the shared cache: built once, then the same folder
    cached = demo.build_demo_dataset(None, records=6, seed=3)
    assert cached.parent.parent.name != "" and (cached / store.STAMP).is_file()
    assert demo.build_demo_dataset(None, records=6, seed=3) == cached
    copied = demo.build_demo_dataset(tmp_path / "d", records=6, seed=3, cache=True)
    assert _digest(copied) == digest


def test_builds_are_atomic_on_failure(tmp_path):
    def broken(folder: Path) -> None:
        (folder / "half.txt").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.build_folder(tmp_path / "asset", kind="k", args={}, version="v", build=broken)
    assert not (tmp_path / "asset").exists()
    assert not list(tmp_path.iterdir())  # no temp folder left behind


def test_cli_commands(tmp_path, capsys):
    from skillbank.cli import main

    assert main(["make-demo-dataset", "--out", str(tmp_path / "demo"), "--records", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["records"] == {"train": 3, "val": 9}
    assert Path(doc["train"]).is_file()
    assert main(["make-tiny-model", "--family", "qwen3_vl", "--out", str(tmp_path / "m"), "--seed", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["family"] == "qwen3_vl" and (Path(doc["path"]) / "config.json").is_file()
    with pytest.raises(SystemExit):
        main(["make-tiny-model", "--help"])
    assert "Cosmos-Reason2" in capsys.readouterr().out
