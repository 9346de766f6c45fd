"""`skillbank spec` refuses a plan that cannot run (exit 2, nothing written, the fix named) and fits the
batches the user did not set to the data (the template's value is the ceiling; the output says so);
the same fitting for rl specs, DEFT rounds and AutoML trials (skillbank.runs.steps); the TOML and
YAML we write end with a newline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from skillbank.cli import main
from skillbank.specification.train import TrainSpec
from skillbank.runs import fitting, steps
from test_run_arithmetic import spec_dict, write_records

SKILL = "tao-finetune-cosmos-reason"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A dataset root as make-demo-dataset lays it out: 24 train and 9 val records."""
    write_records(tmp_path / "data" / "train" / "annotations.json", 24)
    write_records(tmp_path / "data" / "val" / "annotations.json", 9)
    return tmp_path / "data"


def spec_json(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["spec", "--action", "train", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_unset_batches_are_fitted_to_the_data_and_the_output_says_so(root, tmp_path, capsys):
    out = tmp_path / "train.yaml"
    rc, doc = spec_json(capsys, "--dataset-root", str(root), "-o", str(out))
    assert rc == 0 and doc["ok"]
    fitted = {f["key"]: f for f in doc["fitted"]}
    # 24 records over the template's 8 ranks: 3 per rank; mini_batch 2 -> the largest batch with a step is 2
    assert (fitted["train.train_batch_per_replica"]["from"], fitted["train.train_batch_per_replica"]["to"]) == (32, 2)
    assert "24 train records over 8 data-parallel rank(s) give 3 per rank" in fitted["train.train_batch_per_replica"]["why"]
    # 9 val records over 8 ranks: 2 per rank; the template's 8 would validate nothing
    assert (fitted["validation.batch_size"]["from"], fitted["validation.batch_size"]["to"]) == (8, 2)
    assert doc["plan"]["steps_per_epoch"] == 1 and doc["plan"]["validation"]["batches_per_rank"] == 1
    written = yaml.safe_load(out.read_text())
    assert written["train"]["train_batch_per_replica"] == 2 and written["validation"]["batch_size"] == 2
    assert main(["spec", "--action", "train", "--dataset-root", str(root)]) == 0
    err = capsys.readouterr().err
    assert "fitted: train.train_batch_per_replica 32 -> 2: 24 train records over 8" in err and "fitted: validation.batch_size 8 -> 2" in err


def test_mini_batch_comes_down_only_when_a_rank_holds_less_than_one(root, capsys):
    rc, doc = spec_json(capsys, "--dataset-root", str(root), "--set", "dp_shard_size=16", "--set", "validation.enable=false")
    assert rc == 0  # 24 over 16 ranks: 2 per rank, mini_batch 2 stays
    assert [(f["key"], f["to"]) for f in doc["fitted"]] == [("train.train_batch_per_replica", 2)]
    rc, doc = spec_json(capsys, "--dataset-root", str(root), "--set", "dp_shard_size=24", "--set", "validation.enable=false")
    assert rc == 0 and [(f["key"], f["to"]) for f in doc["fitted"]] == [("train.train_batch_per_replica", 1), ("train.train_policy.mini_batch", 1)]
    assert doc["spec"]["train"]["train_policy"]["mini_batch"] == 1


@pytest.mark.parametrize("how", ["set", "shorthand", "from"])
def test_a_value_the_user_set_is_kept_and_refused_with_the_fix(root, tmp_path, capsys, how):
    out = tmp_path / "train.yaml"
    if how == "from":
        base = tmp_path / "base.yaml"
        base.write_text(yaml.safe_dump({"train": {"train_batch_per_replica": 32}}))
        argv = ["--from", str(base), "--dataset-root", str(root)]
    else:
        argv = ["--dataset-root", str(root), "--set", "train.train_batch_per_replica=32" if how == "set" else "batch_size=32"]
    rc, doc = spec_json(capsys, *argv, "-o", str(out))
    assert rc == 2 and not doc["ok"] and not out.exists()  # nothing written
    err = doc["error"]
    assert err["where"] == "train.train_batch_per_replica" and "nothing written" in err["message"] and "zero steps" in err["message"]
    assert "you set train.train_batch_per_replica: kept as given" in err["message"]
    assert "train.train_batch_per_replica=2 (1 steps per epoch" in err["fix"]


def test_validation_with_zero_batches_is_refused_when_set_and_the_text_output_names_the_fix(root, tmp_path, capsys):
    out = tmp_path / "train.yaml"
    assert main(["spec", "--action", "train", "--dataset-root", str(root), "--set", "validation.batch_size=8", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert not out.exists() and "validation.batch_size" in err and "validates nothing" in err and "fix: set validation.batch_size=2" in err
    assert "Traceback" not in err


def test_fitting_is_the_one_rule_in_runs_fitting(tmp_path):
    spec = TrainSpec.model_validate(spec_dict(tmp_path, 17, train__train_batch_per_replica=8, train__train_policy={"mini_batch": 2}))
    count = steps.train_count(spec, 17)  # 2 ranks: 9 per rank; batch 8 gives 1 step per epoch
    [fit] = fitting.fit_train_batches(spec, count)
    assert (fit.key, fit.before, fit.after) == ("train.train_batch_per_replica", 8, 2)  # 9 // 4 = 2: 4 steps per epoch
    assert "at least 4 optimizer steps per epoch" in fit.why and "4 optimizer step(s) per epoch, 8 in all" in fit.why
    assert fitting.fit_train_batches(spec, count, fixed={"train.train_batch_per_replica"}) == []
    fitted = fitting.apply_fits(spec, [fit])
    assert steps.step_plan(fitted, 17).steps_per_epoch == 4 and steps.steps_problem(fitted, count) is None
    assert steps.steps_problem(spec, count).severity == "warning"  # what an explicit 8 keeps: the barely-trains warning


@pytest.mark.parametrize(("per_rank", "batch", "mini", "mini_fixed", "expected"), [
    (25, 32, 2, False, (6, 2, True)),  # 200 records on 8 GPUs: 4 steps per epoch, not 24 (1 step)
    (100, 32, 2, False, (24, 2, True)),  # 3 steps at 32; 24 gives 4
    (128, 32, 2, False, None),  # already 4 steps: kept
    (6, 32, 2, False, (1, 1, True)),  # mini_batch 2 gives 3 steps: it comes down so the batch gives 4
    (6, 32, 2, True, (6, 2, False)),  # ... unless the user set it: the largest batch that trains
    (6, 4, 2, True, None),  # no batch reaches 4 and 4 already trains: kept
    (3, 32, 2, False, (2, 2, False)),  # 3 records per rank: no batch reaches 4; the largest that trains
    (1, 32, 2, False, (1, 1, False)),  # fewer records than one mini batch
    (1, 32, 2, True, None),  # ... with mini_batch set: nothing trains, plan_errors names the fix
    (0, 32, 2, False, None),
])
def test_fit_batch_reaches_four_steps_where_the_data_allows(per_rank, batch, mini, mini_fixed, expected):
    assert fitting.fit_batch(per_rank, batch, mini, mini_fixed=mini_fixed) == expected
    if expected:
        new, new_mini, reached = expected
        assert new % new_mini == 0 and new < batch and (per_rank // new >= steps.FEW_STEPS_PER_EPOCH) == reached


def test_two_hundred_records_on_eight_gpus_train_four_steps_an_epoch(tmp_path, capsys):
    """The issue's case: the template (batch 32, mini_batch 2, dp_shard_size 8) on 200 records."""
    write_records(tmp_path / "qa" / "train" / "annotations.json", 200)
    write_records(tmp_path / "qa" / "val" / "annotations.json", 40)
    rc = main(["spec", "--action", "train", "--dataset-root", str(tmp_path / "qa")])
    err = capsys.readouterr().err
    assert rc == 0
    assert ("fitted: train.train_batch_per_replica 32 -> 6: 200 train records over 8 data-parallel rank(s) give 25 per rank; 32 would give 0 step(s) per epoch; "
            "the largest multiple of mini_batch 2 giving at least 4 optimizer steps per epoch (fewer barely trains): "
            "4 optimizer step(s) per epoch, 12 in all") in err
    assert "  4 optimizer steps per epoch;" in err and "12 in all over 3 epoch(s)" in err and "warning" not in err


def test_a_deft_round_and_an_automl_trial_fit_what_they_inherit(tmp_path):
    """fit_to_data counts the derived spec's own files: a DEFT round's base + mined records, a trial's data."""
    data = spec_dict(tmp_path, 5, train__train_batch_per_replica=32, train__train_policy={"mini_batch": 2},
                     validation={"enable": True, "batch_size": 8})
    data["custom"]["val_dataset"] = {"annotation_path": str(write_records(tmp_path / "val.json", 3)), "media_path": str(tmp_path / "media")}
    spec, fits = fitting.fit_to_data(TrainSpec.model_validate(data))
    assert [(f.key, f.after) for f in fits] == [("train.train_batch_per_replica", 2), ("validation.batch_size", 2)]
    assert spec.train.train_batch_per_replica == 2 and spec.validation.batch_size == 2
    _, kept = fitting.fit_to_data(TrainSpec.model_validate(data), fixed={"validation.batch_size"})
    assert [f.key for f in kept] == ["train.train_batch_per_replica"]


def _rl_root(tmp_path: Path, prompts: int) -> Path:
    write_records(tmp_path / "rl" / "annotations.json", prompts)
    return tmp_path / "rl"


def test_rl_spec_batch_is_fitted_to_the_prompts_and_refused_when_set(tmp_path, capsys):
    root = _rl_root(tmp_path, 3)  # 3 prompts x n_generation 8 = 24 samples; the template's 32 would run no step
    rc = main(["spec", "--action", "rl", "--dataset-root", str(root), "--set", "start=/x", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["fitted"][0]["key"] == "train.train_batch_per_replica" and doc["fitted"][0]["to"] == 24
    assert doc["plan"]["steps_per_epoch"] == 1 and doc["spec"]["train"]["train_batch_per_replica"] % 8 == 0
    # 3 x 6 = 18 samples; no multiple of lcm(dp_shard_size 4 x mini_batch 2, 6) = 24 fits: mini_batch 1, lcm(4, 6) = 12
    rc = main(["spec", "--action", "rl", "--dataset-root", str(root), "--set", "rollout.n_generation=6", "--json"])
    train = json.loads(capsys.readouterr().out)["spec"]["train"]
    assert rc == 0 and (train["train_batch_per_replica"], train["train_policy"]["mini_batch"]) == (12, 1)
    out = tmp_path / "rl.yaml"
    rc = main(["spec", "--action", "rl", "--dataset-root", str(root), "--set", "train.train_batch_per_replica=32", "-o", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 2 and not out.exists() and "no policy step would run" in doc["error"]["message"] and "train.train_batch_per_replica=24" in doc["error"]["fix"]


def test_rl_fit_keeps_whole_prompt_groups():
    from types import SimpleNamespace as NS

    spec = NS(train=NS(train_batch_per_replica=32, train_policy=NS(mini_batch=2)), rollout=NS(n_generation=6), policy=NS(parallelism=NS(dp_shard_size=4)))
    [fit] = fitting.fit_rl_batch(spec, 100)
    assert fit.after == 24  # lcm(4 x 2, 6)
    [fit, mini] = fitting.fit_rl_batch(spec, 2)  # 12 samples: no multiple of 24; mini_batch 1 -> lcm(4, 6) = 12
    assert (fit.after, mini.key, mini.after) == (12, "train.train_policy.mini_batch", 1)
    assert fitting.fit_rl_batch(spec, 2, fixed={"train.train_policy.mini_batch"}) == []
    spec = NS(train=NS(train_batch_per_replica=64, train_policy=NS(mini_batch=2)), rollout=NS(n_generation=8), policy=NS(parallelism=NS(dp_shard_size=4)))
    [fit] = fitting.fit_rl_batch(spec, 20)  # 160 samples: 64 gives 2 policy steps per epoch; 40 gives 4 (the train rule)
    assert fit.after == 40 and "at least 4 policy steps per epoch" in fit.why and "4 policy step(s) per epoch" in fit.why
    [fit] = fitting.fit_rl_batch(spec, 3)  # 24 samples: no multiple of 8 gives 4 steps; the largest that trains, with the warning
    assert fit.after == 24 and "no batch gives 4 per epoch: the run barely trains" in fit.why
    spec.train.train_batch_per_replica = 16
    assert fitting.fit_rl_batch(spec, 3) == []  # 16 already trains and no batch reaches 4: kept


def test_the_toml_and_yaml_we_write_end_with_a_newline(root, tmp_path, capsys):
    from skillbank.specification.io import spec_text
    from skillbank.training.cosmos_rl.toml import write_toml

    for name in ("t.yaml", "t.toml", "t.json"):
        assert main(["spec", "--action", "train", "--dataset-root", str(root), "-o", str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_text().endswith("\n"), name
    assert main(["spec", "--action", "train"]) == 0 and capsys.readouterr().out.endswith("\n")
    assert write_toml(tmp_path / "empty.toml", {}).read_text() == "\n"
    assert spec_text("x.toml", {}).endswith("\n") and spec_text("x.yaml", {}).endswith("\n")


# --- fitted to a sample here, re-fitted to the real data where the job runs --------------------------------------


def test_a_spec_fitted_to_a_sample_says_so_and_is_refitted_to_the_real_files(tmp_path, capsys):
    """Under --path-map the spec counts this machine's copy (24 records, a sample): its `fitted` block names the
    records, where they were counted and each key's ceiling; a job's first step re-fits to the files where it runs
    (2,000 records: the ceilings come back, the steps and validation cadence follow); `spec --from` keeps only what
    the user set; --records describes the real data now."""
    local, remote = tmp_path / "local", tmp_path / "remote"
    for folder, train, val in ((local, 24, 9), (remote, 2000, 100)):
        write_records(folder / "data" / "train" / "annotations.json", train)
        write_records(folder / "data" / "val" / "annotations.json", val)
    out = tmp_path / "train.yaml"
    rc = main(["spec", "--action", "train", "--dataset-root", str(local / "data"), "--path-map", f"{local}={remote}", "-o", str(out)])
    err = capsys.readouterr().err
    counted = f"this machine's copy (--path-map) of {remote}/data/train/annotations.json"  # the written spec names REMOTE only
    assert rc == 0 and f"fitted to 24 train records counted at {counted}" in err and "re-fits them to the node's files" in err
    written = yaml.safe_load(out.read_text())
    assert written["fitted"] == {"records": 24, "counted": counted,
                                 "ceilings": {"train.train_batch_per_replica": 32, "validation.batch_size": 8}}
    assert written["train"]["train_batch_per_replica"] == 2 and written["custom"]["train_dataset"]["annotation_path"].startswith(str(remote))

    spec = TrainSpec.model_validate(written)  # as the node reads it: REMOTE is where the job runs
    count, val = steps.count_data(spec)
    refit, changes = fitting.refit(spec, count, val, counted="node")
    moved = {c["key"]: (c["from"], c["to"]) for c in changes}
    assert moved == {"train.train_batch_per_replica": (2, 32), "validation.batch_size": (2, 8), "steps.total": (3, 21),
                     "steps.per_epoch": (1, 7), "validation.every_steps": (1, 7)}
    assert all(c["where"] == "node" and c["records"] == 2000 for c in changes) and refit.fitted.records == 2000
    assert refit.fitted.ceilings == written["fitted"]["ceilings"]  # a later re-fit starts from the template's values again
    assert fitting.refit(refit, count, val, counted="node")[1] == []  # the same records: nothing changes

    user = TrainSpec.model_validate({**written, "train": {**written["train"], "train_batch_per_replica": 4}, "fitted": {
        **written["fitted"], "ceilings": {"validation.batch_size": 8}}})  # the user set the batch: kept
    _, changes = fitting.refit(user, count, val, counted="node")
    assert "train.train_batch_per_replica" not in {c["key"] for c in changes}

    rc, doc = spec_json(capsys, "--from", str(out))  # fitted values are not the user's: fitted again from the ceilings, to the same values
    assert rc == 0 and [(f["key"], f["from"], f["to"], f["given"], f["kept"]) for f in doc["fitted"]] == [
        ("train.train_batch_per_replica", 32, 2, 2, True), ("validation.batch_size", 8, 2, 2, True)]
    rc, doc = spec_json(capsys, "--from", str(out), "--set", "train.train_batch_per_replica=4", "--records", "2000", "--clip-seconds", "2")
    assert rc == 0 and doc["spec"]["train"]["train_batch_per_replica"] == 4 and doc["plan"]["train_records"] == 2000  # the described data: it runs
    assert doc["spec"]["fitted"]["ceilings"] == {} and doc["spec"]["validation"]["batch_size"] == 8


def test_spec_from_that_changes_data_parallelism_names_the_global_batch_it_changes(tmp_path, capsys):
    """The benchmark's case: a spec for 8 GPUs derived for 4 (--set dp_shard_size=4) halves the global batch
    (train_batch_per_replica is per rank): spec says so, old and new, and the per-rank batch that keeps it."""
    write_records(tmp_path / "qa" / "train" / "annotations.json", 800)
    eight = tmp_path / "eight.yaml"
    assert main(["spec", "--action", "train", "--dataset-root", str(tmp_path / "qa"), "--set", "dp_shard_size=8",
                 "--set", "train.train_batch_per_replica=8", "--set", "validation.enable=false", "-o", str(eight)]) == 0
    capsys.readouterr()
    rc = main(["spec", "--from", str(eight), "--set", "dp_shard_size=4", "--json"])
    doc = json.loads(capsys.readouterr().out)
    change = doc["batch_change"]
    assert rc == 0 and change["global_batch"] == {"from": 64, "to": 32} and change["data_parallel_ranks"] == {"from": 8, "to": 4}
    assert change["steps_per_epoch"] == {"from": 12, "to": 25} and change["records"] == 800  # 100 then 200 records per rank, batch 8
    assert change["keep"].startswith("set train.train_batch_per_replica=16 to keep 64 (8 forward/backward pass(es) of mini_batch 2")
    assert f"warning: {change['line']}" in doc["notes"] and "global batch 64 -> 32" in change["line"]
    assert main(["spec", "--from", str(eight), "--set", "dp_shard_size=4"]) == 0  # the text output says it too
    err = capsys.readouterr().err
    assert "warning: changed from the --from spec: global batch 64 -> 32" in err and "train_batch_per_replica=16" in err

    # keeping it (the suggested batch), or changing nothing the batch depends on: no note
    for sets in (("dp_shard_size=4", "train.train_batch_per_replica=16"), ("train.epoch=5",)):
        rc = main(["spec", "--from", str(eight), *(a for s in sets for a in ("--set", s)), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 0 and doc["batch_change"] is None and not any("global batch" in n for n in doc["notes"]), sets

    # the arithmetic is runs.steps' StepPlan: a global batch no per-rank batch keeps on 3 ranks names the nearest two
    before = TrainSpec.model_validate(yaml.safe_load(eight.read_text()))
    three = TrainSpec.model_validate({**before.model_dump(mode="json"), "policy": {**before.policy.model_dump(mode="json"),
                                                                                     "parallelism": {"dp_shard_size": 3}}})
    change = fitting.batch_change(before, three)
    assert change.after.global_batch == 24 and change.records is None and "not a multiple of 3" in change.keep()
    assert "train.train_batch_per_replica=21 (global 63) or 22 (global 66)" in change.keep()
    assert fitting.batch_change(before, before, 800) is None


def test_spec_from_a_fitted_spec_says_kept_when_the_value_stays_and_old_to_new_only_when_it_moves(root, tmp_path, capsys):
    """The benchmark's case: `spec --from train.yaml` of a spec fitted earlier printed "fitted: KEY 32 -> 6" though the
    file held 6 and 6 was written (32 is the template's ceiling). The same value: "kept: KEY 6 (fitted earlier; ceiling
    32)"; a value that moves: "fitted: KEY <the file's value> -> <new>"; --json says the same (given, kept)."""
    out = tmp_path / "train.yaml"
    assert main(["spec", "--action", "train", "--dataset-root", str(root), "--set", "dp_shard_size=1", "--set", "validation.enable=false",
                 "-o", str(out)]) == 0
    assert "fitted: train.train_batch_per_replica 32 -> 6: 24 train records over 1" in capsys.readouterr().err  # the first fit: the template's ceiling
    assert yaml.safe_load(out.read_text())["fitted"]["ceilings"] == {"train.train_batch_per_replica": 32}

    assert main(["spec", "--from", str(out)]) == 0
    err = capsys.readouterr().err
    assert "kept: train.train_batch_per_replica 6 (fitted earlier; ceiling 32)" in err and "fitted: train.train_batch_per_replica" not in err
    rc, doc = spec_json(capsys, "--from", str(out))
    [fit] = doc["fitted"]
    assert rc == 0 and (fit["from"], fit["to"], fit["given"], fit["kept"]) == (32, 6, 6, True) and doc["spec"]["train"]["train_batch_per_replica"] == 6
    assert doc["spec"]["fitted"]["ceilings"] == {"train.train_batch_per_replica": 32}  # still a fitted value: a job re-fits it

    assert main(["spec", "--from", str(out), "--set", "dp_shard_size=2"]) == 0  # 12 records per rank: 2 (a multiple of mini_batch 2)
    err = capsys.readouterr().err
    assert "fitted: train.train_batch_per_replica 6 -> 2 (fitted again from the ceiling 32): 24 train records over 2" in err and "kept:" not in err
    rc, doc = spec_json(capsys, "--from", str(out), "--set", "dp_shard_size=2")
    assert rc == 0 and [(f["from"], f["to"], f["given"], f["kept"]) for f in doc["fitted"]] == [(32, 2, 6, False)]

    before = tmp_path / "eight.yaml"  # the template's 8 ranks: batch 2, validation.batch_size 2 (9 val records over 8 ranks)
    assert main(["spec", "--action", "train", "--dataset-root", str(root), "-o", str(before)]) == 0
    capsys.readouterr()
    assert main(["spec", "--from", str(before), "--set", "dp_shard_size=1"]) == 0  # one rank: the template's 8 validates 9 records
    assert "fitted: validation.batch_size 2 -> 8: back to its ceiling" in capsys.readouterr().err  # a value that moves is said, even back up
