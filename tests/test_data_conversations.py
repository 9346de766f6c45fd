"""`skillbank data import` of conversation records: the messages / sharegpt shape of LLaMA-Factory and
ms-swift, detected in a JSON array or JSON lines, every turn kept in the bank's one record shape (LLaVA
conversations), what cannot train named once per reason; and the duration histogram's bins.

The fixtures are the documented examples, their clips written here with PyAV:
- LLaMA-Factory, https://github.com/hiyouga/LLaMA-Factory/blob/main/data/mllm_video_demo.json (the video
  demo dataset: `messages` of role / content, `videos`) and the sharegpt format of
  https://github.com/hiyouga/LLaMA-Factory/blob/main/data/README.md ("Sharegpt Format": `conversations` of
  from / value, human and gpt alternating over several turns, a `system` and a `tools` column; multimodal
  records add the media column, here `videos`).
- ms-swift, https://swift.readthedocs.io/en/latest/Customization/Custom-dataset.html ("Supervised
  Fine-tuning" and "Multimodal": JSON lines of `messages` with `images` / `videos` / `audios`; the
  multi-turn example of the same page with a `videos` key added, as its multimodal section describes).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skillbank.assets.demo_dataset import write_mp4
from skillbank.cli import main
from skillbank.data.chat import build_messages

LF_VIDEO_DEMO = [  # data/mllm_video_demo.json, as published
    {"messages": [{"content": "<video>Why is this video funny?", "role": "user"},
                  {"content": "Because a baby is reading, and he is so cute!", "role": "assistant"}],
     "videos": ["mllm_demo_data/1.mp4"]},
    {"messages": [{"content": "<video>What is she doing?", "role": "user"}, {"content": "She is cooking.", "role": "assistant"}],
     "videos": ["mllm_demo_data/2.avi"]},
    {"messages": [{"content": "<video>What's in the video?", "role": "user"},
                  {"content": "A baby is playing in the living room.", "role": "assistant"}],
     "videos": ["mllm_demo_data/3.mp4"]},
]
LF_SHAREGPT = [  # data/README.md, "Sharegpt Format" / "Supervised Fine-Tuning Dataset", with its video column
    {"conversations": [{"from": "human", "value": "<video>human instruction"}, {"from": "gpt", "value": "model response"},
                       {"from": "human", "value": "human instruction"}, {"from": "gpt", "value": "model response"}],
     "system": "system prompt (optional)", "tools": "tool description (optional)", "videos": ["mllm_demo_data/1.mp4"]},
]
SWIFT_JSONL = [  # Custom-dataset: the multimodal SFT lines, then the multi-turn line with a video
    {"messages": [{"role": "user", "content": "Where is the capital of Zhejiang?"},
                  {"role": "assistant", "content": "The capital of Zhejiang is Hangzhou."}]},
    {"messages": [{"role": "user", "content": "<image><image>What is the difference between the two images?"},
                  {"role": "assistant", "content": "The first one is a kitten, and the second one is a puppy."}],
     "images": ["/xxx/x.jpg", "/xxx/x.png"]},
    {"messages": [{"role": "user", "content": "<audio>What did the audio say?"}, {"role": "assistant", "content": "The weather is really nice today."}],
     "audios": ["/xxx/x.mp3"]},
    {"messages": [{"role": "system", "content": "You are a helpful and harmless assistant."},
                  {"role": "user", "content": "<image>What is in the image, <video>What is in the video?"},
                  {"role": "assistant", "content": "The image shows an elephant, and the video shows a puppy running on the grass."}],
     "images": ["/xxx/x.jpg"], "videos": ["clips/x.mp4"]},
    {"messages": [{"role": "system", "content": "You are a useful and harmless math calculator"},
                  {"role": "user", "content": "What is 1 + 1?"}, {"role": "assistant", "content": "It equals 2"},
                  {"role": "user", "content": "What about adding 1?"}, {"role": "assistant", "content": "It equals 3"}],
     "videos": ["clips/x.mp4"]},
    {"messages": [{"role": "user", "content": "Describe the scene."}, {"role": "assistant", "content": "A road."},
                  {"role": "user", "content": "<video>Is it wet?"}, {"role": "assistant", "content": "yes"}],
     "video": "clips/y.mp4", "id": "tag-late"},
]


def clip(path: Path, fps: int = 8, frames: int = 16) -> Path:
    """A clip of frames / fps seconds (16 at 8 fps: exactly 2.0 s)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, np.full((frames, 32, 48, 3), 90, np.uint8), fps=fps)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["data", "import", *argv])
    got = capsys.readouterr()
    return code, got.out, got.err


def records(out: Path, split: str = "train") -> list[dict]:
    return json.loads((out / split / "annotations.json").read_text())


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("conv") / "src"
    for name in ("1.mp4", "2.avi", "3.mp4"):
        clip(src / "mllm_demo_data" / name)
    clip(src / "clips" / "x.mp4", fps=10, frames=25)
    clip(src / "clips" / "y.mp4")
    (src / "mllm_video_demo.json").write_text(json.dumps(LF_VIDEO_DEMO, indent=2))
    (src / "sharegpt.json").write_text(json.dumps(LF_SHAREGPT, indent=2))
    (src / "swift.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SWIFT_JSONL))
    return src


def test_llama_factory_video_demo_is_detected_and_every_record_kept(sources, tmp_path, capsys):
    out = tmp_path / "lf"
    code, stdout, err = run(capsys, str(sources / "mllm_video_demo.json"), "--out", str(out), "--val-fraction", "0", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["reader"] == "messages" and doc["detected_by"] == "a JSON array of records with messages"
    assert doc["counts"] == {"read": 3, "records": 3, "clips": 3, "skipped": 0}
    assert doc["duration_histogram"] == {"1-2 s": 3}  # 16 frames at 8 fps: exactly 2.0 s, never "2-5 s"
    got = records(out)
    assert [r["id"] for r in got] == ["000000", "000001", "000002"] and got[1]["video_fps"] == 8.0
    assert got[0]["conversations"] == [{"from": "human", "value": "<video>Why is this video funny?"},
                                       {"from": "gpt", "value": "Because a baby is reading, and he is so cute!"}]
    assert (out / "train" / got[1]["video"]).resolve() == (sources / "mllm_demo_data" / "2.avi").resolve()


def test_sharegpt_several_turns_and_the_system_column_become_one_llava_record(sources, tmp_path, capsys):
    out = tmp_path / "sg"
    code, stdout, err = run(capsys, str(sources / "sharegpt.json"), "--out", str(out), "--val-fraction", "0", "--json")
    assert code == 0, err
    assert json.loads(stdout)["reader_notes"]["records_by_answers"] == {"2": 1}
    (rec,) = records(out)
    assert [t["from"] for t in rec["conversations"]] == ["system", "human", "gpt", "human", "gpt"]
    assert rec["conversations"][0]["value"] == "system prompt (optional)" and rec["tools"] == "tool description (optional)"
    assert "system" not in rec and "videos" not in rec
    chat = build_messages(rec, media_path=str(out / "train"), system_prompt="run prompt", fps=2.0)  # what both backends train on
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant"]
    assert chat[0]["content"] == "system prompt (optional)" and chat[1]["content"][0]["type"] == "video"


def test_ms_swift_jsonl_names_what_cannot_train_and_keeps_the_rest(sources, tmp_path, capsys):
    code, stdout, _ = run(capsys, str(sources / "swift.jsonl"), "--out", str(tmp_path / "no"), "--json")
    message = json.loads(stdout)["error"]["message"]
    assert "4 item(s)" in message and not (tmp_path / "no").exists()
    assert "swift.jsonl:1 [000000]: no video (keys: messages)" in message
    assert "swift.jsonl:2 [000001]: 2 image(s) and no video: the bank trains on video clips" in message
    assert "swift.jsonl:3 [000002]: no video (keys: audios, messages)" in message
    assert "swift.jsonl:4 [000003]: 1 image(s) beside its video" in message
    out = tmp_path / "swift"
    code, stdout, err = run(capsys, str(sources / "swift.jsonl"), "--out", str(out), "--skip-bad", "--val-fraction", "0", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["detected_by"] == "JSON lines of records with messages" and doc["counts"]["records"] == 2
    assert doc["reader_notes"]["media_tag"] == {"added": 1, "moved": 1} and doc["reader_notes"]["answers"] == 4
    by_id = {r["id"]: r for r in records(out)}
    calc = by_id["000004"]["conversations"]
    assert [t["from"] for t in calc] == ["system", "human", "gpt", "human", "gpt"] and calc[1]["value"] == "<video>\nWhat is 1 + 1?"
    late = by_id["tag-late"]["conversations"]  # the clip goes with the first question, as the chat shows it
    assert late[0]["value"] == "<video>\nDescribe the scene." and late[2]["value"] == "Is it wet?"


def test_wrong_shapes_say_what_they_found_and_what_was_expected(sources, tmp_path, capsys):
    rows = [{"video": "clips/x.mp4", "question": "q?", "answer": "yes"}] * 24
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    code, _, err = run(capsys, str(tmp_path / "rows.json"), "--out", str(tmp_path / "a"), "--format", "llava")
    assert code == 2 and err.count("\n") < 6, err
    assert "none of the 24 records holds a conversation: rows.json#0 has keys answer, question, video" in err and '"messages"' in err
    code, _, err = run(capsys, str(tmp_path / "rows.json"), "--out", str(tmp_path / "a"))
    assert code == 2 and "a JSON array of records without conversations (the first has keys answer, question, video)" in err
    code, _, err = run(capsys, str(sources / "mllm_video_demo.json"), "--out", str(tmp_path / "a"), "--format", "jsonl")
    assert code == 2 and "one JSON array, not JSON lines" in err
    code, _, err = run(capsys, str(sources / "swift.jsonl"), "--out", str(tmp_path / "a"), "--format", "jsonl")
    assert code == 2 and "the rows hold conversations (messages)" in err and "--format messages" in err
    same = [{"messages": [{"role": "user", "content": "<video>q"}, {"role": "assistant", "content": "a"}], "images": ["p.jpg"]}] * 24
    (tmp_path / "images.json").write_text(json.dumps(same))
    code, _, err = run(capsys, str(tmp_path / "images.json"), "--out", str(tmp_path / "a"))
    assert code == 2 and "24 items, the first images.json#0 [000000]: 1 image(s) and no video" in err and err.count("images.json#") == 1
    tools = [{"messages": [{"role": "user", "content": "<video>q"}, {"role": "function_call", "content": "{}"}], "videos": ["clips/x.mp4"]}]
    (sources / "tools.json").write_text(json.dumps(tools))
    code, _, err = run(capsys, str(sources / "tools.json"), "--out", str(tmp_path / "a"))
    assert code == 2 and "messages: turn 1 has role 'function_call'" in err


def test_duration_bins_hold_their_upper_edge():
    from skillbank.intake.report import duration_bin

    assert [duration_bin(s) for s in (0.5, 1.0, 2.0, 2.002, 2.5, 5.0, 300.0, 301.0)] == \
        ["0-1 s", "0-1 s", "1-2 s", "1-2 s", "2-5 s", "2-5 s", "120-300 s", ">300 s"]


def test_stats_count_every_answer_per_turn_and_preflight_takes_the_import(sources, tmp_path, tiny_model_dir, capsys):
    from helpers import SKILL

    out = tmp_path / "swift"
    assert run(capsys, str(sources / "swift.jsonl"), "--out", str(out), "--skip-bad", "--val-fraction", "0")[0] == 0
    assert main(["data", "stats", str(out / "train" / "annotations.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["turns"] == {"answers": 4, "per_turn": {"1": 2, "2": 2}, "records_by_answers": {"2": 2}, "multi_turn_records": 2}
    assert {t["answer"]: t["answers"] for t in doc["answers"][""]["top"]} == {"It equals 2": 1, "It equals 3": 1, "A road.": 1, "yes": 1}
    assert main(["data", "stats", str(out / "train" / "annotations.json")]) == 0
    assert "answers: 4 (turn 1: 2, turn 2: 2); 2 multi-turn record(s), every assistant turn trains" in capsys.readouterr().out
    spec = tmp_path / "train.yaml"
    assert main(["spec", "--skill", SKILL, "--action", "train", "--set", f"annotation_path={out / 'train' / 'annotations.json'}",
                 "--set", f"model={tiny_model_dir}", "--set", "dp_shard_size=1", "--set", "batch_size=1", "--set", "mini_batch=1",
                 "-o", str(spec)]) == 0
    capsys.readouterr()
    code = main(["preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--backend", "local", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] and not [f for f in report["findings"] if f["severity"] == "error"], report
