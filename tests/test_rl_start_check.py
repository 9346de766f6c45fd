"""The GRPO start check: `skillbank preflight --action rl` and `skillbank rl` sample a few prompts from the
start model with the local GRPO code and warn when every group's rewards are equal (nothing to learn).
The tiny model answers every prompt alike, so on it the warning fires."""

from __future__ import annotations

from helpers import SKILL, json_out, skillbank
from test_rl_local import _rl_spec


def test_the_tiny_model_has_nothing_to_learn_and_the_check_says_so(tmp_path, tiny_model_dir, demo_dataset_dir):
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    args = ("preflight", "--skill", SKILL, "--action", "rl", "--spec", str(spec), "--backend", "local")
    doc = json_out(skillbank(*args, "--json", timeout=300))
    check = doc["stats"]["start_check"]
    assert (check["groups"], check["samples_per_group"], check["flat_groups"], check["flat_share"]) == (4, 2, 4, 1.0)
    [warning] = [f for f in doc["findings"] if f["check"] == "spec.start_rewards"]
    assert warning["severity"] == "warning" and "4 of 4 sampled prompt groups (100%" in warning["message"]
    assert warning["where"] == "policy.model_name_or_path" and doc["ok"]  # a warning: the run may still be wanted
    text = skillbank(*args, "--no-start-check")
    assert text.returncode == 0 and "start check" not in text.stdout and "start_rewards" not in text.stdout


def test_rl_reports_the_check_and_skips_it_on_request_or_without_a_local_model(tmp_path, tiny_model_dir, demo_dataset_dir):
    spec = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    dry = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--dry-run", "--json", timeout=300))
    assert dry["start_check"]["flat_share"] == 1.0 and any("start check" in w for w in dry["warnings"])
    off = json_out(skillbank("rl", "--spec", str(spec), "--backend", "local", "--dry-run", "--no-start-check", "--json"))
    assert off["start_check"] is None and not any("start check" in w for w in off["warnings"])
    hub = _rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir, **{"policy.model_name_or_path": "hf_model://nvidia/Cosmos-Reason2-8B"})
    doc = json_out(skillbank("preflight", "--skill", SKILL, "--action", "rl", "--spec", str(hub), "--backend", "local", "--only", "spec", "--json"))
    assert "not a local folder" in doc["stats"]["start_check"]["skipped"]
