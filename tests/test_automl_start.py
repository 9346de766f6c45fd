"""AutoML starts only on purpose: a dry run creates and starts nothing, bad input never starts a study,
one default backend and trial count, and train's handoff narrows the search like `skillbank automl`.

Everything runs in this process through `skillbank.cli.main`, with subprocess.Popen replaced by a
guard that fails the test if anything tries to start a process (a read-only `nvidia-smi -L` query
of preflight excepted), so "nothing started" is checked, not assumed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from helpers import SKILL
from skillbank import cli
from skillbank.automl import DEFAULT_TRIALS
from skillbank.training.backends import DEFAULT_BACKEND

REAL_POPEN = subprocess.Popen


class NoLaunch(REAL_POPEN):
    started: list = []

    def __init__(self, args, *a, **kw):
        if Path(str(args[0])).name != "nvidia-smi":
            NoLaunch.started.append(args)
            raise AssertionError(f"a process was started: {args}")
        super().__init__(args, *a, **kw)


@pytest.fixture
def no_launch(monkeypatch):
    NoLaunch.started = []
    monkeypatch.setattr(subprocess, "Popen", NoLaunch)
    return NoLaunch.started


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def base_spec(tmp_path, tiny_model_dir, demo_dataset_dir, capsys) -> Path:
    spec = tmp_path / "base.yaml"
    code, _, err = run_cli(capsys, "spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir),
                           "--set", f"model={tiny_model_dir}", "--set", "dp_shard_size=1", "--set", "epoch=1",
                           "--set", "batch_size=8", "--set", "mini_batch=8", "--set", f"output_dir={tmp_path / 'train'}",
                           "--set", f"results_dir={tmp_path / 'results'}", "-o", str(spec))
    assert code == 0, err
    return spec


def test_dry_run_on_the_automl_route_prints_the_plan_and_creates_nothing(base_spec, tmp_path, capsys, no_launch):
    code, out, err = run_cli(capsys, "train", "--spec", str(base_spec), "--backend", "local", "--dry-run", "--json",
                             "--param", "train.optm_lr", "--range", "train.optm_lr=1e-5:1e-3", "--algorithm", "random",
                             "--automl-max-trials", "3", "--study", "narrow")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["dry_run"] and plan["backend"] == "local" and plan["algorithm"] == "random" and plan["max_trials"] == 3
    assert plan["study"] == "narrow" and plan["study_dir"] == str((tmp_path / "results" / "automl" / "narrow").resolve())
    assert [(p["key"], p["low"], p["high"], p["log"]) for p in plan["search_space"]] == [("train.optm_lr", 1e-5, 1e-3, True)]
    assert plan["storage"].startswith("sqlite:///") and plan["storage_exists"] is False
    assert plan["storage_check"]["checked"] is False and plan["storage_check"]["study_exists"] is False  # not created to look
    start = plan["commands"]["start"]
    assert start.startswith("skillbank automl ") and "--study narrow" in start and "--range train.optm_lr=1e-05:0.001" in start
    assert plan["commands"]["resume"] == start + " --resume"
    assert "route: automl" in err
    assert no_launch == [] and not (tmp_path / "results").exists() and not (tmp_path / "train").exists()


def test_automl_dry_run_text_names_ranges_storage_and_commands(base_spec, tmp_path, capsys, no_launch):
    code, out, err = run_cli(capsys, "automl", "--skill", SKILL, "--spec", str(base_spec), "--dry-run")
    assert code == 0, err
    assert "dry run: nothing created, nothing started" in out
    assert "train.optm_lr: float 1e-06..0.0001 log" in out and "study.db (not created yet)" in out  # full fine-tuning: 1e-5 x/÷ 10
    assert f"backend    : {DEFAULT_BACKEND}" in out and f"{DEFAULT_TRIALS} finished" in out
    assert "start      : skillbank automl" in out and "--resume" in out
    assert no_launch == [] and not (tmp_path / "results").exists()


def test_the_dry_run_shows_the_warnings_it_counts_and_each_disk_figure_one_way(base_spec, tmp_path, capsys, no_launch):
    """The benchmark's case: "preflight : 0 error(s), 1 warning(s)" and no warning shown (the agent ran `skillbank preflight`
    to find it); the disk as 143.7 GiB on one line, 143.6 on the next and 143.65 in the JSON. Each warning now follows the
    count (check, where, message, fix as preflight words them; the JSON as preflight's findings); every disk figure is
    runs.steps.gib_text of its bytes, the JSON's two decimals."""
    import re

    from skillbank.runs.steps import GB, gib, gib_text

    assert (gib(143.6461 * GB), gib_text(143.6461 * GB)) == (143.65, "143.65 GiB")  # the benchmark's figure: one rounding
    code, out, err = run_cli(capsys, "automl", "--skill", SKILL, "--spec", str(base_spec), "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    warnings = plan["preflight"]["warning_findings"]
    assert len(warnings) == plan["preflight"]["warnings"] == 2 and {w["check"] for w in warnings} == {"spec.steps_per_rank", "vision.budget"}
    assert all(w["message"] and w["fix"] and w["where"] and w["severity"] == "warning" for w in warnings)
    per_worker = f"{plan['disk_gib_per_worker']:,.2f} GiB per worker"
    for argv in (["automl", "--skill", SKILL, "--spec", str(base_spec)], ["train", "--spec", str(base_spec), "--automl-policy", "auto"]):
        code, out, err = run_cli(capsys, *argv, "--dry-run")
        assert code == 0, err
        lines = out.splitlines()
        at = lines.index("  preflight  : 0 error(s), 2 warning(s)")
        assert lines[at + 1:at + 3] == [f"  warning    : {w['check']} at {w['where']}: {w['message']} (fix: {w['fix']})" for w in warnings]
        assert {m for m in re.findall(r"([\d,.]+ GiB) per worker", out)} == {per_worker.removesuffix(" per worker")}, out
        assert f"needs {per_worker.split(' per')[0]} free" in out  # env.disk's note: the same figure
    code, out, err = run_cli(capsys, "submit", "--platform", "local", "--spec", str(base_spec), "--dry-run")
    assert code == 0 and "  preflight warning: spec.steps_per_rank at train.train_batch_per_replica: " in out, err + out
    assert no_launch == [] and not (tmp_path / "results" / "automl").exists()


def test_a_spec_that_fails_preflight_never_starts_a_study(base_spec, demo_dataset_dir, tmp_path, capsys, no_launch):
    """A record without video_fps: exit 2 naming the finding, before any study folder, storage or trial."""
    import yaml

    records = json.loads((demo_dataset_dir / "train" / "annotations.json").read_text())
    del records[3]["video_fps"]
    broken = tmp_path / "annotations.json"
    broken.write_text(json.dumps(records))
    spec = yaml.safe_load(base_spec.read_text())
    spec["custom"]["train_dataset"]["annotation_path"] = str(broken)
    base_spec.write_text(yaml.safe_dump(spec))
    for argv in (["automl", "--skill", SKILL, "--spec", str(base_spec), "--backend", "local", "--json"],
                 ["train", "--spec", str(base_spec), "--backend", "local", "--json"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, out + err
        error = json.loads(out)["error"]
        assert "video_fps" in error["message"] and "no study was created" in error["message"], error
    assert no_launch == [] and not (tmp_path / "results").exists()


def test_one_default_backend_and_trial_count_for_train_automl_and_submit():
    from skillbank.platform.submit import default_backend

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    train = sub.choices["train"].parse_args(["--spec", "s.yaml"])
    automl = sub.choices["automl"].parse_args(["--spec", "s.yaml"])
    assert train.backend == automl.backend == DEFAULT_BACKEND == "cosmos-rl"
    assert {default_backend(p) for p in ("local", "docker", "slurm")} == {DEFAULT_BACKEND}
    assert train.max_trials == automl.max_trials == DEFAULT_TRIALS
    for name in ("train", "automl"):
        assert f"(default: {DEFAULT_BACKEND})" in " ".join(sub.choices[name].format_help().split())


def test_search_flags_on_a_direct_run_are_refused(base_spec, capsys, no_launch):
    code, out, err = run_cli(capsys, "train", "--spec", str(base_spec), "--automl-policy", "off", "--backend", "local",
                             "--param", "train.optm_lr", "--dry-run")
    assert code == 2 and "narrow an AutoML study" in err and no_launch == []


def test_a_trial_is_pruned_for_a_spec_reason_and_failed_for_an_environment_reason(base_spec, tmp_path, monkeypatch):
    """The real per-trial check: env.* findings FAIL the trial (retried on --resume), anything else prunes it."""
    import copy

    import yaml

    from skillbank.automl.study import TrialFailed
    from skillbank.automl.trials import make_check

    spec = yaml.safe_load(base_spec.read_text())
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # neither redis-server nor nvidia-smi: cosmos-rl cannot run here
    with pytest.raises(TrialFailed, match="env.redis"):
        make_check(SKILL, "cosmos-rl")(tmp_path / "t1", copy.deepcopy(spec))
    assert make_check(SKILL, "local")(tmp_path / "t2", copy.deepcopy(spec)) is None
    spec["train"]["train_batch_per_replica"] = spec["train"]["train_policy"]["mini_batch"] = 32  # 24 records: zero steps
    searched = {"train.train_batch_per_replica", "train.train_policy.mini_batch"}  # sampled values are kept as sampled
    why = make_check(SKILL, "cosmos-rl", searched=searched)(tmp_path / "t3", copy.deepcopy(spec))
    assert why.startswith("preflight failed: spec.") and "env." not in why
    # inherited from the base spec, the batches are ceilings: fitted to the trial's data, and it trains
    assert make_check(SKILL, "local")(tmp_path / "t4", spec) is None
    fitted = yaml.safe_load((tmp_path / "t4" / "spec.yaml").read_text())["train"]
    assert fitted["train_batch_per_replica"] == fitted["train_policy"]["mini_batch"] < 32 and spec["train"] == fitted
