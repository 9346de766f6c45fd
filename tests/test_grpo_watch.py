"""A GRPO run with cosmos-rl is watched like an SFT one: the controller's step lines (cosmos-rl 0.4.7's text, replayed by
tests/cosmos_rl_standin.py: the GPU-only engine cannot run here) become metrics.jsonl rows with the rewards, and
`skillbank rl --launch` (what an rl job runs: a Slurm job's node 0, a local or Docker job) writes result.json, tensorboard/,
the recipe in every export and the job record's progress."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import cosmos_rl_standin
from helpers import json_out, skillbank
from skillbank.runs import layout
from skillbank.training.cosmos_rl.watcher import LogWatcher
from test_rl_command import write_case

# cosmos-rl 0.4.7's GRPO step line (cosmos_rl/dispatcher/status.py, as installed: line 2548), behind its formatter's prefix
GRPO_LINE = ("[cosmos] 2026-01-01 00:00:00,000 - cosmos - INFO - Step: {step}/2, Reward Mean: {reward:.4f}, Reward Std: 0.2500, Reward Max: 1.0000, "
             "Reward Min: 0.0000, Completion Length Mean: 42.00, Completion Length Max: 64.00, Average loss: 0.12345, Max loss: 0.20000, "
             "Learning rate: 1.00000e-06, Entropy: 0.50000, Effective Entropy: 0.40000, Grad Norm: 0.75000, KL Loss Avg: {kl}, KL Loss Max: 0.00000, "
             "Iteration time: 0.30s.")


def test_grpo_step_lines_of_the_controller_become_metrics_rows(tmp_path):
    run = tmp_path / "run"
    said: list[str] = []
    watcher = LogWatcher(tmp_path / "logs", run, metrics_path=run / "metrics.jsonl", progress=False, log=said.append, expect_export=False)
    watcher.feed(GRPO_LINE.format(step=1, reward=0.5, kl="0.01000"), source="controller.log")
    watcher.feed(GRPO_LINE.format(step=1, reward=0.5, kl="0.01000"), source="controller.log")  # a repeat is read once
    watcher.feed(GRPO_LINE.format(step=2, reward=0.75, kl="nan"), source="controller.log")
    watcher.feed("[cosmos] x - [Controller] Validation finished, average reward: 0.8, total rollouts: 16, max reward: 1.0, min reward: 0.0, "
                 "std reward: 0.3 at step 2", source="controller.log")
    watcher.feed(GRPO_LINE.format(step=9, reward=0.1, kl="0"), source="policy_0.log")  # progress of GRPO comes from the controller only
    watcher.feed("[cosmos] x - Step: 7/9, Loss: 0.5, Max Loss 0.6, Grad norm: 0.1, Iteration time: 1.00s.", source="controller.log")  # SFT's echo: not read
    result = watcher.finish(0)
    rows = layout.read_metrics(run)
    assert all(isinstance(r.pop("time"), float) for r in rows)
    assert rows[0] == {"step": 1, "total_steps": 2, "epoch": None, "loss": 0.12345, "reward_mean": 0.5, "reward_std": 0.25, "reward_max": 1.0,
                       "reward_min": 0.0, "response_length": 42.0, "loss_max": 0.2, "lr": 1e-6, "entropy": 0.5, "grad_norm": 0.75, "kl": 0.01,
                       "iteration_time": 0.3}
    assert [r["step"] for r in rows] == [1, 2, 2] and rows[1]["kl"] is None  # a non-finite value is null, as SFT's loss
    assert rows[2] == {"step": 2, "total_steps": 2, "epoch": None, "val_reward_mean": 0.8, "val_rollouts": 16}
    assert (result.status, result.last_step, result.total_steps, result.last_loss, result.last_reward_mean) == ("succeeded", 2, 2, 0.12345, 0.75)


def _launch_env(tmp_path: Path, **more: str) -> dict[str, str]:
    bin_dir = cosmos_rl_standin.install(tmp_path / "standin-bin")
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STANDIN_STEP_S": "0.05", **more}


def test_rl_launch_watches_the_grpo_run_and_leaves_metrics_result_recipe_and_progress(tmp_path):
    spec = write_case(tmp_path)
    prepared = json_out(skillbank("rl", "--spec", str(spec), "--gpus-per-node", "8", "--json"))
    proc = skillbank("rl", "--spec", str(spec), "--launch", "--toml", prepared["toml"], "--json", env=_launch_env(tmp_path), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json_out(proc)
    run = Path(prepared["run_dir"])
    assert out["run_dir"] == str(run) and out["result"]["status"] == "succeeded"
    rows = layout.read_metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and all(r["total_steps"] == 4 and "reward_mean" in r and "loss" in r for r in rows)
    assert [r["reward_mean"] for r in rows] == [0.25, 0.5, 0.75, 1.0]
    result = json.loads((run / "result.json").read_text())
    assert (result["status"], result["last_step"], result["total_steps"], result["last_reward_mean"]) == ("succeeded", 4, 4, 1.0)
    assert result["final_safetensors"] == str(layout.safetensors_dir(run, 4)) and result["checkpoints"]
    recipe = json.loads((layout.safetensors_dir(run, 4) / "skillbank_recipe.json").read_text())
    assert recipe["steps_trained"] == 4 and recipe["answer_type"] and recipe["model_type"] == "qwen3_vl"
    assert (run / "cosmos_rl.toml").read_text() == Path(prepared["toml"]).read_text() and any((run / "tensorboard").iterdir())
    assert "final reward mean: 1.0 at step 4" in proc.stderr
    record = json.loads(Path(out["job_record"]).read_text())
    assert record["action"] == "rl" and record["status"] == "succeeded" and record["outputs"]["run_dir"] == str(run)
    progress = record["progress"]
    assert (progress["state"], progress["last_step"], progress["total_steps"]) == ("succeeded", 4, 4)
    assert progress["export"] == str(layout.safetensors_dir(run, 4)) and progress["last_complete_checkpoint"] == str(layout.checkpoint_dir(run, 4))


def test_rl_launch_fails_when_the_logs_say_so_though_cosmos_rl_exits_zero(tmp_path):
    spec = write_case(tmp_path)
    prepared = json_out(skillbank("rl", "--spec", str(spec), "--gpus-per-node", "8", "--json"))
    proc = skillbank("rl", "--spec", str(spec), "--launch", "--toml", prepared["toml"], env=_launch_env(tmp_path, STANDIN_CRASH_AT="3"), timeout=180)
    assert proc.returncode == 1 and "illegal memory access" in proc.stderr
    result = json.loads((Path(prepared["run_dir"]) / "result.json").read_text())
    assert result["status"] == "failed" and result["last_step"] == 2 and "illegal memory access" in result["reason"]


def test_rl_launch_flags_are_checked(tmp_path):
    spec = write_case(tmp_path)
    proc = skillbank("rl", "--spec", str(spec), "--toml", str(spec))
    assert proc.returncode == 2 and "--toml belongs to --launch" in proc.stderr
    proc = skillbank("rl", "--spec", str(spec), "--launch", "--toml", str(tmp_path / "train.json"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr
    sft = tmp_path / "sft.toml"
    sft.write_text('[train]\noutput_dir = "x"\n[train.train_policy]\ntype = "sft"\n')
    proc = skillbank("rl", "--spec", str(spec), "--launch", "--toml", str(sft))
    assert proc.returncode == 2 and "is not a GRPO config" in proc.stderr
    proc = skillbank("rl", "--spec", str(spec), "--launch", "--backend", "local")
    assert proc.returncode == 2 and "--backend local does not go with it" in proc.stderr


def test_a_slurm_rl_job_runs_the_watcher_on_node_0(tmp_path):
    """job.sbatch picks the fresh or the resume TOML; cosmos-node.sh's node 0 runs `skillbank rl --launch` on it (the watcher),
    the other nodes the launcher on the same TOML; both parse (bash -n)."""
    spec = write_case(tmp_path)
    proc = skillbank("submit", "--platform", "slurm", "--action", "rl", "--spec", str(spec), "--gpus-per-node", "8", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json_out(proc)["record"]
    job_dir = Path(record["outputs"]["job_dir"])
    text, node = (job_dir / "job.sbatch").read_text(), (job_dir / "cosmos-node.sh").read_text()
    for script in ("job.sbatch", "cosmos-node.sh"):
        subprocess.run(["bash", "-n", str(job_dir / script)], check=True)
    for line in ('CONFIG="$JOB_DIR/cosmos-rl.toml"', '  CONFIG="$JOB_DIR/cosmos-rl-resume.toml"', 'LOG_DIR="$RUN_DIR/cosmos-rl-logs"',
                 "export RUN_DIR LOG_DIR CONFIG SCRIPT HEAD_NODE NODE_LIST PORT RDZV_PORT", "skillbank.training.cosmos_rl.grpo_script",
                 'run_step srun ${IN_ENV[@]+"${IN_ENV[@]}"} --nodes="$SLURM_NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash "$JOB_DIR/cosmos-node.sh"'):
        assert line in text, line
    assert "grep -qsE" not in text  # success is node 0's verdict, not a grep of failure lines
    for line in ('  exec python -m skillbank.cli rl --spec "$JOB_DIR/spec.yaml" --backend cosmos-rl --launch --toml "$CONFIG" --log-dir "$LOG_DIR/node_0" \\',
                 '    --launcher-args "$(printf \'%q \' "${LAUNCH[@]}")"',
                 'exec cosmos-rl --config "$CONFIG" --log-dir "$LOG_DIR/node_$NODE" "${LAUNCH[@]}" --url "$HEAD_NODE:$PORT" "$SCRIPT"'):
        assert line in node, line
    assert record["outputs"]["cosmos_log_dir"] == str(Path(record["outputs"]["run_dir"]) / "cosmos-rl-logs")
    assert any("skillbank rl --launch" in n for n in record["notes"])


def run_rl_job(spec: Path, env: dict, *, platform: str, gpus: int) -> tuple[dict, subprocess.CompletedProcess, dict]:
    """`submit --action rl --backend cosmos-rl` of the spec (a vllm stub first on PYTHONPATH), then `jobs wait --json`:
    (the submitted record, the wait's process, its document)."""
    stub = cosmos_rl_standin.vllm_stub(spec.parent / "stub")
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(stub), env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))) if p)}
    proc = skillbank("submit", "--platform", platform, "--action", "rl", "--backend", "cosmos-rl", "--gpus-per-node", str(gpus), "--spec", str(spec),
                     "--json", env=env, cwd=spec.parent, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    record = json_out(proc)["record"]
    proc = skillbank("jobs", "wait", record["id"], "--timeout", "240", "--json", env=env, timeout=300)
    return record, proc, json_out(proc)


def test_a_local_rl_job_with_cosmos_rl_reports_its_progress(tmp_path):
    """`submit --platform local --action rl --backend cosmos-rl` runs the same `skillbank rl --launch` (the stand-in launcher in
    the job's environment): `jobs wait --json` carries the rl job's progress from its run folder."""
    from test_slurm_real import standin_venv

    spec = write_case(tmp_path)
    venv = standin_venv(tmp_path)
    env = {"SKILLBANK_VENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "STANDIN_STEP_S": "0.05",
           "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    record, proc, done = run_rl_job(spec, env, platform="local", gpus=8)
    log = Path(record["outputs"]["job_dir"]) / "train.log"
    assert proc.returncode == 0 and done["outcome"] == "succeeded", (done.get("progress"), log.read_text()[-4000:] if log.exists() else "")
    progress = done["progress"]
    run = Path(record["outputs"]["run_dir"])
    assert (progress["state"], progress["last_step"], progress["total_steps"]) == ("succeeded", 4, 4)
    assert progress["export"] == str(layout.safetensors_dir(run, 4)) and (layout.safetensors_dir(run, 4) / "skillbank_recipe.json").is_file()
    assert json.loads((run / "result.json").read_text())["last_reward_mean"] == 1.0 == progress["last_reward_mean"]
    assert [a["status"] for a in progress["attempts"]] == ["succeeded"]
