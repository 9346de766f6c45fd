"""`skillbank deft init`: the DEFT sets and config from a model, a pool and a test set (the demo clips and
the tiny model, its recipe naming the pool as its training data); `deft --dry-run --json` naming every
overlapping record; `stop.adopt_on` adopting rounds on one family without letting the others fall."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from helpers import skillbank


TOTAL_PIXELS = 401_408  # the recipe's pixel budget: what evaluation reads, and so what deft init's train.yaml must train at


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def user(tmp_path_factory, tiny_model_dir, demo_dataset_dir) -> dict[str, Path]:
    """What a user has: a model whose recipe names its training data (the demo train set, which is also
    the pool, plus a second question on one clip), and a test set of other clips, one of them a byte copy
    of a pool clip under another name and id (a leak deft init must keep out of every set)."""
    from skillbank import recipe

    root = tmp_path_factory.mktemp("deft-init")
    model = root / "model"
    shutil.copytree(tiny_model_dir, model)
    shutil.copytree(demo_dataset_dir / "train", root / "pool")
    pool = json.loads((root / "pool" / "annotations.json").read_text())
    second = copy.deepcopy(pool[0])
    second["id"] = "train_00000_q2"
    second["conversations"][0]["value"] = "<video>\nWhat colour is the ball? Answer with one word."
    second["conversations"][1]["value"] = second["attributes"]["colour"]
    pool_file = root / "pool" / "pool_plus.json"
    pool_file.write_text(json.dumps([*pool, second]))
    recipe.write(model, recipe.from_custom({"train_dataset": {"annotation_path": str(pool_file)}, "vision": {"fps": 2.0, "total_pixels": TOTAL_PIXELS},
                                            "system_prompt": "Answer briefly."}, base_model=str(tiny_model_dir), model_dir=model))
    bench_dir = root / "bench"
    shutil.copytree(demo_dataset_dir / "val", bench_dir)
    bench = json.loads((bench_dir / "annotations.json").read_text())
    for r in bench:
        r["id"] = "bench_" + r["id"]
    shutil.copy(root / "pool" / pool[5]["video"], bench_dir / "videos" / "copied.mp4")
    bench.append({**copy.deepcopy(pool[5]), "id": "bench_copied", "video": "videos/copied.mp4"})
    (bench_dir / "annotations.json").write_text(json.dumps(bench))
    return {"model": model, "pool": pool_file, "bench": bench_dir / "annotations.json", "leaked_id": pool[5]["id"]}


def test_init_writes_sets_and_a_config_that_passes_the_dry_run(tmp_path, user):
    before = {k: _sha(user[k]) for k in ("pool", "bench")}
    out = tmp_path / "deft"
    proc = skillbank("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
                     "--out", str(out), "--proxy-fraction", "0.25", "--seed", "3", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    pool_in = json.loads(user["pool"].read_text())
    proxy, rest = json.loads((out / "proxy.json").read_text()), json.loads((out / "pool.json").read_text())
    base = json.loads((out / "base_train.json").read_text())

    # the leaked pool record is in no set; proxy + pool are the rest of the pool, whole and as they were
    assert [o["id"] for o in doc["pool_left_out_benchmark"]] == [user["leaked_id"]]
    assert doc["pool_left_out_benchmark"][0]["by"] == "content" and doc["pool_left_out_benchmark"][0]["protected_ids"] == ["bench_copied"]
    assert sorted(r["id"] for r in proxy + rest) == sorted(r["id"] for r in pool_in if r["id"] != user["leaked_id"])
    assert all(r in pool_in for r in proxy + rest)
    # the proxy: a quarter of the clips, stratified by family, the two questions of one clip on one side
    assert len({r["video"] for r in proxy}) == int(0.25 * len({r["video"] for r in proxy + rest}))
    per_family = Counter(r["family"] for r in proxy if r["id"] != "train_00000_q2")  # one record per clip: the clip's family
    assert len(per_family) == 3 and max(per_family.values()) - min(per_family.values()) <= 1
    assert len({r["id"] for r in proxy} & {"train_00000", "train_00000_q2"}) in (0, 2)
    assert doc["sets"]["proxy"]["seed"] == 3
    # the base set: the recipe's training data less the benchmark's clip; the pool is that data: warned, counted
    assert doc["sets"]["base"]["from"].startswith("the recipe's training data")
    assert len(base) == len(pool_in) - 1 and user["leaked_id"] not in {r["id"] for r in base}
    overlap = doc["training_overlap"]  # the pool and the proxy are the model's own training data: counted, warned
    assert overlap["pool"]["count"] == overlap["pool"]["of"] == len(rest) and sorted(overlap["pool"]["ids"]) == sorted(r["id"] for r in rest)
    assert overlap["proxy"]["count"] == overlap["proxy"]["of"] == len(proxy) and overlap["proxy"]["share"] == 1.0
    assert any("the pool is already the model's training data" in w for w in doc["warnings"])
    assert any(w.startswith(f"{len(proxy)} of {len(proxy)} proxy record(s) (100%)") and "proxy_is_training_data" in w for w in doc["warnings"])
    # a proxy of a handful of records cannot measure a gap: warned with its count and interval, counted in proxy_size
    assert doc["proxy_size"] | {"ci95_half_width": None} == {"records": len(proxy), "min_records": 39, "ci95_half_width": None,
                                                             "one_answer": round(1 / len(proxy), 4), "enough": False}
    assert doc["proxy_size"]["ci95_half_width"] > 0.15
    assert any(w.startswith(f"the proxy set has only {len(proxy)} record(s)") and "+-" in w and "39 records or more" in w
               and "larger pool" in w for w in doc["warnings"])
    # the benchmark as given, never written
    assert {k: _sha(user[k]) for k in ("pool", "bench")} == before and doc["sets"]["benchmark"]["written"] is False
    config = yaml.safe_load((out / "deft.yaml").read_text())
    assert config["benchmark"]["annotation_path"] == str(user["bench"]) and config["retrain"]["backend"] == "local"
    spec = yaml.safe_load((out / "train.yaml").read_text())
    assert spec["custom"]["vision"]["fps"] == 2.0 and spec["custom"]["system_prompt"] == "Answer briefly."  # the recipe's
    assert spec["custom"]["vision"]["total_pixels"] == TOTAL_PIXELS  # rounds train at the resolution they are evaluated at
    assert spec["policy"]["parallelism"]["dp_shard_size"] == 1 and spec["train"]["param_dtype"] == "float32"  # no GPU here
    assert yaml.safe_load((out / "eval.yaml").read_text())["num_gpus"] == 0

    proc = skillbank("deft", "--config", str(out / "deft.yaml"), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pre = json.loads(proc.stdout)["preflight"]
    assert pre["benchmark_disjoint"] is True and pre["runs_on"] == "here"
    assert {k: (v["count"], v["of"]) for k, v in pre["training_overlap"].items()} == {"proxy": (len(proxy), len(proxy)), "pool": (len(rest), len(rest))}
    assert any("a round that finds no gaps stops with proxy_is_training_data" in w for w in pre["warnings"])
    assert pre["proxy_size"] == doc["proxy_size"] and any(w.startswith(f"the proxy set has only {len(proxy)} record(s)")
                                                          and "proxy.annotation_path" in w for w in pre["warnings"])


def test_init_with_base_file_and_bad_input(tmp_path, user, tiny_model_dir):
    base = tmp_path / "base.json"
    pool_in = json.loads(user["pool"].read_text())
    base.write_text(json.dumps(pool_in[:4]))
    out = tmp_path / "deft"
    proc = skillbank("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
                     "--out", str(out), "--base", str(base), "--base-media-dir", str(user["pool"].parent), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["sets"]["base"]["records"] == 4 and doc["sets"]["base"]["from"] == f"--base {base}"
    assert doc["training_overlap"]["pool"]["count"] + doc["training_overlap"]["proxy"]["count"] <= 4 and not any("already the model's training data" in w for w in doc["warnings"])

    # a model folder without a recipe and no --base: exit 2 naming the folder, the missing file and the fix (what --base is
    # for), nothing written; a hub id likewise; --help says so
    empty = tmp_path / "nothing"
    for model, where in ((str(tiny_model_dir), f"{tiny_model_dir}/skillbank_recipe.json"), ("hf_model://nvidia/Cosmos-Reason1-7B", "--model")):
        proc = skillbank("deft", "init", "--model", model, "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
                         "--out", str(empty), "--json")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        error = json.loads(proc.stdout)["error"]
        assert error["where"] == where and model in error["message"] and "skillbank_recipe.json" in error["message"], error
        assert error["fix"].startswith("pass --base FILE: the training set the model was fine-tuned on") and "training items" in error["fix"]
        assert not empty.exists()
    help_text = " ".join(skillbank("deft", "init", "--help").stdout.split())
    assert "the training set the model was fine-tuned on" in help_text and "without that file, or for a hub id, init exits 2" in help_text


def test_init_for_a_cluster_records_shape_backend_family_and_path_map_and_the_dry_run_defers_the_node(tmp_path, user):
    """deft init planned here for two 8-GPU nodes under a path map: deft.yaml and train.yaml name the node's paths and
    record the map; `deft --dry-run --runs-on node` reads them here, checks spec and data, and lists GPUs and
    redis-server as 'check on the node' (without --runs-on node they are errors: exit 2)."""
    site = user["model"].parent
    out = tmp_path / "deft"
    proc = skillbank("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
                     "--out", str(out), "--gpus-per-node", "8", "--nodes", "2", "--adopt-on", "directionality",
                     "--path-map", f"{site}=/lustre/site", "--path-map", f"{tmp_path}=/lustre/work", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["rounds_train_on"] | {"vision": None} == {"backend": "cosmos-rl", "nodes": 2, "gpus_per_node": 8, "gpus_found_by": "--gpus-per-node",
                                                          "ranks_per_node": 8, "vision": None}
    assert doc["adopt_on"] == "directionality" and doc["path_map"] == [f"{site}=/lustre/site", f"{tmp_path}=/lustre/work"]
    config = yaml.safe_load((out / "deft.yaml").read_text())
    assert config["paths"]["map"] == doc["path_map"] and config["stop"]["adopt_on"] == "directionality"
    assert config["retrain"]["backend"] == "cosmos-rl" and config["model"] == "/lustre/site/model"
    assert config["train_spec"] == "/lustre/work/deft/train.yaml" and config["output_dir"] == "/lustre/work/deft/run"
    assert config["benchmark"]["annotation_path"] == "/lustre/site/bench/annotations.json"
    spec = yaml.safe_load((out / "train.yaml").read_text())
    assert (spec["policy"]["parallelism"]["dp_shard_size"], spec["policy"]["parallelism"]["dp_replicate_size"]) == (8, 2)
    assert spec["paths"]["map"] == doc["path_map"] and spec["custom"]["train_dataset"]["annotation_path"] == "/lustre/work/deft/base_train.json"
    assert spec["train"]["param_dtype"] != "float32" and spec["custom"]["vision"]["total_pixels"] == TOTAL_PIXELS
    assert doc["next"].endswith("--dry-run --runs-on node")

    proc = skillbank("deft", "--config", str(out / "deft.yaml"), "--dry-run", "--runs-on", "node", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pre = json.loads(proc.stdout)["preflight"]
    assert pre["runs_on"] == "node" and pre["rounds_train_on"] == {"backend": "cosmos-rl", "nodes": 2, "ranks_per_node": 8}
    node = " | ".join(pre["check_on_node"])
    assert "redis-server" in node and "8 GPU(s)" in node, node
    text = skillbank("deft", "--config", str(out / "deft.yaml"), "--dry-run", "--runs-on", "node")
    assert text.returncode == 0 and "check on the node: train_spec:" in text.stdout and "proxy records already in the base train set" in text.stdout
    here = skillbank("deft", "--config", str(out / "deft.yaml"), "--dry-run")
    assert here.returncode == 2 and "redis-server" in here.stderr and "--runs-on node" in here.stderr
    assert skillbank("deft", "--config", str(out / "deft.yaml"), "--runs-on", "node").returncode == 2  # the loop itself runs here

    # bad flags: exit 2 naming the flag, nothing written
    for flags, where in ((("--adopt-on", "nosuch"), "--adopt-on"), (("--backend", "cosmos-rl", "--gpus-per-node", "0"), "--backend"),
                         (("--backend", "local", "--nodes", "2"), "--nodes")):
        bad = tmp_path / f"bad{where}"
        proc = skillbank("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
                         "--out", str(bad), *flags, "--json")
        assert proc.returncode == 2 and json.loads(proc.stdout)["error"]["where"] == where, proc.stdout + proc.stderr
        assert not bad.exists()


def test_proxy_size_threshold_and_the_fraction_it_asks_for():
    from skillbank.deft import bootstrap, rules
    from skillbank.scoring.stats import MEASURE_HALF_WIDTH, MEASURE_MIN_RECORDS, wilson_half_width

    assert MEASURE_MIN_RECORDS == 39  # the smallest n whose 95% Wilson interval at 50% is at most +-15 points
    assert wilson_half_width(0.5, 39) <= MEASURE_HALF_WIDTH < wilson_half_width(0.5, 38)
    assert rules.proxy_size_warning(rules.proxy_size(39), "fix") is None and rules.proxy_size_warning(rules.proxy_size(0), "fix") is None
    five = rules.proxy_size(5)  # 1 error in 5 is 20 points; the interval is +-33 points
    assert five["one_answer"] == 0.2 and round(five["ci95_half_width"], 2) == 0.33
    warning = rules.proxy_size_warning(five, "pass more")
    assert "only 5 record(s)" in warning and "20 points" in warning and "+-33 points" in warning and warning.endswith("pass more")
    assert "+-33 points" in rules.proxy_size_line(five)
    # 20 proxy records at fraction 0.1 of a 200-record pool: 0.2 gives about 39; a pool too small for that says so
    assert bootstrap._larger_proxy(0.1, 20, 200).startswith("pass --proxy-fraction 0.2 (about 39 of the pool's 200 records)")
    assert "larger pool" in bootstrap._larger_proxy(0.1, 2, 24)


def test_init_set_writes_loop_settings_and_names_a_bad_key(tmp_path, user):
    """--set KEY=VALUE writes mining and stop settings into deft.yaml (no sed); a bad key or value exits 2 naming
    the dotted key and the fix, no traceback, nothing written."""
    args = ("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]))
    out = tmp_path / "deft"
    proc = skillbank(*args, "--out", str(out), "--set", "mining.records_per_round=2", "--set", "stop.max_rounds=5",
                     "--set", "stop.adopt_on=directionality", "--set", "mining.strategy=random", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["set"] == {"mining.records_per_round": 2, "stop.max_rounds": 5, "stop.adopt_on": "directionality", "mining.strategy": "random"}
    assert doc["adopt_on"] == "directionality"  # --set stop.adopt_on is --adopt-on
    config = yaml.safe_load((out / "deft.yaml").read_text())
    assert (config["mining"]["records_per_round"], config["mining"]["strategy"], config["stop"]["max_rounds"], config["stop"]["adopt_on"]) == (
        2, "random", 5, "directionality")
    text = skillbank(*args, "--out", str(tmp_path / "text"), "--set", "stop.max_rounds=4")
    assert text.returncode == 0 and "stop.max_rounds = 4 (--set)" in text.stdout and "proxy size:" in text.stdout

    for setting, where, fix in (("mining.records_per_rnd=3", "mining.records_per_rnd", "did you mean mining.records_per_round"),
                                ("stop.max_rounds=0", "stop.max_rounds", "stop.max_rounds"),
                                ("stop.max_rounds=many", "stop.max_rounds", "int"),
                                ("mining.strategy=best", "mining.strategy", "mining.strategy"),
                                ("nosuch=1", "nosuch", "parameters.md"),
                                ("output_dir=/elsewhere", "output_dir", "--out"),
                                ("proxy.annotation_path=/x.json", "proxy.annotation_path", "--proxy-fraction"),
                                ("stop.max_rounds", "--set", "KEY=VALUE")):
        bad = tmp_path / "bad"
        proc = skillbank(*args, "--out", str(bad), "--set", setting, "--json")
        assert proc.returncode == 2, (setting, proc.stdout, proc.stderr)
        error = json.loads(proc.stdout)["error"]
        assert where in error["where"] and fix in error["fix"] + error["message"], (setting, error)
        assert "Traceback" not in proc.stderr and not bad.exists()
    proc = skillbank(*args, "--out", str(tmp_path / "bad"), "--adopt-on", "directionality", "--set", "stop.adopt_on=yes_no")
    assert proc.returncode == 2 and "disagree" in proc.stderr and "Traceback" not in proc.stderr


def test_init_warns_of_a_pool_that_runs_dry_as_the_dry_run_does_and_prints_warnings_before_next(tmp_path, user):
    """A pool (after the carve) smaller than mining.records_per_round x stop.max_rounds (after --set) is warned about at
    init by the dry run's rule (deft.rules.pool_budget), beside the proxy size; in text every warning is `warning: WHAT`
    and `  fix: ...` on stdout before the closing next line, nothing on stderr."""
    args = ("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
            "--set", "mining.records_per_round=48", "--set", "stop.max_rounds=2")
    proc = skillbank(*args, "--out", str(tmp_path / "j"), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    pool = doc["sets"]["pool"]["records"]
    assert doc["pool_budget"] == {"records": pool, "records_per_round": 48, "max_rounds": 2, "need": 96, "rounds_fed": 1, "enough": False}
    short = [w for w in doc["warnings"] if w.startswith(f"pool: {pool} records < mining.records_per_round x stop.max_rounds (96)")]
    assert len(short) == 1 and f"; fix: pass a pool with more labelled records, or --set mining.records_per_round={pool // 2}" in short[0]
    small = next(i for i, w in enumerate(doc["warnings"]) if w.startswith("the proxy set has only"))
    assert doc["warnings"][small + 1] == short[0]  # beside the proxy-size warning
    # the dry run of the written config: the same warning (its fix names the config's keys instead of --set)
    dry = skillbank("deft", "--config", str(tmp_path / "j" / "deft.yaml"), "--dry-run", "--json")
    pre = json.loads(dry.stdout)["preflight"]
    assert pre["pool_budget"] == doc["pool_budget"]
    assert [w.split("; fix: ")[0] for w in pre["warnings"] if w.startswith("pool: ")] == [short[0].split("; fix: ")[0]]

    text = skillbank(*args, "--out", str(tmp_path / "t"))
    assert text.returncode == 0 and text.stderr == "", text.stderr[-3000:]
    lines = text.stdout.splitlines()
    assert lines[-1].startswith("wrote ") and "; next: skillbank deft --config" in lines[-1]
    assert f"  pool budget: {pool} records for up to 2 round(s) of 48 (mining.records_per_round x stop.max_rounds = 96): runs dry" in lines
    first = next(n for n, line in enumerate(lines) if line.startswith("warning: "))
    assert all(line.startswith(("warning: ", "  fix: ")) for line in lines[first:-1])
    proxy = next(n for n, line in enumerate(lines) if line.startswith("warning: the proxy set has only"))
    assert lines[proxy + 1].startswith("  fix: ") and "fix" not in lines[proxy]
    assert lines[proxy + 2] == f"warning: {short[0].split('; fix: ')[0]}" and lines[proxy + 3].startswith("  fix: pass a pool with more")


def test_dry_run_json_lists_every_overlapping_record(tmp_path, user):
    out = tmp_path / "deft"
    assert skillbank("deft", "init", "--model", str(user["model"]), "--pool", str(user["pool"]), "--benchmark", str(user["bench"]),
                     "--out", str(out)).returncode == 0
    config = yaml.safe_load((out / "deft.yaml").read_text())
    config["benchmark"] = {"annotation_path": str(user["pool"]), "media_dir": ""}  # the benchmark is the pool: everything leaks
    (out / "leaky.yaml").write_text(yaml.safe_dump(config))
    proc = skillbank("deft", "--config", str(out / "leaky.yaml"), "--dry-run", "--json")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["error"]["where"] == "benchmark.annotation_path"
    pool, proxy, base = (json.loads((out / f"{n}.json").read_text()) for n in ("pool", "proxy", "base_train"))
    by_set = Counter((o["set"], o["by"]) for o in doc["overlaps"])
    assert by_set == {("pool", "id"): len(pool), ("pool", "content"): len(pool), ("proxy", "id"): len(proxy),
                      ("proxy", "content"): len(proxy), ("train", "id"): len(base), ("train", "content"): len(base)}
    assert len(doc["overlaps"]) > 5 and "lists every one" in doc["error"]["message"]
    text = skillbank("deft", "--config", str(out / "leaky.yaml"), "--dry-run")
    assert text.returncode == 2 and ", ..." in text.stderr  # the message names the first few


def test_adopt_on_one_family_guards_the_others(tmp_path):
    from skillbank.deft import rules
    from skillbank.deft.loop import Loop
    from skillbank.deft.state import LoopState
    from skillbank.specification.deft import DeftConfig

    verdict = rules.adopt_on_family({"dir": 0.5, "yes_no": 0.9}, {"dir": 0.3, "yes_no": 0.95}, "dir", max_drop=0.02)
    assert not verdict.adopted and verdict.fallen == {"yes_no": 0.05} and "guard" in verdict.reason
    assert rules.adopt_on_family({"dir": 0.5, "yes_no": 0.94}, {"dir": 0.3, "yes_no": 0.95}, "dir", max_drop=0.02).adopted
    assert not rules.adopt_on_family({"dir": 0.3, "yes_no": 1.0}, {"dir": 0.3, "yes_no": 0.9}, "dir").adopted  # no gain on dir

    config = DeftConfig(output_dir=str(tmp_path), stop={"adopt_on": "dir", "max_family_drop": 0.02, "max_rounds": 5, "patience": 3,
                                                          "target": 0.9})
    state = LoopState.open(tmp_path, config.model_dump(mode="json"), resume=False)
    loop = Loop(config, {"sets": {}, "train_spec": None, "eval_config": {}}, state)

    def bench(value, dir_acc, yes_no):
        return {"value": value, "families": {"dir": {"accuracy": dir_acc}, "yes_no": {"accuracy": yes_no}}}

    state.data["best"] = loop.best_entry(0, "base", bench(0.6, 0.2, 1.0), {"value": 0.5, "results_dir": "r0"})
    state.data["rounds"] = [{"round": 0, "model": "base", "adopted": True, "proxy": {"value": 0.5}, "benchmark": bench(0.6, 0.2, 1.0)}]
    assert state.data["best"]["benchmark"] == 0.2  # what adoption and the target judge: dir's accuracy

    def record(r, b):
        for name, result in (("gaps", {"gaps": 3}), ("mine", {"selected": 2}), ("curate", {"added": 2}), ("train", {"last_step": 4}),
                             ("evaluate", {"model": f"m{r}", "step": 2, "proxy": {"value": 0.5, "results_dir": f"r{r}"}, "benchmark": b})):
            state.run_stage(r, name, lambda f, i, result=result: dict(result))

    record(1, bench(0.7, 0.6, 0.9))  # overall up, dir up, yes_no down 0.1: not adopted
    assert not state.run_stage(1, "decide", lambda f, i: loop.decide(1, f, i))["adopted"]
    assert state.data["rounds"][-1]["decided_on"]["why_not"].startswith("fell beyond the guard (yes_no -0.1000")
    record(2, bench(0.55, 0.5, 0.99))  # overall down, dir up, yes_no within the guard: adopted
    assert state.run_stage(2, "decide", lambda f, i: loop.decide(2, f, i))["adopted"]
    assert state.data["best"]["model"] == "m2" and state.data["best"]["benchmark"] == 0.5
    record(3, bench(0.9, 0.95, 0.985))
    assert state.run_stage(3, "decide", lambda f, i: loop.decide(3, f, i))["adopted"]
    assert loop.stop_decision(3).reason == "target"  # the target is dir's accuracy too
