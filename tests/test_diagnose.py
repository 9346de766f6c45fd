"""`skillbank jobs diagnose DIR` on folders shaped like cosmos-rl 0.4.7's output (runs skillbank did not
launch): its log layout (--log-dir with logs_<time>/ and logs_latest), torchrun's [rankN]: prefixes, its
checkpoint folders with cosmos_config and per-rank .rank_R_complete markers (async saves leave some out)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from skillbank.platform.diagnose import diagnose

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
    assert d.state == "failed" and d.cause.startswith("CUDA out of memory: the job needs more GPU memory") and "lower train.train_policy.mini_batch" in d.fix
    assert d.known_causes[0]["evidence"].startswith("policy_0.log: torch.OutOfMemoryError: CUDA out of memory")
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
    _, log_dir = cosmos_run(tmp_path, last=104, tail=VIDEO_FPS)  # not OOM: its plan figure (torch, ~15 s) is tested in-process
    done = skillbank("jobs", "diagnose", str(log_dir), "--json")
    assert done.returncode == 1, done.stderr  # the run failed: exit 1, so CI can gate on it
    doc = json_out(done)
    for key in ("state", "cause", "fix", "known_causes", "last_step", "last_loss", "last_loss_smoothed", "loss_smoothing", "last_val_loss",
                "last_complete_checkpoint", "resume_command", "last_traceback", "incomplete_checkpoints"):
        assert key in doc
    text = skillbank("jobs", "diagnose", str(log_dir))
    assert "state      : failed (a record has no video_fps" in text.stdout and "fix        : `skillbank data fix" in text.stdout
    assert "resume     : skillbank spec" in text.stdout and "smoothed (median of the last 20 logged training steps (85-104))" in text.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = skillbank("jobs", "diagnose", str(empty))
    assert bad.returncode == 2 and "holds no cosmos-rl run" in bad.stderr and "Traceback" not in bad.stderr


# --- known causes, each as cosmos-rl 0.4.7 / torch / huggingface_hub write it -----------------------

def _traceback(rank: int, frame: str, source: str, last: str) -> str:
    return (f"[rank{rank}]:Traceback (most recent call last):\n[rank{rank}]:  File \"{frame}\", line 10, in step\n"
            f"[rank{rank}]:    {source}\n[rank{rank}]:{last}\n")


VISION = _traceback(0, "/opt/cosmos_rl/policy/model/qwen2_5_vl/__init__.py", "assert vision_embeds.shape[0] == n_tokens, (",
                    "AssertionError: vision_embeds.shape[0] must be equal to n_tokens, 9216 != 8192")
VIDEO_FPS = _traceback(0, "/opt/skillbank/training/cosmos_rl/script.py", 'fps = record["video_fps"]', "KeyError: 'video_fps'")
NCCL = ("[rank1]:[E601 12:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2871, OpType=_ALLGATHER_BASE, NumelIn=1024, NumelOut=2048, Timeout(ms)=600000) ran for 600038 milliseconds before timing out.\n")
HF = _traceback(0, "/opt/huggingface_hub/utils/_http.py", "raise _format(GatedRepoError, message, response) from e",
                "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-abc)")
DISK = _traceback(0, "/opt/cosmos_rl/utils/checkpoint.py", "torch.save(state, path)", "OSError: [Errno 28] No space left on device")
REDIS = ("/bin/sh: 1: redis-server: not found\n" + COSMOS.replace("INFO", "ERROR") +
         'RuntimeError: Failed to start redis server with command: redis-server /tmp/redis.conf --dbfilename d.rdb --save "" with return code 127\n')


@pytest.mark.parametrize("name, log, tail", [
    ("vision_tokens", "policy_0.log", VISION), ("video_fps", "policy_0.log", VIDEO_FPS), ("nccl_timeout", "policy_1.log", NCCL),
    ("hf_auth", "policy_0.log", HF), ("disk_full", "policy_0.log", DISK), ("redis_missing", "controller.log", REDIS),
])
def test_each_known_failure_is_named_with_its_fix(tmp_path, name, log, tail):
    from skillbank.training.cosmos_rl.causes import BY_NAME

    run, log_dir = cosmos_run(tmp_path, last=60)
    with open(log_dir / "logs_latest" / log, "a") as f:
        f.write(tail)
    (log_dir / "logs_latest" / "launcher.log").write_text("ERROR Process 4243 failed with return code 1\n")  # what it used to name
    d = diagnose(log_dir)
    assert d.state == "failed" and d.known_causes[0]["name"] == name
    assert d.cause.startswith(BY_NAME[name].cause) and d.fix == BY_NAME[name].fix and d.known_causes[0]["evidence"].startswith(log)
    assert "return code" not in d.cause


def test_vision_tokens_cut_at_model_max_length_say_the_numbers(tmp_path):
    run, log_dir = cosmos_run(tmp_path, last=60, tail=VISION)
    config = run / "checkpoints" / "step_50" / "policy" / "cosmos_config"
    config.write_text(config.read_text().replace("40960", "8192"))
    d = diagnose(log_dir)
    assert "a clip gives 9,216 vision tokens but only 8,192 were left in the sequence; policy.model_max_length is 8,192 in this run" in d.cause
    assert "raise policy.model_max_length" in d.fix
    # transformers' own check (the generic HF path, Qwen3-VL) says the same
    run2, log_dir2 = cosmos_run(tmp_path / "hf", last=5, tail="[rank0]:ValueError: Videos features and video tokens do not match: tokens: 8192, features 9216\n")
    assert "a clip gives 9,216 vision tokens but only 8,192" in diagnose(log_dir2).cause


def test_an_oom_states_the_plans_memory_for_the_runs_spec(tmp_path):
    """The planner's public build_plan on the checkpoint's cosmos_config (Cosmos-Reason2-2B, bundled: no network)."""
    run, log_dir = cosmos_run(tmp_path, last=60, tail=OOM)
    d = diagnose(log_dir)
    plan = d.oom_plan
    assert plan["spec"].endswith("step_50/policy/cosmos_config") and plan["gpu"] == "h100-80gb" and plan["memory_per_gpu_gib"] > 0
    assert set(plan["memory_breakdown_gib"]) >= {"weights", "activations", "logits"}
    assert f"`skillbank plan` of this run's spec: ~{plan['memory_per_gpu_gib']:.1f} GiB per GPU on h100-80gb" in d.cause
    assert "it tried to allocate 2.00 GiB" in d.cause and "train.train_policy.mini_batch is 2" in d.cause
    for part in run.rglob("cosmos_config"):
        part.unlink()
    assert "no spec or config" in diagnose(log_dir).oom_plan["unavailable"]


def test_a_root_cause_comes_before_the_timeouts_it_causes(tmp_path):
    run, log_dir = cosmos_run(tmp_path, last=60, tail=OOM)
    with open(log_dir / "logs_latest" / "policy_1.log", "a") as f:
        f.write(NCCL)
    d = diagnose(log_dir)
    assert [c["name"] for c in d.known_causes] == ["cuda_oom", "nccl_timeout"] and d.cause.startswith("CUDA out of memory")
    assert "  also seen  : nccl_timeout: an NCCL collective timed out" in "\n".join(d.lines())


def test_the_loss_is_smoothed_and_the_validation_loss_reported(tmp_path):
    spike = f"[rank0]:{COSMOS}Step: 61/200, Loss: 9.50000, Grad norm: 40.0, Iteration time: 0.5s\n"
    val = f"[rank0]:{COSMOS}[SFT] Validation loss: 0.8123 for train step 50/200, epoch 0\n"
    run, log_dir = cosmos_run(tmp_path, last=60, tail=val + spike)
    d = diagnose(log_dir)
    assert d.last_loss == 9.5 and (d.last_val_loss, d.last_val_step) == (0.8123, 50)
    window = sorted([round(2.0 / s, 5) for s in range(42, 61)] + [9.5])  # steps 42-61 as logged: a median ignores the spike
    assert d.last_loss_smoothed == pytest.approx((window[9] + window[10]) / 2, abs=1e-6)
    assert d.loss_smoothing == "median of the last 20 logged training steps (42-61)"
    text = "\n".join(d.lines())
    assert "loss 9.5 (raw)" in text and "val loss   : 0.8123 at step 50" in text


def test_a_slurm_runs_logs_from_any_of_its_folders_every_node_merged(tmp_path):
    """A two-node Slurm job's run folder: <run>/cosmos-rl-logs/node_<i>/logs_latest/ per node (skillbank submit's layout).
    The run folder, cosmos-rl-logs, one node_<i> and one logs_latest all read every node's logs: a crash logged only
    on node 1 is found from node_0's folder; the checkpoints are the run's. The CLI exits 1 on it (CI gates on that)."""
    run = tmp_path / "out" / "train-20260101-120000-abcdef"
    for node, text in ((0, policy_log(run, 60)), (1, "[rank1]:" + COSMOS + "Training epoch 1/2\n" + OOM)):
        stamped = run / "cosmos-rl-logs" / f"node_{node}" / "logs_20260101-120000"
        stamped.mkdir(parents=True)
        (stamped.parent / "logs_latest").symlink_to(stamped.name)
        (stamped / f"policy_{node}.log").write_text(text)
    (run / "cosmos_rl.toml").write_text("")
    checkpoint(run, 50, 2)
    logs = run / "cosmos-rl-logs"
    for target in (run, logs, logs / "node_0", logs / "node_0" / "logs_latest"):
        d = diagnose(target)
        assert d.state == "failed" and d.cause.startswith("CUDA out of memory"), (target, d.state, d.cause)
        assert d.last_step == 60 and d.last_complete_checkpoint == str(run / "checkpoints" / "step_50" / "policy"), target
    done = skillbank("jobs", "diagnose", str(logs / "node_0"), "--json")
    assert done.returncode == 1 and json_out(done)["state"] == "failed"
