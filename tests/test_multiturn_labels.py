"""A multi-turn record trains on every assistant turn, alike on both backends: the local backend's labels
(`data.examples.answer_labels`) against cosmos-rl 0.4.7's own packer run on CPU (`sft_process_sample`:
each assistant turn's content becomes a run of pad tokens in the chat, then its tokens and the <|im_end|>
after it are the labels; everything else is -100), on one record of two questions and two answers, for
both model families (Qwen2.5-VL: Qwen2_5_VLM_DataPacker, Qwen3-VL: HFVLMDataPacker). Every token but the
clip's vision pads is compared with its label, position by position (each vision pad is -100 on both)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from test_cosmos_rl_backend import _pyav_reader, built, cosmos, make_spec  # noqa: F401 - cosmos: the module fixture

RECORD = {"id": "two", "video": "clips/v0.mp4", "video_fps": 8,
          "conversations": [{"from": "human", "value": "<video>\nIs the ball red?"}, {"from": "gpt", "value": "yes"},
                            {"from": "human", "value": "Which way does it roll?"}, {"from": "gpt", "value": "to the left"}]}


@pytest.mark.parametrize("model_fixture", ["tiny_model_dir", "tiny_qwen3_model_dir"])
def test_local_labels_equal_the_cosmos_packers_on_a_two_turn_record(cosmos, tmp_path, monkeypatch, request, model_fixture):  # noqa: F811
    import qwen_vl_utils.vision_process as vp
    from transformers import AutoProcessor

    from skillbank.assets import demo_dataset as demo
    from skillbank.data.examples import IGNORE_INDEX, ExampleBuilder, VisionSettings
    from skillbank.training.cosmos_rl.script import datasets, family, packer_class

    monkeypatch.setitem(vp.VIDEO_READER_BACKENDS, "torchvision", _pyav_reader)
    frames = np.zeros((16, 64, 64, 3), dtype=np.uint8)
    frames[:, 20:40, 20:40, 0] = 255
    (tmp_path / "data" / "clips").mkdir(parents=True)
    demo.write_mp4(tmp_path / "data" / "clips" / "v0.mp4", frames, fps=8)
    model = request.getfixturevalue(model_fixture)
    spec = make_spec(tmp_path, 1, custom={"vision": {"fps": 4.0, "total_pixels": 64 * 64 * 16}})
    (tmp_path / "data" / "train.json").write_text(json.dumps([RECORD]))
    cfg = cosmos.config.Config.from_dict(copy.deepcopy(built(spec, tmp_path, model=str(model)).data))
    train, _ = datasets(cfg.custom)
    packer = packer_class(family(cfg.custom))()
    packer.setup(cfg)
    theirs = packer.sft_process_sample(train[0])

    vision = VisionSettings(fps=4.0, total_pixels=64 * 64 * 16)
    ours = ExampleBuilder(AutoProcessor.from_pretrained(model), model_path=str(model), vision=vision,
                          system_prompt=spec.custom.system_prompt, media_path=str(tmp_path / "data"), cache_root=None).process(RECORD)
    pad = packer.video_token_id  # how many vision tokens a clip gets is frame sampling's matter, not the labels'

    def text(ids: list[int], labels: list[int]) -> list[tuple[int, int]]:
        return [(i, label) for i, label in zip(ids, labels) if i != pad]

    assert pad in theirs["input_ids"] and len(theirs["input_ids"]) == len(theirs["label_ids"])
    assert text(ours["input_ids"].tolist(), ours["labels"].tolist()) == text(theirs["input_ids"], theirs["label_ids"])  # every token and its label
    for ids, labels in ((ours["input_ids"].tolist(), ours["labels"].tolist()), (theirs["input_ids"], theirs["label_ids"])):
        assert {label for i, label in zip(ids, labels) if i == pad} == {IGNORE_INDEX}
    tokenizer = packer.tokenizer
    runs, current = [], []
    for token in theirs["label_ids"] + [IGNORE_INDEX]:
        if token != IGNORE_INDEX:
            current.append(token)
        elif current:
            runs, current = runs + [tokenizer.decode(current)], []
    assert runs == ["yes<|im_end|>", "to the left<|im_end|>"]  # both answers, nothing of the questions
