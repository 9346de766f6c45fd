"""The GRPO start check: `skillbank preflight --action rl` and `skillbank rl` sample a few prompts from the
start model with the local GRPO code and warn when every group's rewards are equal (nothing to learn).
The tiny model answers every prompt alike, so on it the warning fires."""

from __future__ import annotations

from helpers import SKILL, json_out, skillbank
from test_rl_local import _rl_spec


def test_the_tiny_model_has_nothing_to_learn_and_the_bounded_check_says_so(tmp_path, tiny_model_dir, demo_dataset_dir):
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)  # max_response_length 16: the bounded cap is the run's
    args = ("preflight", "--skill", SKILL, "--action", "rl", "--spec", str(spec), "--backend", "local")
    doc = json_out(skillbank(*args, "--json", timeout=300))
    check = doc["stats"]["start_check"]
    assert (check["mode"], check["prompts_planned"], check["samples_per_group"], check["tokens"], check["run_tokens"]) == ("bounded", 8, 2, 16, 16)
    groups = check["groups"]  # 8 unless the time cap stopped it (a busy machine): what was sampled decides
    assert groups >= 1 and (check["flat_groups"], check["varied_groups"], check["undecided_groups"], check["flat_share"]) == (groups, 0, 0, 1.0)
    assert check["seconds"] >= check["load_seconds"] > 0 and check["mean_length"] >= 1
    [warning] = [f for f in doc["findings"] if f["check"] == "spec.start_rewards"]
    assert warning["severity"] == "warning" and f"{groups} of {groups} sampled prompt groups (100%" in warning["message"]
    assert warning["where"] == "policy.model_name_or_path" and doc["ok"]  # a warning: the run may still be wanted
    text = skillbank(*args, "--no-start-check")
    assert text.returncode == 0 and "start check" not in text.stdout and "start_rewards" not in text.stdout


def test_full_samples_to_the_runs_length_a_cut_sample_leaves_its_group_undecided_and_the_time_cap_stops_sampling(
        tmp_path, tiny_model_dir, demo_dataset_dir):
    """Samples cut by the check's token cap (below the run's length) or its time cap may have scored otherwise:
    such groups decide nothing, and no warning comes from them alone."""
    from skillbank.specification.io import load_spec
    from skillbank.specification.rl import RlSpec
    from skillbank.training.local import grpo_start

    full = grpo_start.start_check(load_spec(_rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir), RlSpec), str(tiny_model_dir),
                                  bounds=grpo_start.Bounds.of("full"))
    text = grpo_start.line(full)
    assert text.startswith("start check (full): 8 prompts x 2 samples, up to 16 tokens (the run's rollout.max_response_length)")
    assert "8 of 8 groups scored all alike (100%)" in text and "stopped by the time cap" not in text and grpo_start.finding(full)
    spec = load_spec(_rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir, **{"rollout.max_response_length": 64, "rollout.batch_size": 1}), RlSpec)
    cut = grpo_start.start_check(spec, str(tiny_model_dir), bounds=grpo_start.Bounds(prompts=2, tokens=1, seconds=None))
    assert (cut["groups"], cut["tokens"], cut["run_tokens"], cut["mean_length"]) == (2, 1, 64, 1)
    ended = 4 - cut["cut_samples"]  # a 1-token sample ends only when that token is the EOS
    assert cut["undecided_groups"] + cut["flat_groups"] + cut["varied_groups"] == 2 and (ended or cut["undecided_groups"] == 2)
    if cut["undecided_groups"] == 2:
        assert grpo_start.finding(cut) is None and cut["flat_share"] is None
        assert "no group decided, 2 undecided (4 samples cut before they ended; --start-check full samples" in grpo_start.line(cut)
    timed = grpo_start.start_check(spec, str(tiny_model_dir), bounds=grpo_start.Bounds(prompts=8, tokens=64, seconds=0.0))
    assert timed["stopped_by_time"] and timed["groups"] == 1 and timed["prompts_planned"] == 8  # the first call runs, cut at its first token
    assert "stopped by the time cap after 1 of 8 prompts" in grpo_start.line(timed)


def test_judge_counts_flat_varied_and_undecided_groups():
    from skillbank.training.local.grpo_start import judge

    rewards = [1, 1, 0, 1, 0, 0, 1, 0]
    complete = [True, True, True, True, True, False, False, True]
    assert judge(rewards, complete, 2) == (1, 1, 2)  # [1 1] flat; [0 1] varied; [0 cut] and [cut 0] undecided
    assert judge([0, 1, 1], [True, True, False], 3) == (0, 1, 0)  # two finished samples that differ decide it


def test_a_model_too_big_for_the_free_memory_is_not_loaded(tmp_path, tiny_model_dir, demo_dataset_dir, monkeypatch):
    from types import SimpleNamespace

    from skillbank.specification.io import load_spec
    from skillbank.specification.rl import RlSpec
    from skillbank.training.local import grpo_start

    spec = load_spec(_rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir), RlSpec)
    model = SimpleNamespace(where="local", path=tiny_model_dir, value=str(tiny_model_dir))
    assert grpo_start.skipped_because(spec, model) is None
    monkeypatch.setattr(grpo_start, "free_memory", lambda: 1024.0)
    why = grpo_start.skipped_because(spec, model)
    assert why and "GiB to sample in float32 and 0.0 GiB of memory are free here" in why


def test_rl_reports_the_check_and_skips_it_on_request_or_without_a_local_model(tmp_path, tiny_model_dir, demo_dataset_dir):
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    dry = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--dry-run", "--json", timeout=300))
    assert dry["start_check"]["flat_share"] == 1.0 and any("start check" in w for w in dry["warnings"])
    assert [w["check"] for w in dry["learning_warnings"]] == ["spec.start_rewards"]
    off = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--dry-run", "--no-start-check", "--json"))
    assert off["start_check"] is None and not any("start check" in w for w in off["warnings"]) and off["learning_warnings"] == []
    hub = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir, **{"policy.model_name_or_path": "hf_model://nvidia/Cosmos-Reason2-8B"})
    doc = json_out(skillbank("preflight", "--skill", SKILL, "--action", "rl", "--spec", str(hub), "--backend", "local", "--only", "spec", "--json"))
    assert "not a local folder" in doc["stats"]["start_check"]["skipped"]
