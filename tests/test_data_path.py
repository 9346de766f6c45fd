"""The one data path of both backends: mp4 -> frames, LLaVA record -> chat -> processor -> tensors."""

from __future__ import annotations

import json

import pytest

from skillbank.data import chat, video
from skillbank.data.records import load_records
from skillbank.errors import InputError

SYSTEM = "You are a helpful assistant."


@pytest.fixture(scope="module")
def processor(tiny_model_dir):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def records(demo_dataset_dir):
    return load_records(demo_dataset_dir / "train" / "annotations.json")


def builder_for(processor, model_dir, data_dir, cache_root=None, **vision):
    from skillbank.data.examples import ExampleBuilder, VisionSettings

    settings = VisionSettings(**({"fps": 8.0} | vision)) if "nframes" not in vision else VisionSettings(fps=None, **vision)
    return ExampleBuilder(processor, model_path=model_dir, vision=settings, system_prompt=SYSTEM, media_path=data_dir / "train", cache_root=cache_root)


# --- video -----------------------------------------------------------------------------------------


def test_decode_video_gives_uint8_tchw_and_metadata(demo_dataset_dir, records):
    import torch

    frames, meta = video.decode_video(demo_dataset_dir / "train" / records[0]["video"])
    assert frames.dtype == torch.uint8 and tuple(frames.shape) == (16, 3, 64, 64)
    assert meta == {"fps": 8.0, "total_num_frames": 16, "duration": 2.0}
    with pytest.raises(ValueError, match="cannot decode"):
        video.decode_video(demo_dataset_dir / "train" / "annotations.json")


@pytest.mark.parametrize("total,src_fps,kw", [(16, 8.0, {"fps": 2.0}), (16, 8.0, {"fps": 8.0}), (300, 30.0, {"fps": 2.0}),
                                              (31, 10.0, {"fps": 3.0}), (16, 8.0, {"nframes": 6}), (100, 25.0, {"nframes": 7})])
def test_frame_sampling_matches_qwen_vl_utils(total, src_fps, kw):
    import torch
    from qwen_vl_utils.vision_process import smart_nframes

    n = smart_nframes(dict(kw), total_frames=total, video_fps=src_fps)
    assert video.num_sampled_frames(total, src_fps, **kw) == n
    expected = torch.linspace(0, total - 1, n).round().long().tolist()
    assert video.sample_indices(total, src_fps, **kw) == expected


def test_frame_sampling_needs_exactly_one_of_fps_and_nframes():
    with pytest.raises(ValueError, match="exactly one"):
        video.sample_indices(16, 8.0, fps=2.0, nframes=4)
    with pytest.raises(ValueError, match="exactly one"):
        video.sample_indices(16, 8.0)


# --- chat ------------------------------------------------------------------------------------------


def test_record_to_chat(records, demo_dataset_dir):
    record = records[0]
    messages = chat.build_messages(record, media_path=demo_dataset_dir / "train", system_prompt=SYSTEM, fps=2.0, total_pixels=12345)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    video_entry, text = messages[1]["content"]
    assert video_entry == {"type": "video", "video": str(demo_dataset_dir / "train" / record["video"]), "fps": 2.0, "total_pixels": 12345}
    assert text == {"type": "text", "text": record["conversations"][0]["value"].replace("<video>\n", "")}
    assert "<video>" not in text["text"]
    assert messages[2]["content"] == record["conversations"][1]["value"]
    prompt_only = chat.build_messages(record, media_path="", nframes=8, with_answer=False)
    assert [m["role"] for m in prompt_only] == ["user"] and prompt_only[0]["content"][0]["nframes"] == 8
    with pytest.raises(InputError, match="exactly one"):
        chat.build_messages(record, fps=2.0, nframes=8)
    assert chat.prompt_and_answer(record) == (text["text"], record["conversations"][1]["value"])


def with_system_turn(record, text):
    return {**record, "conversations": [{"from": "system", "value": text}, *record["conversations"]]}


def test_a_record_system_turn_replaces_the_run_system_prompt(records):
    """A record opening with {from: system} keeps that prompt instead of the run's (training and
    evaluation: build_messages is their one chat builder); an empty one means no system message; a
    system turn anywhere else is rejected, naming the record and the fix."""
    record = records[0]
    own = with_system_turn(record, "Answer in French.")
    assert chat.own_system_prompt(own) == "Answer in French." and chat.own_system_prompt(record) is None
    for with_answer in (True, False):
        messages = chat.build_messages(own, system_prompt=SYSTEM, fps=2.0, with_answer=with_answer)
        assert messages[0] == {"role": "system", "content": "Answer in French."}
        assert [m["role"] for m in messages] == ["system", "user", "assistant"][: 3 if with_answer else 2]
        assert chat.build_messages(record, system_prompt=SYSTEM, fps=2.0, with_answer=with_answer)[0]["content"] == SYSTEM
    assert chat.build_messages(own, fps=2.0)[0]["content"] == "Answer in French."  # no run prompt: the record's still applies
    assert [m["role"] for m in chat.build_messages(with_system_turn(record, ""), system_prompt=SYSTEM, fps=2.0)] == ["user", "assistant"]
    assert chat.prompt_and_answer(own) == chat.prompt_and_answer(record)
    human, gpt = record["conversations"]
    misplaced = {**record, "id": "late", "conversations": [human, {"from": "system", "value": "Answer in French."}, gpt]}
    with pytest.raises(InputError, match="turn 1 of record late is a system turn") as info:
        chat.build_messages(misplaced, system_prompt=SYSTEM, fps=2.0)
    assert info.value.where == "record late" and "start of conversations" in info.value.fix


def test_load_records_rejects_wrong_shapes(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"not": "a list"}))
    (tmp_path / "b.json").write_text("[{]")
    (tmp_path / "c.json").write_text(json.dumps([{"id": 1}]))
    for name, match in (("a.json", "JSON array"), ("b.json", "not valid JSON"), ("c.json", "record 0"), ("missing.json", "not found")):
        with pytest.raises(InputError, match=match):
            load_records(tmp_path / name)


# --- examples --------------------------------------------------------------------------------------


def test_example_tensors_and_labels(processor, tiny_model_dir, demo_dataset_dir, records):
    build = builder_for(processor, tiny_model_dir, demo_dataset_dir)
    tok = processor.tokenizer
    for record in records[:3]:
        ex = build(record)
        assert set(ex) == {"input_ids", "attention_mask", "labels", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts"}
        answer = tok.decode(ex["input_ids"][ex["labels"] != -100])
        assert answer == record["conversations"][1]["value"] + "<|im_end|>"
        assert ex["video_grid_thw"].tolist() == [[8, 4, 4]]  # 16 frames -> 8 temporal patches; 64px -> 56px -> 4x4 patches
        video_tokens = int((ex["input_ids"] == tok.convert_tokens_to_ids("<|video_pad|>")).sum())
        assert video_tokens == 8 * 4 * 4 // 4
        assert ex["pixel_values_videos"].shape == (8 * 4 * 4, 3 * 2 * 14 * 14)
        assert ex["second_per_grid_ts"].tolist() == [0.25]  # temporal patch 2 / 8 fps
        assert int(ex["attention_mask"].sum()) == ex["input_ids"].shape[0]


def test_vision_settings_pick_frames_and_pixels(processor, tiny_model_dir, demo_dataset_dir, records, tmp_path):
    import numpy as np

    from skillbank.assets.demo_dataset import write_mp4

    assert builder_for(processor, tiny_model_dir, demo_dataset_dir, fps=2.0)(records[0])["video_grid_thw"].tolist() == [[2, 4, 4]]
    assert builder_for(processor, tiny_model_dir, demo_dataset_dir, nframes=8)(records[0])["video_grid_thw"].tolist() == [[4, 4, 4]]
    # a bigger clip: the per-frame budget (total_pixels / frames, or max_pixels) shrinks the grid
    frames = np.zeros((8, 128, 128, 3), dtype=np.uint8)
    frames[:, 40:80, 40:80] = 200
    (tmp_path / "train").mkdir()
    write_mp4(tmp_path / "train" / "big.mp4", frames, fps=8)
    record = {"id": "big", "video": "big.mp4", "conversations": [{"from": "human", "value": "<video>\nQ?"}, {"from": "gpt", "value": "yes"}]}
    full = builder_for(processor, tiny_model_dir, tmp_path, fps=8.0)(record)["video_grid_thw"].tolist()
    assert full == [[4, 10, 10]]  # 128 px -> 140 px (multiple of 28)
    capped = builder_for(processor, tiny_model_dir, tmp_path, fps=8.0, max_pixels=56 * 56)(record)["video_grid_thw"].tolist()
    assert capped == [[4, 4, 4]]
    budget = builder_for(processor, tiny_model_dir, tmp_path, fps=8.0, total_pixels=84 * 84 * 4)(record)["video_grid_thw"].tolist()
    assert budget == [[4, 6, 6]]  # 84*84*4 pixels over 8 frames x 2 -> at most 84x84 per frame


def test_generation_prompt_sees_what_training_sees(processor, tiny_model_dir, demo_dataset_dir, records, tmp_path):
    """Evaluation's prompt comes from the training data path: same frames and resolution, and its
    tokens are the training tokens up to the answer; a broken video names its record."""
    import torch

    from skillbank.data.prompts import PromptBuilder

    settings = {"fps": 2.0, "total_pixels": 84 * 84 * 4}
    train = builder_for(processor, tiny_model_dir, demo_dataset_dir, **settings)
    prompts = PromptBuilder(processor, vision=train.vision, system_prompt=SYSTEM, media_path=demo_dataset_dir / "train")
    for record in records[:2]:
        example, prompt = train(record), prompts(record)
        assert torch.equal(prompt["video_grid_thw"], example["video_grid_thw"])
        assert torch.allclose(prompt["pixel_values_videos"], example["pixel_values_videos"], atol=1e-5)
        assert torch.equal(prompt["second_per_grid_ts"], example["second_per_grid_ts"])
        n = prompt["input_ids"].shape[0]
        assert torch.equal(prompt["input_ids"], example["input_ids"][:n])
        assert processor.tokenizer.decode(example["input_ids"][n:]) == record["conversations"][1]["value"] + "<|im_end|>\n"
    (tmp_path / "broken.mp4").write_bytes(b"not a video")
    broken = {"id": "b1", "video": "broken.mp4", "conversations": [{"from": "human", "value": "<video>\nQ?"}, {"from": "gpt", "value": "A"}]}
    with pytest.raises(InputError, match="cannot decode") as info:
        PromptBuilder(processor, vision=train.vision, system_prompt=SYSTEM, media_path=tmp_path)(broken)
    assert info.value.where == "record b1" and "re-encode" in info.value.fix


def test_a_record_system_turn_reaches_the_tokens_of_training_and_evaluation(processor, tiny_model_dir, demo_dataset_dir, records, tmp_path):
    """Through ExampleBuilder (both backends' examples) and PromptBuilder (evaluation): the record's own
    system turn replaces the builder's system prompt in the token ids, and the example cache keys differ."""
    from skillbank.data.prompts import PromptBuilder

    tok = processor.tokenizer
    build = builder_for(processor, tiny_model_dir, demo_dataset_dir, cache_root=tmp_path / "cache", fps=2.0)
    record = records[0]
    own = with_system_turn(record, "Answer in French.")
    plain, mine = build(record), build(own)
    assert plain["input_ids"].tolist() != mine["input_ids"].tolist()
    assert SYSTEM in tok.decode(plain["input_ids"]) and SYSTEM not in tok.decode(mine["input_ids"])
    assert "<|im_start|>system\nAnswer in French.<|im_end|>" in tok.decode(mine["input_ids"])
    assert tok.decode(mine["input_ids"][mine["labels"] != -100]) == record["conversations"][1]["value"] + "<|im_end|>"
    assert build.record_key(record) != build.record_key(own) and len(list(build.cache_dir.glob("*.pt"))) == 2
    prompts = PromptBuilder(processor, vision=build.vision, system_prompt=SYSTEM, media_path=demo_dataset_dir / "train")
    prompt = prompts(own)["input_ids"]
    assert prompt.tolist() == mine["input_ids"][: prompt.shape[0]].tolist()  # evaluation asks what training taught


def test_example_cache_round_trip_and_staleness(processor, tiny_model_dir, demo_dataset_dir, records, tmp_path, monkeypatch):
    import torch

    from skillbank.data import examples as ex_mod

    cache = tmp_path / "cache"
    first = builder_for(processor, tiny_model_dir, demo_dataset_dir, cache_root=cache)
    made = [first(r) for r in records[:2]]
    folder = first.cache_dir
    assert len(list(folder.glob("*.pt"))) == 2
    key = json.loads((folder / ex_mod.CACHE_KEY_FILE).read_text())
    assert key["fps"] == 8.0 and key["nframes"] is None and key["processor"] == ex_mod.processor_fingerprint(tiny_model_dir)
    stored = torch.load(next(folder.glob("*.pt")), weights_only=True)
    assert stored["pixels"]["codes"].dtype == torch.uint8  # lossless uint8 codes, 1/4 of float32

    # a second builder reads the disk cache and never runs the processor
    second = builder_for(processor, tiny_model_dir, demo_dataset_dir, cache_root=cache)
    monkeypatch.setattr(ex_mod.ExampleBuilder, "process", lambda self, record: pytest.fail("cache miss"))
    again = [second(r) for r in records[:2]]
    for a, b in zip(made, again):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
        assert torch.allclose(a["pixel_values_videos"], b["pixel_values_videos"], atol=1e-5)
    monkeypatch.undo()

    settings = ex_mod.VisionSettings(fps=8.0)
    status = ex_mod.cache_status(cache, settings, model_path=str(tiny_model_dir), system_prompt=SYSTEM)
    assert status["exists"] and not status["stale"] and status["entries"] == 2 and status["folder"] == str(folder)
    other = ex_mod.cache_status(cache, ex_mod.VisionSettings(fps=4.0), model_path=str(tiny_model_dir), system_prompt=SYSTEM)
    assert other["folder"] != str(folder) and not other["exists"]
    key["fps"] = 99.0
    (folder / ex_mod.CACHE_KEY_FILE).write_text(json.dumps(key))
    assert ex_mod.cache_status(cache, settings, model_path=str(tiny_model_dir), system_prompt=SYSTEM)["stale"]


def test_video_tokens_keep_their_temporal_order_above_2_fps(processor, tiny_model_dir, demo_dataset_dir, records, monkeypatch):
    """transformers 4.57's Qwen2.5-VL get_rope_index casts second_per_grid_ts to int64 before scaling, so a
    value below 1 (sampled fps above temporal_patch_size, e.g. fps 8 -> 0.25) gives every video token
    temporal position 0. skillbank.compat.qwen25_temporal keeps the step floating point (as cosmos-rl
    and transformers 5 do); the local backend and evaluation install it before loading a model."""
    import torch
    from transformers import AutoModelForImageTextToText
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as modeling

    from skillbank.compat import qwen25_temporal
    from skillbank.data.examples import collate

    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    video = processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")

    def temporal_positions(fps: float) -> tuple[int, int]:
        """(distinct temporal positions of the video tokens, temporal patches)"""
        batch = collate([builder_for(processor, tiny_model_dir, demo_dataset_dir, fps=fps)(records[0])], processor.tokenizer.pad_token_id)
        pos, _ = model.model.get_rope_index(batch["input_ids"], None, batch["video_grid_thw"], batch["second_per_grid_ts"], batch["attention_mask"])
        return len(set(pos[0, 0, batch["input_ids"][0] == video].tolist())), int(batch["video_grid_thw"][0, 0])

    monkeypatch.setattr(modeling, "torch", torch)  # transformers as installed
    assert temporal_positions(8.0) == (1, 8)  # the truncation (if this fails, upstream fixed it: the fix is inert)
    assert temporal_positions(2.0) == (2, 2)
    assert qwen25_temporal.install() and not qwen25_temporal.install()
    assert temporal_positions(8.0) == (8, 8) and temporal_positions(2.0) == (2, 2)


def test_vision_settings_from_spec_derive_total_pixels():
    from skillbank.data.examples import VisionSettings
    from skillbank.specification.train import TrainSpec

    spec = TrainSpec.model_validate({"custom": {"vision": {"nframes": 8}}})
    settings = VisionSettings.from_spec(spec, patch_size=16, merge_size=2)
    assert settings.fps is None and settings.nframes == 8
    assert settings.total_pixels == int(spec.policy.model_max_length * 32 * 32 * 0.9)


def test_collate_pads_right(processor, tiny_model_dir, demo_dataset_dir, records):
    from skillbank.data.examples import collate

    build = builder_for(processor, tiny_model_dir, demo_dataset_dir)
    by_family = {r["family"]: r for r in records}
    items = [build(by_family["yes_no"]), build(by_family["directionality"])]
    lengths = [int(e["input_ids"].shape[0]) for e in items]
    assert lengths[0] != lengths[1]
    batch = collate(items, processor.tokenizer.pad_token_id)
    longest = max(lengths)
    assert batch["input_ids"].shape == (2, longest) and batch["pixel_values_videos"].shape[0] == 2 * 128
    short = lengths.index(min(lengths))
    assert (batch["input_ids"][short, min(lengths):] == processor.tokenizer.pad_token_id).all()
    assert (batch["labels"][short, min(lengths):] == -100).all()
    assert (batch["attention_mask"][short, min(lengths):] == 0).all()
    assert batch["video_grid_thw"].shape == (2, 3) and batch["second_per_grid_ts"].shape == (2,)


def test_qwen3_vl_frames_keep_the_per_frame_budget(tiny_qwen3_model_dir, demo_dataset_dir, records):
    """Qwen3-VL's video processor bounds t x h x w together: the builder gives it the clip's budget, so each
    64x64 frame stays 64x64 (grid 4x4 of 16-px patches), as plan and preflight count it; a per-frame budget
    given as is shrank every frame by the frame count (grid 2x2)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_qwen3_model_dir)
    build = builder_for(processor, tiny_qwen3_model_dir, demo_dataset_dir, nframes=8, total_pixels=8 * 64 * 64 * 2)
    assert 64 * 64 <= build.frame_pixels(8) < 8 * 64 * 64  # one frame fits its budget; eight would not fit one frame's
    grid = build.model_inputs(records[0])["video_grid_thw"][0].tolist()
    assert grid == [4, 4, 4]
