"""`skillbank demo --deft`: the DEFT demo's sets (a weak family under-represented in the base set and
rare in the pool), its verdict rule (mined against random), and the quick variant's flow and --json
document (the accuracy targets are the full demo's job: benchmarks/deft_demo.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import skillbank
from skillbank.demo.deft import DeftDemoRecipe, compare, control_rounds
from skillbank.deft.demo import weak_family_sets


def test_weak_family_sets_under_represent_the_weak_family(tmp_path, demo_dataset_dir):
    sets = weak_family_sets(demo_dataset_dir, tmp_path, base_per_family=3, base_weak=1, pool_weak_share=0.2, proxy_per_family=2)
    loaded = {role: json.loads(Path(s["annotation_path"]).read_text()) for role, s in sets.items()}
    fams = {role: [r["family"] for r in recs] for role, recs in loaded.items()}
    assert sorted(fams["train"]) == sorted(["colour"] * 3 + ["yes_no"] * 3 + ["directionality"])
    assert sorted(fams["proxy"]) == sorted(["colour", "yes_no", "directionality"] * 2)
    strong = sum(f != "directionality" for f in fams["pool"])
    assert strong == 6 and fams["pool"].count("directionality") == round(0.2 * strong / 0.8) == 2  # 20% of the pool
    val = json.loads((demo_dataset_dir / "val" / "annotations.json").read_text())
    assert loaded["benchmark"] == val  # the frozen benchmark: every held-out clip
    ids = {role: {r["id"] for r in recs} for role, recs in loaded.items()}
    assert not ids["train"] & ids["pool"] and not ids["train"] & ids["proxy"] and not ids["proxy"] & ids["pool"]
    original = {r["id"]: r for r in json.loads((demo_dataset_dir / "train" / "annotations.json").read_text())}
    assert all(r == original[r["id"]] for role in ("train", "proxy", "pool") for r in loaded[role])  # records copied whole
    assert sets["pool"]["media_dir"] == sets["proxy"]["media_dir"] == str(demo_dataset_dir / "train")
    assert sets["benchmark"]["media_dir"] == str(demo_dataset_dir / "val")


def _rows(weak_acc: list[float], per_round: int = 48) -> list[dict]:
    return [{"round": i, "records_added": i * per_round, "families": {"directionality": a}} for i, a in enumerate(weak_acc)]


def test_verdict_records_to_target_and_gain_since_round_0():
    # mined reaches 0.8 after 48 records, random after 144: at most half -> met
    c = compare(_rows([0.3, 0.85, 0.9, 0.95]), _rows([0.3, 0.4, 0.5, 0.8]), "directionality", 0.8, 48)
    assert c["mined_reached"] == {"round": 1, "records_added": 48} and c["random_reached"]["records_added"] == 144
    assert c["records_target_met"] and c["met"]
    # mined at round 2 (96); random not within its 3 rounds: it needs at least a 4th (192) -> met
    c = compare(_rows([0.3, 0.6, 0.85, 0.9]), _rows([0.3, 0.35, 0.4, 0.45]), "directionality", 0.8, 48)
    assert c["random_reached"] is None and c["records_target_met"]
    assert [g["ok"] for g in c["gain_since_round_0"]] == [True, True, True] and c["gain_target_met"] and c["met"]
    # mined at round 3 (144), random not within 3 rounds (>= 192): not at most half; gains not 2x -> not met
    c = compare(_rows([0.3, 0.5, 0.6, 0.85]), _rows([0.3, 0.45, 0.5, 0.6]), "directionality", 0.8, 48)
    assert not c["records_target_met"] and not c["gain_target_met"] and not c["met"]


def test_the_control_runs_long_enough_to_decide():
    recipe = DeftDemoRecipe(rounds=3, target=0.8)
    assert control_rounds(recipe, _rows([0.0, 0.5, 0.7, 0.85])) == 5  # mined at round 3: random must fail through round 5
    assert control_rounds(recipe, _rows([0.0, 0.85, 0.9, 0.9])) == 3
    assert control_rounds(recipe, _rows([0.0, 0.5, 0.6, 0.7])) == 3  # mined never reached it


def test_quick_deft_demo_runs_both_arms_and_prints_one_json_document(tmp_path, demo_dataset_dir):
    out = tmp_path / "deft"
    proc = skillbank("demo", "--deft", "--quick", "--out", str(out), "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    quick = DeftDemoRecipe.quick()
    assert doc["ok"] and doc["weak_family"] == "directionality" and doc["target"] == quick.target
    assert set(doc["arms"]) == {"mined", "random"}
    for name, arm in doc["arms"].items():
        assert [r["round"] for r in arm["rounds"]] == [0, 1]
        assert arm["rounds"][0]["records_added"] == 0 and arm["rounds"][1]["records_added"] == quick.per_round
        for row in arm["rounds"]:
            assert set(row["families"]) == {"yes_no", "directionality", "colour"}
            assert all(0.0 <= v <= 1.0 for v in row["families"].values()) and row["benchmark_metric"] == "accuracy"
        assert Path(arm["report"]).is_file()
        state = json.loads(Path(arm["state"]).read_text())
        assert state["status"] == "done" and state["config"]["mining"]["strategy"] == ("knn" if name == "mined" else "random")
        assert state["config"]["model"] == doc["round0_model"]  # both arms start from the same round-0 model
    mined = json.loads(Path(doc["arms"]["mined"]["state"]).read_text())["stages"]["round_1/mine"]["result"]
    assert mined["index"] and mined["selected"] == quick.per_round  # nearest neighbours, not the random draw
    assert set(doc["comparison"]) >= {"mined_reached", "random_reached", "records_target_met", "gain_since_round_0", "gain_target_met", "met"}
    assert Path(doc["report"]).read_text().startswith("# skillbank demo --deft")
    assert json.loads((out / "deft_demo.json").read_text())["arms"] == doc["arms"]


def test_deft_only_flags_need_deft(tmp_path):
    proc = skillbank("demo", "--rounds", "2", "--out", str(tmp_path))
    assert proc.returncode == 2 and "--rounds" in proc.stderr and "Traceback" not in proc.stderr
