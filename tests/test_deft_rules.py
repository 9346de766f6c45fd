"""The DEFT loop's pure parts: regression guard, stop rule, selection, FAISS exact vs IVF, the state
file's stage bookkeeping, and the generated config schema / template."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from skillbank.deft import rules
from skillbank.deft.index import build_index, normalise, search
from skillbank.deft.select import random_pick, round_robin
from skillbank.deft.state import LoopState
from skillbank.errors import InputError


def test_regression_guard_adopts_only_a_strict_improvement():
    assert rules.adopt(0.6, 0.5)
    assert not rules.adopt(0.5, 0.5)  # a tie keeps the best so far
    assert not rules.adopt(0.4, 0.5)  # a worse round is never adopted
    assert not rules.adopt(0.55, 0.5, min_gain=0.1)
    assert rules.adopt(0.61, 0.5, min_gain=0.1)


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        (dict(best=0.9, rounds_done=1, adopted=[True], target=0.9), "target"),
        (dict(best=0.5, rounds_done=3, adopted=[True, True, True]), "max_rounds"),
        (dict(best=0.5, rounds_done=2, adopted=[True, False], patience=1), "patience"),
        (dict(best=0.5, rounds_done=2, adopted=[False, True], patience=1), ""),
        (dict(best=0.5, rounds_done=2, adopted=[False, False], patience=3), ""),
        (dict(best=0.5, rounds_done=2, adopted=[True, False], patience=2), ""),
        (dict(best=0.5, rounds_done=1, adopted=[True], gaps=0), "no_gaps"),
        (dict(best=0.5, rounds_done=1, adopted=[True], gaps=0, proxy_training_share=0.49), "no_gaps"),
        (dict(best=0.5, rounds_done=1, adopted=[True], gaps=0, proxy_training_share=0.5), "proxy_is_training_data"),
        (dict(best=0.5, rounds_done=1, adopted=[True], gaps=3, proxy_training_share=1.0), ""),  # gaps found: the loop goes on
        (dict(best=0.9, rounds_done=1, adopted=[True], target=0.9, gaps=0, proxy_training_share=1.0), "target"),
        (dict(best=0.5, rounds_done=1, adopted=[True], pool_left=0), "pool_exhausted"),
        (dict(best=0.5, rounds_done=0, adopted=[]), ""),
    ],
)
def test_stop_rule(kwargs, reason):
    args = dict(target=None, max_rounds=3, patience=2) | kwargs
    decision = rules.should_stop(**args)
    assert decision.reason == reason
    assert decision.stop == bool(reason)


def test_round_robin_gives_every_gap_its_nearest_first_and_skips_used():
    indices = np.array([[5, 6, 7], [5, 8, 9], [1, 2, 3]])
    scores = np.array([[0.9, 0.8, 0.7], [0.95, 0.6, 0.5], [0.4, 0.3, 0.2]])
    picked = round_robin(indices, scores, budget=4, exclude=[1])
    assert [p[0] for p in picked] == [5, 2, 6, 8]  # rank 0: 5 (q1 closer), q2's 1 is used -> 2 at rank 1 ... by score
    assert len({p[0] for p in round_robin(indices, scores, budget=100)}) == 8
    assert [p[0] for p in round_robin(indices, scores, budget=100, per_query=1)] == [5, 1]


def test_random_control_is_seeded_and_avoids_used():
    a = random_pick(100, budget=10, exclude=range(50), seed=3)
    assert a == random_pick(100, budget=10, exclude=range(50), seed=3)
    assert len(a) == 10 and min(a) >= 50
    assert len(random_pick(5, budget=10)) == 5


def test_faiss_exact_and_ivf_agree_on_a_clustered_pool():
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((50, 32), dtype=np.float32)
    pool = centres[rng.integers(0, 50, 5000)] + 0.3 * rng.standard_normal((5000, 32), dtype=np.float32)
    queries = pool[:40] + 0.05 * rng.standard_normal((40, 32), dtype=np.float32)
    exact = search(pool, queries, 5, exact_max=10_000)
    ivf = search(pool, queries, 5, exact_max=1000, nprobe=16)
    assert (exact.kind, ivf.kind) == ("exact", "ivf")
    assert (exact.indices[:, 0] == np.arange(40)).all()  # each query's own source is its nearest
    recall = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(exact.indices, ivf.indices)])
    assert recall >= 0.9
    np.testing.assert_allclose(np.linalg.norm(normalise(pool), axis=1), 1.0, rtol=1e-5)
    index, kind = build_index(normalise(pool), exact_max=10)
    assert kind == "ivf" and index.ntotal == 5000


def test_ivf_index_is_trained_once_and_reused_from_its_cache_file(tmp_path):
    rng = np.random.default_rng(1)
    pool = rng.standard_normal((3000, 16), dtype=np.float32)
    cache = tmp_path / "pool.ivf0.faiss"
    first = search(pool, pool[:10], 3, exact_max=100, cache=cache)
    assert cache.is_file() and first.kind == "ivf"
    stamp = cache.stat().st_mtime_ns
    again = search(pool, pool[:10], 3, exact_max=100, cache=cache)
    assert cache.stat().st_mtime_ns == stamp
    assert (again.indices == first.indices).all()
    assert search(pool, pool[:10], 3, exact_max=10_000, cache=tmp_path / "none.faiss").kind == "exact"
    assert not (tmp_path / "none.faiss").exists()


def test_state_skips_done_stages_and_reruns_an_interrupted_one(tmp_path):
    config = {"a": 1}
    state = LoopState.open(tmp_path, config, resume=False)
    calls = []

    def stage(folder, interrupted):
        calls.append(interrupted)
        (folder / "x.txt").write_text("x")
        return {"outputs": {"x": folder / "x.txt"}, "value": 1}

    assert state.run_stage(0, "evaluate", stage) == {"value": 1}
    state.data["stages"]["round_1/train"] = {"status": "running", "attempts": 1}  # what a kill leaves behind
    state.save()
    with pytest.raises(InputError, match="--resume"):
        LoopState.open(tmp_path, config, resume=False)
    with pytest.raises(InputError, match="config differs"):
        LoopState.open(tmp_path, {"a": 2}, resume=True)
    again = LoopState.open(tmp_path, config, resume=True)
    assert again.run_stage(0, "evaluate", stage) == {"value": 1}
    again.run_stage(1, "train", stage)
    assert calls == [False, True]
    data = json.loads((tmp_path / "state.json").read_text())
    assert data["stages"]["round_0/evaluate"]["outputs"] == {"x": str(tmp_path / "round_0" / "evaluate" / "x.txt")}
    assert data["stages"]["round_1/train"]["attempts"] == 2 and data["stages"]["round_1/train"]["status"] == "done"
    events = [json.loads(line)["event"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert events == ["start", "stage_start", "stage_done", "resume", "stage_start", "stage_done"]


def test_config_schema_and_template_are_generated_from_the_model():
    from skillbank.generate.bank import all_outputs, stale
    from skillbank.paths import skill_dir
    from skillbank.specification.deft import DeftConfig

    folder = skill_dir("tao-run-deft")
    schema = json.loads((folder / "schemas" / "deft.schema.json").read_text())
    template = yaml.safe_load((folder / "references" / "spec_template_deft.yaml").read_text())
    assert template == DeftConfig().model_dump(mode="json") == schema["default"]
    assert {"pool", "proxy", "benchmark", "mining", "stop", "retrain"} <= set(schema["properties"])
    assert not [p for p in stale(all_outputs()) if "tao-run-deft" in str(p)]


def test_decide_adopts_a_better_round_and_keeps_the_best_through_a_worse_one(tmp_path):
    """Loop.decide over recorded stage results (no model): round 1 improves the benchmark and becomes
    the best; round 2 is better on the proxy but worse on the benchmark and is not adopted."""
    from skillbank.deft.loop import Loop
    from skillbank.specification.deft import DeftConfig

    config = DeftConfig(output_dir=str(tmp_path), stop={"min_gain": 0.01, "max_rounds": 5, "patience": 2})
    state = LoopState.open(tmp_path, config.model_dump(mode="json"), resume=False)
    state.data["best"] = {"round": 0, "model": "base", "benchmark": 0.5, "proxy": 0.5, "proxy_results_dir": "r0"}
    state.data["rounds"] = [{"round": 0, "model": "base", "adopted": True, "proxy": {"value": 0.5}, "benchmark": {"value": 0.5}}]
    loop = Loop(config, {"sets": {}, "train_spec": None, "eval_config": {}}, state)

    def record(r, proxy, bench):
        for name, result in (("gaps", {"gaps": 3}), ("mine", {"selected": 2}), ("curate", {"added": 2}), ("train", {"last_step": 4}),
                             ("evaluate", {"model": f"m{r}", "step": 2, "proxy": {"value": proxy, "results_dir": f"r{r}"},
                                           "benchmark": {"value": bench}})):
            state.run_stage(r, name, lambda f, i, result=result: dict(result))

    record(1, 0.6, 0.7)
    assert state.run_stage(1, "decide", lambda f, i: loop.decide(1, f, i))["adopted"]
    assert state.data["best"] == {"round": 1, "model": "m1", "benchmark": 0.7, "benchmark_families": {}, "proxy": 0.6, "proxy_results_dir": "r1"}
    assert not loop.stop_decision(1).stop
    record(2, 0.9, 0.65)
    assert not state.run_stage(2, "decide", lambda f, i: loop.decide(2, f, i))["adopted"]
    assert state.data["best"]["model"] == "m1" and state.data["best"]["proxy_results_dir"] == "r1"
    assert [x["adopted"] for x in state.data["rounds"]] == [True, True, False]
    assert loop.stop_decision(2) == rules.StopDecision(False, "")
    config.stop.patience = 1
    assert loop.stop_decision(2).reason == "patience"


def test_a_proxy_of_training_items_without_gaps_stops_with_proxy_is_training_data(tmp_path):
    """Loop.run over recorded stages (no model): round 1 finds no gaps on a proxy whose 20 records are all
    training items (preflight's training_overlap): the stop reason says so, with the counts, in state.json,
    the result and the report."""
    from skillbank.deft.loop import Loop
    from skillbank.specification.deft import DeftConfig

    config = DeftConfig(output_dir=str(tmp_path), stop={"max_rounds": 3})
    state = LoopState.open(tmp_path, config.model_dump(mode="json"), resume=False)
    summary = {"metric": "accuracy", "value": 1.0, "families": {}, "results_dir": "r0"}
    state.run_stage(0, "evaluate", lambda f, i: {"proxy": 1.0, "benchmark": 0.4})
    state.data["rounds"] = [{"round": 0, "model": "base", "adopted": True, "proxy": summary, "benchmark": {**summary, "value": 0.4}}]
    state.data["best"] = {"round": 0, "model": "base", "benchmark": 0.4, "benchmark_families": {}, "proxy": 1.0, "proxy_results_dir": "r0"}
    state.run_stage(1, "gaps", lambda f, i: {"gaps": 0, "total": 20, "unparseable": 0, "families": {}})
    overlap = {"proxy": {"count": 20, "of": 20, "share": 1.0, "ids": []}, "pool": {"count": 0, "of": 50, "share": 0.0, "ids": []}}
    result = Loop(config, {"sets": {}, "train_spec": None, "eval_config": {}, "summary": {"training_overlap": overlap}}, state,
                  log=lambda line: None).run()
    assert result["stop_reason"] == "proxy_is_training_data" and "20 of 20 proxy records (100%)" in result["stop_why"]
    stop = json.loads((tmp_path / "state.json").read_text())["stop"]
    assert stop["reason"] == "proxy_is_training_data" and stop["proxy_training_items"] == {"count": 20, "of": 20, "share": 1.0}
    assert "20 of 20 proxy records" in (tmp_path / "report.md").read_text()
    overlap["proxy"] = {"count": 3, "of": 20, "share": 0.15, "ids": []}  # a few training items: no gaps is no gaps
    again = LoopState.open(tmp_path / "b", config.model_dump(mode="json"), resume=False)
    again.data.update({k: state.data[k] for k in ("rounds", "best")})
    again.data["stages"] = {k: v for k, v in state.data["stages"].items() if k in ("round_0/evaluate", "round_1/gaps")}
    config.output_dir = str(tmp_path / "b")
    result = Loop(config, {"sets": {}, "train_spec": None, "eval_config": {}, "summary": {"training_overlap": overlap}}, again,
                  log=lambda line: None).run()
    assert result["stop_reason"] == "no_gaps" and result["stop_why"] == "3 of 20 proxy records are training items of the base train set"


def test_allocate_puts_every_round_on_the_jobs_nodes_and_gpus():
    from skillbank.deft.preflight import allocate
    from skillbank.specification.train import TrainSpec

    spec = TrainSpec()
    assert allocate(spec, None, None) is spec and allocate(spec, 0, None) is spec  # a CPU job keeps the spec's ranks
    par = allocate(spec, 8, 2).policy.parallelism
    assert (par.dp_shard_size, par.dp_replicate_size) == (8, 2)
    tp2 = TrainSpec.model_validate({"policy": {"parallelism": {"tp_size": 2}}})
    assert allocate(tp2, 8, None).policy.parallelism.dp_shard_size == 4
    with pytest.raises(InputError) as err:
        allocate(tp2, 3, None)
    assert err.value.where == "--gpus-per-node" and "tp*cp*pp = 2" in err.value.message


def test_embeddings_are_cached_and_an_interrupted_embedding_resumes_at_its_last_chunk(tmp_path):
    from skillbank.deft.embed import cached_embeddings

    data = np.arange(50, dtype=np.float32).reshape(25, 2)
    calls = []

    def embed(start, stop, fail_at=None):
        calls.append(start)
        if start == fail_at:
            raise KeyboardInterrupt  # a kill mid-embedding
        return data[start:stop]

    with pytest.raises(KeyboardInterrupt):
        cached_embeddings(tmp_path, {"k": 1}, 25, lambda a, b: embed(a, b, fail_at=20), chunk=10)
    assert calls == [0, 10, 20]
    calls.clear()
    vectors, path, reused = cached_embeddings(tmp_path, {"k": 1}, 25, embed, chunk=10)
    assert calls == [20] and not reused and path.suffix == ".npy"
    np.testing.assert_array_equal(vectors, data)
    calls.clear()
    again, _, reused = cached_embeddings(tmp_path, {"k": 1}, 25, embed, chunk=10)
    assert reused and calls == [] and not list(tmp_path.glob("*.partial.*"))
    np.testing.assert_array_equal(again, data)
