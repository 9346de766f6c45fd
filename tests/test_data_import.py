"""`skillbank data import`: each reader on generated clips (several frame rates, a broken file), the shared
split / layout / report, bad input (exit 2, nothing written, source untouched), and the output feeding
`skillbank spec --dataset-root` and `skillbank preflight` on the tiny model."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import SKILL, json_out, skillbank
from skillbank.assets.demo_dataset import write_mp4
from skillbank.cli import main
from skillbank.errors import InputError
from skillbank.intake.clips import read_clips
from skillbank.intake.items import Item
from skillbank.intake.split import MIN_VAL_CLIPS, assign, val_clip_count

RATES = (8, 10, 24, 30)


def clip(path: Path, fps: int, frames: int = 6, shade: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, np.full((frames, 32, 48, 3), shade, np.uint8), fps=fps)
    return path


@pytest.fixture(scope="module")
def clips_dir(tmp_path_factory) -> Path:
    """An AV-style source: videos/seqNNN.front_wide.mp4 + metas/seqNNN.label.json; every 3rd clip has two questions."""
    src = tmp_path_factory.mktemp("clips") / "src"
    for i in range(12):
        clip(src / "videos" / f"seq{i:03d}.front_wide.mp4", RATES[i % 4], frames=4 + i, shade=i * 10)
        labels = [{"question": "Is the road wet?", "answer": "yes" if i % 2 else "no", "weather": "rain", "family": "yes_no"}]
        if i % 3 == 0:
            labels.append({"question": "Which way does the car turn?", "answer": "left", "family": "direction"})
        (src / "metas").mkdir(exist_ok=True)
        (src / "metas" / f"seq{i:03d}.label.json").write_text(json.dumps(labels if len(labels) > 1 else labels[0]))
    return src


def tree(folder: Path) -> dict[str, str]:
    """Every file under folder with its content hash and mode: proof that nothing was written there."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
    return out


def records(out: Path, split: str) -> list[dict]:
    return json.loads((out / split / "annotations.json").read_text())


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["data", "import", *argv])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_import_and_stats_state_the_same_clip_lengths(clips_dir, tmp_path, capsys):
    """One length per clip (frames / fps, a clip with two questions once), to one decimal, from one function
    (intake.report.lengths / lengths_text): the import's line for a split is the stats line of its file."""
    out = tmp_path / "out"
    code, stdout, err = run(capsys, str(clips_dir), "--out", str(out), "--val-fraction", "0.25")
    assert code == 0, err
    doc = json.loads((out / "import.json").read_text())
    for split in ("train", "val"):
        recs = records(out, split)
        per_clip = {r["video"]: r["num_frames"] / r["video_fps"] for r in recs}
        seconds = sorted(per_clip.values())
        lengths = doc["splits"][split]["clip_lengths"]
        assert lengths["clips"] == len(per_clip) == doc["splits"][split]["clips"]
        assert len(per_clip) < len(recs) or split == "val"  # train holds clips with two questions: counted once
        assert lengths["duration_s"] == {"min": round(seconds[0], 3), "median": round(float(np.median(seconds)), 3), "max": round(seconds[-1], 3)}
        said = next(line for line in stdout.splitlines() if line.startswith(f"  {split} clip lengths: ")).split(": ", 1)[1]
        assert said.startswith(f"{seconds[0]:.1f}-{seconds[-1]:.1f} s, median {np.median(seconds):.1f} over {len(per_clip)} clip(s)")
        assert main(["data", "stats", str(out / split / "annotations.json")]) == 0
        stats = capsys.readouterr().out
        assert f"clip lengths: {said} ({len(recs)} record(s) state one)" in stats
        assert main(["data", "stats", str(out / split / "annotations.json"), "--json"]) == 0
        clips = json.loads(capsys.readouterr().out)["clips"]
        assert (clips["distinct_with_length"], clips["duration_s"], clips["total_duration_s"]) == (
            lengths["clips"], lengths["duration_s"], lengths["total_duration_s"])


def test_clips_folder_imports_probed_records_and_a_clip_grouped_split(clips_dir, tmp_path, capsys):
    before = tree(clips_dir)
    out = tmp_path / "out"
    code, stdout, err = run(capsys, str(clips_dir), "--out", str(out), "--val-fraction", "0.25", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["reader"] == "clips" and doc["fields"] == {"question": "question", "answer": "answer"}
    assert doc["counts"] == {"read": 16, "records": 16, "clips": 12, "skipped": 0}
    assert doc["fps_histogram"] == {"8": 3, "10": 3, "24": 3, "30": 3}
    assert doc["split_rule"]["stratified_by"] == "family" and doc["splits"]["val"]["clips"] == 3
    assert json.loads((out / "import.json").read_text())["counts"] == doc["counts"]
    train, val = records(out, "train"), records(out, "val")
    assert len(train) + len(val) == 16
    assert not {r["video"] for r in train} & {r["video"] for r in val}  # two questions on one clip stay together
    by_id = {r["id"]: r for r in train + val}
    first = by_id["seq000-0"]
    assert (first["video_fps"], first["num_frames"], first["width"], first["height"]) == (8.0, 4, 48, 32)
    assert first["duration"] == pytest.approx(0.5) and first["weather"] == "rain" and first["family"] == "yes_no"
    assert first["conversations"] == [{"from": "human", "value": "<video>\nIs the road wet?"}, {"from": "gpt", "value": "no"}]
    assert by_id["seq001"]["video_fps"] == 10.0 and by_id["seq003-1"]["family"] == "direction"
    assert train[0]["video"].startswith("source/videos/") and (out / "train" / train[0]["video"]).is_file()
    assert (out / "val" / "source").is_symlink() and (out / "val" / "source").resolve() == clips_dir.resolve()  # one link, not one per clip
    assert tree(clips_dir) == before and not list(tmp_path.glob(".out.*"))
    # the same seed gives the same split; another seed another one
    again = tmp_path / "again"
    assert run(capsys, str(clips_dir), "--out", str(again), "--val-fraction", "0.25")[0] == 0
    assert records(again, "val") == val
    assert run(capsys, str(clips_dir), "--out", str(tmp_path / "seed1"), "--val-fraction", "0.25", "--seed", "1")[0] == 0
    assert {r["id"] for r in records(tmp_path / "seed1", "val")} != {r["id"] for r in val}


def test_split_groups_by_clip_and_keeps_family_proportions():
    items = [Item(f"{c}-{q}", "x", f"/v/{c}.mp4", f"{c}.mp4", [], {"family": "a" if c < 30 else "b"}) for c in range(40) for q in range(3)]
    splits, how = assign(items, 0.25, seed=7)
    val_clips = {i.clip for i in splits["val"]}
    assert len(val_clips) == 10 and not val_clips & {i.clip for i in splits["train"]}
    assert sum(1 for c in val_clips if int(c.split(".")[0]) < 30) == 8  # 30 of 40 clips are family a: 7.5 -> 8 by remainder
    assert how["val"].startswith("carved") and assign(list(reversed(items)), 0.25, seed=7)[0]["val"][0].clip in val_clips


def test_default_val_is_raised_where_affordable_an_explicit_fraction_never_and_a_small_val_is_warned_about(clips_dir, tmp_path, capsys):
    # 39 clips: the fewest whose accuracy a 95% Wilson interval pins to +-15 points at any accuracy
    assert MIN_VAL_CLIPS == 39
    # the default: 10% (cosmos-rl's rounding), raised to 39 where that is at most a quarter of the clips (156 on)
    assert [val_clip_count(n, None) for n in (1, 12, 155, 156, 389, 390, 1000)] == [0, 1, 15, 39, 39, 39, 100]
    assert [val_clip_count(n, f) for n, f in ((200, 0.05), (200, 0.0), (12, 0.25))] == [10, 0, 3]  # as given
    items = [Item(f"c{c}", "x", f"/v/{c}.mp4", f"{c}.mp4", []) for c in range(200)]
    splits, how = assign(items, None, seed=0)
    assert len(splits["val"]) == 39 and "raised to 39 of 200 clips" in how["val"]
    splits, how = assign(items, 0.05, seed=0)
    assert len(splits["val"]) == 10 and "--val-fraction 0.05 as given" in how["val"]
    # 12 clips (16 records), the default: 1 clip carved as before, warned about with the counts and each fix on its own line,
    # on stdout before the closing next: line (a terminal shows it before what to run next)
    code, stdout, err = run(capsys, str(clips_dir), "--out", str(tmp_path / "default"))
    lines = stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("warning: "))
    assert code == 0 and not err and lines[-1].startswith("next: ")
    assert lines[at].startswith("warning: val has 1 clip(s) (1 record(s)) of 12 clips, carved by the default --val-fraction 0.1")
    assert "too noisy" in lines[at] and "+-45 points" in lines[at] and "fix" not in lines[at]
    fixes = lines[at + 1:-1]
    assert len(fixes) == 2 and all(f.startswith("  fix: ") for f in fixes)
    assert "custom.val_dataset.annotation_path=" in fixes[0] and "--val-fraction 0 to train on all 12 clips" in fixes[1]
    doc = json.loads((tmp_path / "default" / "import.json").read_text())
    assert doc["split_rule"]["val_fraction"] == 0.1 and doc["split_rule"]["val_fraction_given"] is False
    assert {k: doc["val_size"][k] for k in ("clips", "records", "of_clips", "min_clips", "enough")} == \
        {"clips": 1, "records": 1, "of_clips": 12, "min_clips": 39, "enough": False}
    assert doc["warnings"] == [doc["val_size"]["warning"]] and len(records(tmp_path / "default", "val")) == 1
    assert doc["warnings"][0].count("; fix: ") == 2  # the JSON string: WHAT; fix: A; fix: B (errors.warning)
    # an explicit fraction is kept and only warned about; in JSON the counts and the warning travel in the document
    code, stdout, err = run(capsys, str(clips_dir), "--out", str(tmp_path / "given"), "--val-fraction", "0.25", "--json")
    doc = json.loads(stdout)
    assert code == 0 and doc["val_size"]["clips"] == doc["splits"]["val"]["clips"] == 3 and doc["split_rule"]["val_fraction_given"]
    assert "--val-fraction 0.25 (kept as given)" in doc["warnings"][0] and not err
    # --val-fraction 0 asks for no val: nothing to warn about
    code, stdout, err = run(capsys, str(clips_dir), "--out", str(tmp_path / "none"), "--val-fraction", "0", "--json")
    assert code == 0 and json.loads(stdout)["warnings"] == [] and not (tmp_path / "none" / "val").exists()


def test_bad_inputs_exit_2_naming_each_and_write_nothing(clips_dir, tmp_path, capsys):
    src = tmp_path / "src"
    (src / "videos").mkdir(parents=True)
    for name in sorted(os.listdir(clips_dir / "videos"))[:4]:
        os.symlink(clips_dir / "videos" / name, src / "videos" / name)
    (src / "videos" / "broken.cam.mp4").write_bytes(b"\0not a video" * 50)
    metas = src / "metas"
    metas.mkdir()
    for i in range(4):
        (metas / f"seq{i:03d}.label.json").write_text(json.dumps({"question": "q?", "answer": "yes"}))
    (metas / "broken.label.json").write_text(json.dumps({"question": "q?", "answer": "no"}))
    (metas / "ghost.label.json").write_text(json.dumps({"question": "q?", "answer": "no"}))  # no clip named ghost
    (metas / "seq002.label.json").write_text("{not json")
    (metas / "seq003.label.json").write_text(json.dumps([{"question": "q?"}]))  # no answer
    before = tree(src)
    code, stdout, _ = run(capsys, str(src), "--out", str(tmp_path / "new" / "deep" / "out"), "--json")
    assert code == 2 and not (tmp_path / "new").exists()  # not even the parent folders
    out = tmp_path / "out"
    message = json.loads(stdout)["error"]["message"]
    assert "4 item(s)" in message and "nothing was written" in message
    assert "metas/ghost.label.json [ghost]: missing clip" in message
    assert "metas/seq002.label.json [seq002]: malformed label file" in message
    assert "metas/seq003.label.json [seq003]: no answer: key 'answer' is missing" in message
    assert "metas/broken.label.json [broken]: unreadable clip videos/broken.cam.mp4" in message
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [] and tree(src) == before
    # --skip-bad writes the two good records and lists the four others
    code, stdout, err = run(capsys, str(src), "--out", str(out), "--skip-bad", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["counts"]["records"] == 2 and doc["counts"]["skipped"] == 4
    assert {s["id"] for s in json.loads((out / "import.json").read_text())["skipped"]} == {"ghost", "seq002", "seq003", "broken"}
    assert tree(src) == before
    # a non-empty --out is refused without --force, replaced whole with it
    code, _, err = run(capsys, str(src), "--out", str(out), "--skip-bad")
    assert code == 2 and "--force" in err
    (out / "stray.txt").write_text("old")
    assert run(capsys, str(src), "--out", str(out), "--skip-bad", "--force")[0] == 0 and not (out / "stray.txt").exists()
    # --out inside the source is refused
    code, _, err = run(capsys, str(src), "--out", str(src / "imported"))
    assert code == 2 and "inside SOURCE" in err and tree(src) == before


def test_label_keys_common_names_flags_and_ambiguity(tmp_path, capsys):
    src = tmp_path / "src"
    clip(src / "a.cam1.mp4", 10)
    clip(src / "a.cam2.mp4", 12)
    (src / "a.label.json").write_text(json.dumps({"prompt": "What happens?", "gt": "a stop", "label": "stop", "scene": "city", "video_fps": 99}))
    (src / "dataset_info.json").write_text(json.dumps({"description": "not a label"}))  # asks nothing: not a label file
    (src / "a.meta.json").write_text(json.dumps({"camera": "front"}))
    with pytest.raises(InputError) as err:
        read_clips(src)
    assert "gt, label" in err.value.message and "--answer-key" in err.value.fix
    got = read_clips(src, answer_key="label", clip_glob="*.cam2.mp4")
    assert got.fields == {"question": "prompt", "answer": "label"} and not got.bad
    assert got.notes["ignored_json_files"] == ["a.meta.json", "dataset_info.json"]
    item = got.items[0]
    assert item.id == "a" and item.video.endswith("/a.cam2.mp4") and item.extra == {"gt": "a stop", "scene": "city", "video_fps": 99}
    assert item.conversations[1]["value"] == "stop"
    assert "matches 2 files" in read_clips(src, answer_key="label").bad[0].reason
    code, _, err = run(capsys, str(src), "--out", str(tmp_path / "o"))
    assert code == 2 and "gt, label" in err
    code, _, err = run(capsys, str(src), "--out", str(tmp_path / "o"), "--answer-key", "label", "--clip-glob", "*.cam2.*")
    assert code == 0, err
    (rec,) = records(tmp_path / "o", "train")  # one clip: no val to carve
    assert rec["video_fps"] == 12.0 and rec["gt"] == "a stop" and rec["video"] == "source/a.cam2.mp4"  # probed, not the label's 99
    code, _, err = run(capsys, str(src / "a.label.json"), "--out", str(tmp_path / "o2"), "--format", "clips")
    assert code == 2 and "reads a folder" in err


def test_hf_parquet_with_embedded_video_bytes_keeps_its_splits(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    made = tmp_path / "made"
    blobs = [clip(made / f"c{i}.mp4", RATES[i % 4], shade=20 * i).read_bytes() for i in range(6)]
    video = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    ds = tmp_path / "hf"
    (ds / "data").mkdir(parents=True)
    for split, idx in (("train", range(5)), ("test", [5, 0])):  # clip 0 in both splits: written once, linked from the other
        table = pa.table({
            "video": pa.array([{"bytes": blobs[i], "path": f"c{i}.mp4"} for i in idx], type=video),
            "question": [f"q{i}?" for i in idx], "answer": ["yes"] * len(idx), "thumb": [b"\x89PNG"] * len(idx),
        })
        pq.write_table(table, ds / "data" / f"{split}-00000-of-00001.parquet")
    out = tmp_path / "out"
    code, stdout, err = run(capsys, str(ds), "--out", str(out), "--val-fraction", "0.2", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["reader"] == "hf-parquet" and doc["detected_by"] == "parquet shards under the folder"
    assert {k: v["records"] for k, v in doc["splits"].items()} == {"train": 4, "test": 2, "val": 1}
    assert doc["reader_notes"]["dropped_binary_columns"] == ["thumb"]
    test, again = records(out, "test")
    written = out / "test" / test["video"]
    assert test["id"] == "test_000000" and test["video"] == "videos/c5.mp4" and test["video_fps"] == 10.0
    assert written.is_file() and not written.is_symlink() and written.read_bytes() == blobs[5]
    shared = [out / split / r["video"] for split in ("train", "val", "test") for r in records(out, split) if r["video"].endswith("c0.mp4")]
    assert len(shared) == 2 and sum(p.is_symlink() for p in shared) == 1 and all(p.read_bytes() == blobs[0] for p in shared)
    assert again["id"] == "test_000001" and not (out / ".embedded").exists()
    assert sorted(p.name for p in ds.rglob("*")) == ["data", "test-00000-of-00001.parquet", "train-00000-of-00001.parquet"]


def test_hf_save_to_disk_with_paths_and_validation_split(tmp_path, capsys):
    import datasets

    ds = tmp_path / "saved"
    for i in range(4):
        clip(tmp_path / "media" / f"v{i}.mp4", 24)
    rows = lambda idx: {"video_path": [str(tmp_path / "media" / f"v{i}.mp4") for i in idx], "query": ["q?"] * len(idx),  # noqa: E731
                        "response": ["no"] * len(idx), "id": [f"s{i}" for i in idx]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows(range(3))),
                          "validation": datasets.Dataset.from_dict(rows(range(3, 4)))}).save_to_disk(str(ds))
    out = tmp_path / "out"
    code, stdout, err = run(capsys, str(ds), "--out", str(out), "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["reader"] == "hf-arrow" and doc["fields"] == {"question": "query", "answer": "response", "video": "video_path", "id": "id"}
    assert {k: v["from"] for k, v in doc["splits"].items()} == {"train": "source", "val": "source"}
    assert doc["warnings"][0].startswith("the source's val split has 1 clip(s) (1 record(s))") and "a val split of 39+ clips" in doc["warnings"][0]
    assert [r["id"] for r in records(out, "val")] == ["s3"] and records(out, "train")[0]["video_fps"] == 24.0
    assert records(out, "val")[0]["video"] == "videos/v3.mp4" and (out / "val" / "videos" / "v3.mp4").is_symlink()  # outside the dataset: linked alone


def test_csv_and_jsonl_tables(tmp_path, capsys):
    src = tmp_path / "src"
    for i in range(4):
        clip(src / "clips" / f"k{i}.mp4", RATES[i])
    (src / "qa.csv").write_text("clip_path,question,answer,camera\n" + "".join(f"clips/k{i}.mp4,How many?,{i},front\n" for i in range(4)))
    out = tmp_path / "csv"
    code, stdout, err = run(capsys, str(src / "qa.csv"), "--out", str(out), "--val-fraction", "0", "--json")
    assert code == 0, err
    rec = records(out, "train")
    assert json.loads(stdout)["reader"] == "csv" and [r["conversations"][1]["value"] for r in rec] == ["0", "1", "2", "3"]
    assert rec[0]["camera"] == "front" and rec[3]["video_fps"] == 30.0 and not (out / "val").exists()
    lines = [json.dumps({"video": f"clips/k{i}.mp4", "question": "q?", "answer": "a", "split": "train" if i < 3 else "test"}) for i in range(4)]
    escape = json.dumps({"video": "clips/k0.mp4", "question": "q?", "answer": "a", "split": "../evil", "id": "e"})
    (src / "qa.jsonl").write_text("\n".join(lines[:2] + ["{oops", escape] + lines[2:]) + "\n")
    code, _, err = run(capsys, str(src / "qa.jsonl"), "--out", str(tmp_path / "j"))
    assert code == 2 and "qa.jsonl:3: malformed JSON line" in err and "qa.jsonl:4 [e]: split name '../evil'" in err
    code, stdout, err = run(capsys, str(src / "qa.jsonl"), "--out", str(tmp_path / "j"), "--skip-bad", "--json")
    assert code == 0, err
    assert {k: v["records"] for k, v in json.loads(stdout)["splits"].items()} == {"train": 2, "test": 1, "val": 1}


def test_llava_file_is_reprobed_and_resplit_and_feeds_spec_and_preflight(clips_dir, tmp_path, tiny_model_dir, capsys):
    first = tmp_path / "first"
    assert run(capsys, str(clips_dir), "--out", str(first), "--val-fraction", "0")[0] == 0
    ann = first / "train" / "annotations.json"
    old = records(first, "train")
    old[0].pop("video_fps")
    old[1]["video_fps"] = 99.0
    old[2]["conversations"].insert(0, {"from": "system", "value": "Be brief."})
    ann.write_text(json.dumps(old))
    out = tmp_path / "second"
    proc = skillbank("data", "import", str(ann), "--out", str(out), "--val-fraction", "0.25", "--copy-media", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    assert doc["reader"] == "llava" and doc["counts"]["records"] == 16 and doc["media"] == "copy"
    by_id = {r["id"]: r for split in ("train", "val") for r in records(out, split)}
    assert by_id[old[0]["id"]]["video_fps"] == 8.0 and by_id[old[1]["id"]]["video_fps"] == 8.0
    assert by_id[old[2]["id"]]["conversations"][0]["from"] == "system" and by_id[old[2]["id"]]["weather"] == "rain"
    assert not (out / "train" / by_id[old[0]["id"]]["video"]).is_symlink()
    spec = tmp_path / "train.yaml"
    proc = skillbank("spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(out), "--set", f"model={tiny_model_dir}",
                     "--set", "dp_shard_size=1", "--set", "batch_size=1", "--set", "mini_batch=1", "-o", str(spec))
    assert proc.returncode == 0, proc.stderr
    proc = skillbank("preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--backend", "local", "--json")
    report = json_out(proc)
    assert proc.returncode == 0 and report["ok"] and not report["findings"], report
    assert report["stats"]["tokens_per_sample"]["bound"] == "exact"  # the probed num_frames, width and height count


def test_probe_many_keeps_the_order_across_chunks_and_names_failures(tmp_path):
    from skillbank.data.probe import ProbePool, probe_many

    good = [clip(tmp_path / f"p{i}.mp4", RATES[i % 4]) for i in range(4)]
    (tmp_path / "bad.mp4").write_bytes(b"garbage")
    paths = [str(p) for p in good * 5] + [str(tmp_path / "bad.mp4"), str(tmp_path / "absent.mp4")]
    got = list(probe_many(paths, workers=3, progress=False))
    assert [g.video_fps for g in got[:20]] == [float(RATES[i % 4]) for i in range(4)] * 5
    assert all(isinstance(g, str) and g for g in got[20:])
    with ProbePool(workers=2, progress=False, chunk=3) as pool:  # paths added while a reader finds them, each probed once
        for path in paths:
            pool.add(path)
        found = pool.results()
    assert len(found) == 6 and found[str(good[1])].video_fps == 10.0 and isinstance(found[str(tmp_path / "bad.mp4")], str)


def test_each_reader_alone_gives_the_one_item_shape(tmp_path):
    """Readers are adapters: the same question on the same clip reads as the same Item from every source kind."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from skillbank.intake.hf import read_hf
    from skillbank.intake.conversations import read_llava
    from skillbank.intake.rows import Spill
    from skillbank.intake.tables import read_csv, read_jsonl

    video = clip(tmp_path / "src" / "v.mp4", 10)
    row = {"video": "v.mp4", "question": "Is it raining?", "answer": "yes", "id": "r0", "weather": "rain"}
    (tmp_path / "src" / "t.csv").write_text("video,question,answer,id,weather\nv.mp4,Is it raining?,yes,r0,rain\n")
    (tmp_path / "src" / "t.jsonl").write_text(json.dumps(row) + "\n")
    pq.write_table(pa.table({k: [v] for k, v in row.items()}), tmp_path / "src" / "t.parquet")
    llava = {"id": "r0", "video": "v.mp4", "video_fps": 3.0, "weather": "rain",
             "conversations": [{"from": "human", "value": "<video>\nIs it raining?"}, {"from": "gpt", "value": "yes"}]}
    (tmp_path / "src" / "t.json").write_text(json.dumps([llava]))
    spill = Spill(tmp_path / "spill")
    seen = []
    reads = [read_csv(tmp_path / "src" / "t.csv", spill=spill), read_jsonl(tmp_path / "src" / "t.jsonl", spill=spill),
             read_hf(tmp_path / "src" / "t.parquet", spill=spill, on_clip=seen.append), read_llava(tmp_path / "src" / "t.json")]
    assert [r.reader for r in reads] == ["csv", "jsonl", "hf-parquet", "llava"] and seen == [str(video)]
    for got in reads:
        (item,) = got.items
        assert (item.id, item.video, item.clip, item.extra, item.split) == ("r0", str(video), "v.mp4", {"weather": "rain"}, None if got.reader != "hf-parquet" else "train")
        assert item.conversations == llava["conversations"] and not got.bad


def test_probe_workers_die_with_a_sigkilled_import(tmp_path):
    """The probing pool's worker processes are SIGKILLed when the process that forked them dies, however
    it dies (a pool worker otherwise waits forever on a queue whose writer it inherited)."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    script = tmp_path / "pool.py"
    script.write_text(
        "import time\n"
        "from skillbank.data.probe import _executor\n"
        "pool = _executor(2)\n"
        "futures = [pool.submit(time.sleep, 60) for _ in range(2)]\n"
        "time.sleep(0.5)\n"
        "print(' '.join(str(p) for p in pool._processes), flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    workers = [int(p) for p in proc.stdout.readline().split()]
    assert len(workers) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    assert alive == [], "a probe worker outlived the import"
