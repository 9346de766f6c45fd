"""The DEFT loop end to end on the tiny model and demo clips: two tiny rounds, SIGKILL in the middle of
round 1 then --resume; plus the preflight's disjointness rule (ids and video content), curation
keeping records whole, and unparseable answers counted as gaps."""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import local_train_spec
from skillbank.errors import InputError

SYSTEM = "You are a helpful assistant. Answer the question about the video with a short answer."


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory) -> Path:
    """A second demo dataset (other seed: other clips); its val split is the frozen benchmark."""
    from skillbank.assets.demo_dataset import build_demo_dataset

    return build_demo_dataset(tmp_path_factory.mktemp("bench") / "demo", records=6, seed=1)


def make_inputs(root: Path, model: Path, data: Path, bench: Path, overrides: dict | None = None, train: dict | None = None) -> Path:
    """deft.yaml over: base train = 6 train clips, pool = the other 18, proxy = val (9), benchmark =
    the other dataset's val (9, ids prefixed); `train`: dotted keys of the base train spec."""
    from skillbank.deft.demo import demo_sets

    sets = demo_sets(data, bench, root / "sets", base=6)
    spec = local_train_spec(model, data, root / "unused", {
        "train.max_num_steps": 4, "train.ckpt.save_freq": 2, "validation.enable": False, "custom.val_dataset": None,
        "custom.train_dataset.annotation_path": sets["train"]["annotation_path"], "custom.train_dataset.media_path": sets["train"]["media_dir"],
        **(train or {}),
    }, dp_shard_size=1)
    (root / "train.yaml").write_text(yaml.safe_dump(spec))
    (root / "eval.yaml").write_text(yaml.safe_dump({
        "dataset": {"system_prompt": SYSTEM}, "model": {"dtype": "float32"}, "vision": {"fps": 2.0},
        "generation": {"max_tokens": 4, "temperature": 0.0, "top_p": 1.0}, "evaluation": {"batch_size": 16}, "num_gpus": 0}))
    config = {
        "model": str(model),
        "pool": sets["pool"], "proxy": sets["proxy"], "benchmark": sets["benchmark"],
        "train_spec": str(root / "train.yaml"), "eval_config": str(root / "eval.yaml"),
        "mining": {"k": 4, "records_per_round": 4, "batch_size": 8},
        "stop": {"max_rounds": 2, "patience": 2}, "output_dir": str(root / "out"),
    }
    for key, value in (overrides or {}).items():
        config[key] = value
    (root / "deft.yaml").write_text(yaml.safe_dump(config))
    return root / "deft.yaml"


def _tree(pid: int) -> list:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _cli(log: Path, *args: str) -> subprocess.Popen:
    """`skillbank deft ...` in its own process group (the loop and its torchrun ranks); stderr to a file."""
    return subprocess.Popen([sys.executable, "-m", "skillbank.cli", "deft", *args], stdout=subprocess.PIPE,
                            stderr=open(log, "w"), text=True, start_new_session=True)


def test_two_rounds_survive_sigkill_mid_round_and_resume(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir):
    config = make_inputs(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir)
    out = tmp_path / "out"
    proc = _cli(tmp_path / "first.log", "--config", str(config), "--json")
    deadline = time.time() + 240
    state: dict = {}
    while time.time() < deadline and proc.poll() is None:  # kill once round 1 is training
        if (out / "state.json").is_file():
            state = json.loads((out / "state.json").read_text())
            if state["stages"].get("round_1/train", {}).get("status") == "running":
                break
        time.sleep(0.1)
    assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
    for p in _tree(proc.pid):  # a crash mid-round: the loop and its training ranks (each rank has a session of its own)
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    proc.wait()
    before = json.loads((out / "state.json").read_text())["stages"]
    assert before["round_1/train"]["status"] == "running"
    done_before = {k: v["finished"] for k, v in before.items() if v["status"] == "done"}
    assert set(done_before) == {"round_0/evaluate", "round_1/gaps", "round_1/mine", "round_1/curate"}

    again = _cli(tmp_path / "resume.log", "--config", str(config), "--resume", "--json")
    stdout, _ = again.communicate(timeout=300)
    assert again.returncode == 0, (tmp_path / "resume.log").read_text()[-3000:]
    result = json.loads(stdout)
    assert result["ok"] and result["rounds"] == 2 and result["stop_reason"] in ("max_rounds", "target")

    state = json.loads((out / "state.json").read_text())
    stages = state["stages"]
    for key, finished in done_before.items():  # finished stages were not redone
        assert stages[key]["finished"] == finished and stages[key]["attempts"] == 1
    assert stages["round_1/train"]["attempts"] == 2
    assert all(s["status"] == "done" for s in stages.values())
    assert {f"round_2/{s}" for s in ("gaps", "mine", "curate", "train", "evaluate", "decide")} <= set(stages)
    events = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("resume") == 1
    assert sum(e["event"] == "stage_start" and e["stage"] == "round_0/evaluate" for e in events) == 1

    # the regression guard: the best model is the best benchmark round, and only improving rounds were adopted
    rounds = state["rounds"]
    best = max(rounds, key=lambda r: (r["benchmark"]["value"], -r["round"]))
    assert state["best"]["round"] == best["round"] and result["best"]["model"] == best["model"]
    for r in rounds[1:]:
        prior = max(x["benchmark"]["value"] for x in rounds if x["round"] < r["round"] and (x["adopted"]))
        assert r["adopted"] == (r["benchmark"]["value"] > prior)
    # the round's model is the proxy's best checkpoint, not the last
    picked = json.loads(Path(stages["round_1/evaluate"]["outputs"]["best_checkpoint"]).read_text())
    assert rounds[1]["model"] == picked["path"]

    # unparseable answers are gaps: the untrained model answers nothing scorable, every proxy record is a gap
    assert rounds[1]["gaps"]["gaps"] == rounds[1]["gaps"]["total"] == 9

    # curation: mined records are whole; no benchmark item is ever in training
    pool = {r["id"]: r for r in json.loads(Path(yaml.safe_load(config.read_text())["pool"]["annotation_path"]).read_text())}
    added = json.loads(Path(stages["round_1/curate"]["outputs"]["added"]).read_text())
    assert len(added) == 4
    for rec in added:
        original = pool[rec["id"]]
        assert {k: v for k, v in rec.items() if k != "video"} == {k: v for k, v in original.items() if k != "video"}
        assert rec["video"] == str(demo_dataset_dir / "train" / original["video"])
    for r in (1, 2):
        ids = {x["id"] for x in json.loads(Path(stages[f"round_{r}/curate"]["outputs"]["train_annotations"]).read_text())}
        assert not any(i.startswith("bench_") for i in ids)
    mined2 = json.loads(Path(stages["round_2/curate"]["outputs"]["added"]).read_text())
    assert not {x["id"] for x in mined2} & {x["id"] for x in added}  # a pool record is mined once

    # the report a person reads
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "Benchmark accuracy per family" in html and state["stop"]["reason"] in html
    report = json.loads((out / "report.json").read_text())
    assert [r["round"] for r in report["rounds"]] == [0, 1, 2]
    assert report["rounds"][1]["mined_families"] and sum(report["rounds"][1]["mined_families"].values()) == 4


def test_preflight_refuses_a_benchmark_that_shares_ids_or_video_content(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir):
    from skillbank.deft import preflight
    from skillbank.specification.deft import DeftConfig
    from skillbank.specification.io import load_spec

    config = load_spec(make_inputs(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir), DeftConfig)
    preflight.run(config)  # the fixture's sets are disjoint

    bench_file = Path(config.benchmark.annotation_path)
    clean = json.loads(bench_file.read_text())
    pool = json.loads(Path(config.pool.annotation_path).read_text())
    _write(bench_file, [*clean, {**copy.deepcopy(clean[0]), "id": pool[0]["id"]}])  # same id as a pool record
    with pytest.raises(InputError, match=r"1 benchmark id\(s\) also in pool") as exc:
        preflight.run(config)
    assert exc.value.where == "benchmark.annotation_path"

    # same video content under another name and id: found by content hash
    copied = Path(config.benchmark.media_dir) / "videos" / "copy_of_pool.mp4"
    shutil.copy(Path(config.pool.media_dir) / pool[3]["video"], copied)
    _write(bench_file, [*clean, {**copy.deepcopy(clean[0]), "id": "bench_extra", "video": "videos/copy_of_pool.mp4"}])
    try:
        with pytest.raises(InputError, match=r"1 pool record\(s\) whose video has the content of a benchmark video"):
            preflight.run(config)
    finally:
        copied.unlink()


def test_cli_reports_bad_configs_with_exit_2(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir):
    from skillbank.cli import main

    config = make_inputs(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir, {"model": ""})
    assert main(["deft", "--config", str(config), "--json"]) == 2
    config = make_inputs(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir)
    assert main(["deft", "--config", str(config), "--dry-run"]) == 0
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
    Path(yaml.safe_load(config.read_text())["pool"]["annotation_path"]).unlink()
    assert main(["deft", "--config", str(config), "--dry-run", "--json"]) == 2


def test_curation_keeps_records_whole_and_drops_duplicates_and_benchmark_items(demo_dataset_dir, bench_dir):
    from skillbank.deft.curate import curate, whole
    from skillbank.deft.sets import load_set

    pool = load_set("pool", str(demo_dataset_dir / "train" / "annotations.json"), "")
    bench = load_set("benchmark", str(bench_dir / "val" / "annotations.json"), "")
    mined = [copy.deepcopy(pool.records[i]) for i in (0, 1, 2)]
    mined[0]["conversations"].append({"from": "human", "value": "And the size? Answer small or big."})
    mined[0]["conversations"].append({"from": "gpt", "value": "small"})
    leaked = copy.deepcopy(bench.records[0])  # a benchmark item that slipped into the pool
    leaked["video"] = str(Path(bench.media_dir) / leaked["video"])
    already = [whole(pool.records[1], pool)]
    added, dropped = curate([*mined, leaked], pool, already=already, benchmark=bench)
    assert [r["id"] for r in added] == [mined[0]["id"], mined[2]["id"]]
    assert dropped == {"duplicate": 1, "benchmark": 1}
    first = added[0]
    assert first["conversations"] == mined[0]["conversations"] and len(first["conversations"]) == 4
    assert first["conversations"][0]["value"].endswith("Answer with one word.") or "Answer" in first["conversations"][0]["value"]
    assert first["video_fps"] == mined[0]["video_fps"] and first["family"] == mined[0]["family"]
    assert Path(first["video"]).is_absolute() and Path(first["video"]).is_file()


HOOK = '''
import numpy as np
FAMILIES = ["yes_no", "directionality", "colour"]
def embed(records, media_dir):
    return np.array([[float(r["family"] == f) for f in FAMILIES] + [0.01 * i] for i, r in enumerate(records)], dtype=np.float32)
'''


def test_mining_with_an_embedder_hook_finds_the_gaps_family_and_random_is_the_control(tmp_path, monkeypatch, demo_dataset_dir):
    """A hook embedder (one-hot family, standing in for Cosmos-Embed) through the FAISS path: the
    gaps are all directionality questions, so nearest-neighbour mining adds only directionality records
    and random selection adds a mix; both skip records mined before, and embeddings are cached."""
    from skillbank.deft.mining import mine
    from skillbank.deft.sets import load_set
    from skillbank.specification.deft import MiningSpec
    from skillbank.specification.evaluate import EvaluateSpec

    (tmp_path / "my_embedder.py").write_text(HOOK)
    monkeypatch.syspath_prepend(str(tmp_path))
    pool = load_set("pool", str(demo_dataset_dir / "train" / "annotations.json"), "")
    proxy = load_set("proxy", str(demo_dataset_dir / "val" / "annotations.json"), "")
    gaps = [r["id"] for r in proxy.records if r["family"] == "directionality"]
    spec = EvaluateSpec.model_validate({"num_gpus": 0})
    used = [i for i, r in enumerate(pool.records) if r["family"] == "directionality"][:2]
    common = dict(pool=pool, proxy=proxy, gap_ids=gaps, eval_spec=spec, model="unused", used=used, cache_dir=tmp_path / "emb", log=print)

    knn = MiningSpec(embedder="my_embedder:embed", k=6, records_per_round=5)
    (tmp_path / "a").mkdir()
    got = mine(knn, out=tmp_path / "a", **common)
    picked = json.loads((tmp_path / "a" / "selection.json").read_text())
    assert got["selected"] == 5 and got["families"] == {"directionality": 5} and got["index"] == "exact"
    assert not set(picked["pool_indices"]) & set(used) and set(picked["gap"]) <= set(gaps)
    assert got["embeddings_reused"] is False
    (tmp_path / "b").mkdir()
    assert mine(knn, out=tmp_path / "b", **common)["embeddings_reused"] is True

    control = MiningSpec(strategy="random", records_per_round=5, seed=1)
    (tmp_path / "c").mkdir()
    rnd = mine(control, out=tmp_path / "c", **common)
    assert rnd["selected"] == 5 and len(rnd["families"]) > 1 and rnd["index"] is None
    mined = json.loads((tmp_path / "c" / "mined.json").read_text())
    assert mined == [pool.records[i] for i in json.loads((tmp_path / "c" / "selection.json").read_text())["pool_indices"]]


def test_resume_refuses_to_retrain_while_ranks_of_the_killed_attempt_still_write(tmp_path):
    """A process naming the round's runs/ folder (what an orphaned torchrun rank looks like) blocks
    the retrain of an interrupted stage; once it is gone, nothing does."""
    from skillbank.deft.loop import live_writers

    runs = tmp_path / "round_1" / "train" / "runs"
    runs.mkdir(parents=True)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--run-dir", str(runs / "20260101000000")])
    try:
        deadline = time.time() + 10
        while orphan.pid not in live_writers(runs) and time.time() < deadline:
            time.sleep(0.05)
        assert live_writers(runs) == [orphan.pid]
    finally:
        orphan.kill()
        orphan.wait()
    assert live_writers(runs) == []
