"""`skillbank jobs diagnose DIR` on folders shaped like cosmos-rl 0.4.7's output (runs skillbank did not
launch): its log layout (--log-dir with logs_<time>/ and logs_latest), torchrun's [rankN]: prefixes, its
checkpoint folders with cosmos_config and per-rank .rank_R_complete markers (async saves leave some out)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from skillbank.training.diagnose import diagnose

from helpers import json_out, skillbank

COSMOS = "[cosmos] 2025-06-01 12:00:00,000 - cosmos - INFO - "
PARALLEL = {"tp_size": 1, "cp_size": 1, "pp_size": 1, "dp_shard_size": 2, "dp_replicate_size": 1}


def checkpoint(run: Path, step: int, marked: int, *, ranks: int = 2, parallelism: dict | None = None) -> Path:
    """step_N/policy as cosmos-rl writes it: per-rank files, cosmos_config (its whole config), markers."""
    policy = run / "checkpoints" / f"step_{step}" / "policy"
    policy.mkdir(parents=True)
    for rank in range(ranks):
        for part in ("model", "optimizer", "scheduler", "extra_info"):
            (policy / f"{part}_rank_{rank}.pth").write_bytes(b"")
    config = {"train": {"output_dir": str(run), "timestamp": run.name, "train_policy": {"type": "sft", "mini_batch": 2}, "train_batch_per_replica": 4,
                        "optm_lr": 2e-5, "epoch": 2},
              "policy": {"model_name_or_path": "nvidia/Cosmos-Reason2-2B", "model_max_length": 40960, "parallelism": parallelism or PARALLEL},
              "custom": {"dataset": {"annotation_path": "/data/a.json", "media_path": "/data"}}}
    (policy / "cosmos_config").write_text(json.dumps(config, indent=4))
    for rank in range(marked):
        (policy / f".rank_{rank}_complete").write_text("")
    return policy


def policy_log(run: Path, last: int, total: int = 200, *, tail: str = "") -> str:
    lines = [f"[rank0]:{COSMOS}Training epoch 1/2"]
    for step in range(1, last + 1):
        lines.append(f"[rank0]:{COSMOS}Step: {step}/{total}, Loss: {2.0 / step:.5f}, Grad norm: 1.0, Iteration time: 0.5s")
        if step % 50 == 0:
            lines.append(f"[rank0]:{COSMOS}[Policy] Step: {step}, checkpoint saved successfully at {run}/checkpoints/step_{step}/policy.")
    return "\n".join(lines) + "\n" + tail


def cosmos_run(tmp_path: Path, *, last: int, tail: str = "", total: int = 200) -> tuple[Path, Path]:
    """An output_dir/<timestamp> run and, apart from it, the --log-dir cosmos-rl wrote."""
    run = tmp_path / "outputs" / "sft" / "20250601120000"
    logs = tmp_path / "logs" / "logs_20250601-120000"
    logs.mkdir(parents=True)
    (tmp_path / "logs" / "logs_latest").symlink_to(logs.name)
    (logs / "policy_0.log").write_text(policy_log(run, last, total, tail=tail))
    (logs / "policy_1.log").write_text("[rank1]:" + COSMOS + "Training epoch 1/2\n")
    (logs / "controller.log").write_text(f"{COSMOS}Controller started\n")
    checkpoint(run, 50, 2)
    if last >= 100:
        checkpoint(run, 100, 1)  # an async save still in flight: rank 1 never marked it
    return run, tmp_path / "logs"


OOM = (
    "[rank1]:Traceback (most recent call last):\n"
    '[rank1]:  File "/opt/cosmos_rl/policy/trainer/sft_trainer.py", line 410, in step\n'
    "[rank1]:    loss.backward()\n"
    "[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. hf_SecretTokenValue123456\n"
)


def test_a_crashed_run_from_its_log_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_SecretTokenValue123456")  # a secret that leaked into a log line is masked
    run, log_dir = cosmos_run(tmp_path, last=104, tail=OOM)
    d = diagnose(log_dir)
    assert d.state == "failed" and "torch.OutOfMemoryError: CUDA out of memory" in d.cause
    assert (d.last_step, d.total_steps) == (104, 200)
    assert d.run_dir == str(run)  # found from the logs' own "checkpoint saved ... at" lines
    assert d.last_complete_checkpoint == str(run / "checkpoints" / "step_50" / "policy")  # step 100 was logged, but is incomplete
    assert d.incomplete_checkpoints == [{"step": 100, "path": str(run / "checkpoints" / "step_100" / "policy"), "why": "1 of 2 saving ranks marked it complete"}]
    assert str(run / "checkpoints" / "step_100" / "policy") in d.checkpoints_logged
    assert d.last_traceback.splitlines()[0] == "Traceback (most recent call last):" and "loss.backward()" in d.last_traceback
    assert "hf_SecretTokenValue123456" not in json.dumps(d.to_dict())
    assert "--from-format cosmos-rl" in d.resume_command and "--resume-from " + str(run / "checkpoints" / "step_50" / "policy") in d.resume_command
    assert d.launched_by == "cosmos-rl"


def test_the_run_folder_or_its_output_dir_work_too(tmp_path):
    run, _ = cosmos_run(tmp_path, last=60, tail=OOM)
    (run / "other-runs-are-siblings").mkdir()
    older = run.parent / "20250501000000"
    checkpoint(older, 10, 2)
    for path in (run, run.parent):
        d = diagnose(path)
        assert d.run_dir == str(run) and d.last_complete_checkpoint.endswith("step_50/policy")
    assert any("holds 2 runs" in n for n in diagnose(run.parent).notes)


def test_a_silent_stop_is_a_kill_and_fresh_logs_are_running(tmp_path):
    run, log_dir = cosmos_run(tmp_path, last=75)
    d = diagnose(log_dir)  # the logs were just written: it is running
    assert d.state == "running" and d.resume_command is None
    old = time.time() - 3600
    for log in (log_dir / "logs_latest").iterdir():
        os.utime(log, (old, old))
    d = diagnose(log_dir)
    assert d.state == "failed" and "stopped at step 75/200 without an error" in d.cause and "killed" in d.cause
    assert d.last_complete_checkpoint.endswith("step_50/policy")


def test_a_finished_run_and_one_killed_while_saving_its_last_step(tmp_path):
    run, log_dir = cosmos_run(tmp_path, last=200)
    checkpoint(run, 150, 2)
    last = checkpoint(run, 200, 1)  # the final save was cut off
    d = diagnose(log_dir)
    assert d.state == "failed" and "stopped while saving" in d.cause and d.last_complete_checkpoint.endswith("step_150/policy")
    (last / ".rank_1_complete").write_text("")
    d = diagnose(log_dir)
    assert d.state == "finished" and d.cause is None and d.last_complete_checkpoint.endswith("step_200/policy") and d.resume_command is None


def test_dp_shard_minus_one_counts_the_ranks_that_wrote_files(tmp_path):
    run = tmp_path / "20250601120000"
    checkpoint(run, 10, 4, ranks=4, parallelism={**PARALLEL, "dp_shard_size": -1})
    checkpoint(run, 20, 3, ranks=4, parallelism={**PARALLEL, "dp_shard_size": -1})
    d = diagnose(run)
    assert d.last_complete_checkpoint.endswith("step_10/policy") and d.incomplete_checkpoints[0]["step"] == 20


def test_the_resume_command_of_an_external_run_makes_a_spec(tmp_path):
    """The command diagnose prints works: its spec step reads the checkpoint's cosmos_config."""
    run, log_dir = cosmos_run(tmp_path, last=60, tail=OOM)
    d = diagnose(log_dir)
    spec_step = d.resume_command.split(" && ")[0].split()
    assert spec_step[:2] == ["skillbank", "spec"]
    made = skillbank(*spec_step[1:-2], "-o", str(tmp_path / "resume.yaml"), "--json")
    assert made.returncode == 0, made.stderr
    spec = json_out(made)["spec"]
    assert spec["train"]["output_dir"] == str(run.parent) and spec["train"]["optm_lr"] == 2e-5


def test_the_cli(tmp_path):
    _, log_dir = cosmos_run(tmp_path, last=104, tail=OOM)
    done = skillbank("jobs", "diagnose", str(log_dir), "--json")
    assert done.returncode == 0, done.stderr
    doc = json_out(done)
    for key in ("state", "cause", "last_step", "last_complete_checkpoint", "resume_command", "last_traceback", "incomplete_checkpoints"):
        assert key in doc
    text = skillbank("jobs", "diagnose", str(log_dir))
    assert "state      : failed" in text.stdout and "resume     : skillbank spec" in text.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = skillbank("jobs", "diagnose", str(empty))
    assert bad.returncode == 2 and "holds no cosmos-rl run" in bad.stderr and "Traceback" not in bad.stderr
