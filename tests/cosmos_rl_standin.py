"""A stand-in for cosmos-rl's launcher on a machine without GPUs: cosmos-rl 0.4.7's SFT trainer is CUDA-only
(shared/docs/cpu-stack.md), so a Slurm job here cannot run it. This executable takes the launcher's command
line (`cosmos-rl --config X.toml --log-dir D [--num-workers N --worker-idx I --node-ip-list L --port P
--rdzv-port R --url U] script.py`) and replays what the real one writes, as the real one writes it:

- D/logs_<YYYYmmdd-HHMMSS>/{controller.log, policy_<r>.log} and the D/logs_latest link;
- the master rank's lines, text copied from cosmos-rl 0.4.7 (policy/worker/sft_worker.py,
  utils/checkpoint.py, policy/trainer/llm_trainer.py), behind torchrun's `[rank0]:` prefix and cosmos-rl's
  formatter (`[cosmos] %(asctime)s - %(name)s - %(levelname)s - %(message)s`):
  `Training epoch e/E`, `Step: s/T, Loss: l, Grad norm: g, Iteration time: ts, optimizer/lr_0: x`,
  `[SFT] Validation loss: v for train step s/T, epoch e` (e 0-based), `[Policy] Step: s, checkpoint saved
  successfully at <run>/checkpoints/step_s/policy.`, `Exported safetensors to <run>/safetensors/step_s`;
- <train.output_dir>/checkpoints/step_N/policy/{model,optimizer,scheduler,extra_info}_rank_R.pth,
  cosmos_config (the config as JSON) and one .rank_R_complete marker per saving rank, every save_freq steps
  and at the last step; <train.output_dir>/safetensors/step_N: a Hugging Face folder, the files of the
  TOML's policy.model_name_or_path copied (a real tiny model, so `skillbank evaluate` loads it);
- train.resume = <a step_N/policy path>: continues after step N (a GRPO TOML's `true`: after the run's newest checkpoint);
- a GRPO config (train.train_policy.type "grpo"): the controller's step line instead of the policy's, text copied from
  cosmos-rl 0.4.7 (dispatcher/status.py, as installed: line 2548): `Step: s/T, Reward Mean: m, Reward Std: sd, Reward Max: ..,
  Reward Min: .., Completion Length Mean: .., Completion Length Max: .., Average loss: l, Max loss: .., Learning rate: x,
  Entropy: .., Effective Entropy: .., Grad Norm: g, KL Loss Avg: k, KL Loss Max: .., Iteration time: ts.` in controller.log
  (no rank prefix: the controller is no torchrun rank); checkpoints and exports as SFT's, in policy_0.log; no epoch lines.
Like the real launcher it exits 0 whatever happened. STANDIN_STEP_S (default 0.3) paces the steps;
STANDIN_CRASH_AT=k writes a traceback in policy_0.log at step k and stops (still exit 0).
`install(bin_dir)` writes it as `cosmos-rl` with the tools the job checks for on the node: `nvidia-smi`
listing the GPUs Slurm gave the job (CUDA_VISIBLE_DEVICES) and a `redis-server` (the real controller
starts one; the stand-in does not).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import tomllib
from pathlib import Path

PREFIX = "[cosmos] {time} - cosmos - INFO - "


def _line(rank: int | None, text: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + ",000"
    return ("" if rank is None else f"[rank{rank}]:") + PREFIX.format(time=stamp) + text + "\n"


def _arg(argv: list[str], flag: str, default: str | None = None) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else default


def main(argv: list[str]) -> int:
    config = tomllib.loads(Path(_arg(argv, "--config")).read_text())
    log_dir = Path(_arg(argv, "--log-dir"))
    train, policy = config["train"], config["policy"]
    run = Path(train["output_dir"])
    ranks = int(policy["parallelism"].get("dp_shard_size", 1))
    total = int(train.get("max_num_steps") or 4)
    epochs = int(train.get("epoch", 1))
    save_freq = int(train["ckpt"].get("save_freq") or total)
    val = config.get("validation", {})
    val_freq = int(val.get("freq", total)) if val.get("enable", True) else 0
    export = bool(train["ckpt"].get("enable_checkpoint")) and bool(train["ckpt"].get("export_safetensors", True))
    pace = float(os.environ.get("STANDIN_STEP_S", "0.3"))
    crash_at = int(os.environ.get("STANDIN_CRASH_AT", "0"))
    resume = train.get("resume")
    grpo = (train.get("train_policy") or {}).get("type") == "grpo"
    start = int(Path(resume).parent.name.split("_")[1]) if isinstance(resume, str) and resume else 0
    if resume is True:  # cosmos-rl's scan of the run root: here, the run's own newest complete checkpoint
        done = [int(d.name[5:]) for d in (run / "checkpoints").glob("step_*") if any(d.glob("policy/.rank_*_complete"))]
        start = max(done, default=0)

    stamped = log_dir / f"logs_{time.strftime('%Y%m%d-%H%M%S')}"
    stamped.mkdir(parents=True, exist_ok=True)
    latest = log_dir / "logs_latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(stamped.name)
    print(f"Launching controller and {ranks} policy rank(s) (stand-in for cosmos-rl 0.4.7)", flush=True)
    controller = open(stamped / "controller.log", "a", buffering=1)
    controller.write(_line(None, "Controller started"))
    logs = [open(stamped / f"policy_{r}.log", "a", buffering=1) for r in range(ranks)]
    master = logs[0]
    per_epoch = max(1, total // epochs)
    for log in logs if not grpo else ():
        log.write(_line(logs.index(log), f"Training epoch {start // per_epoch + 1}/{epochs}"))
    for step in range(start + 1, total + 1):
        time.sleep(pace)
        if crash_at and step == crash_at:
            master.write("[rank0]:Traceback (most recent call last):\n[rank0]:  File \"sft_worker.py\", line 1020, in train\n"
                         "[rank0]:RuntimeError: CUDA error: an illegal memory access was encountered\n")
            print(f"Process {os.getpid() + 1} failed with return code 1", flush=True)
            return 0  # the real launcher exits 0 too
        loss = 2.0 / step
        if grpo:
            reward = step / total
            controller.write(_line(None, f"Step: {step}/{total}, Reward Mean: {reward:.4f}, Reward Std: 0.2500, Reward Max: 1.0000, Reward Min: 0.0000, "
                                         f"Completion Length Mean: 42.00, Completion Length Max: 64.00, Average loss: {loss:.5f}, Max loss: {loss * 2:.5f}, "
                                         f"Learning rate: 1.00000e-06, Entropy: 0.50000, Effective Entropy: 0.40000, Grad Norm: {1.0 / step:.5f}, "
                                         f"KL Loss Avg: 0.00000, KL Loss Max: 0.00000, Iteration time: {pace:.2f}s."))
            if step % save_freq == 0 or step == total:
                _save(run, step, ranks, config, policy["model_name_or_path"], export, master)
            continue
        master.write(_line(0, f"Step: {step}/{total}, Loss: {loss:.5f}, Grad norm: {1.0 / step:.5f}, Iteration time: {pace:.2f}s, optimizer/lr_0: 2.00000e-05"))
        if step % per_epoch == 0 and step < total:
            for r, log in enumerate(logs):
                log.write(_line(r, f"Training epoch {step // per_epoch + 1}/{epochs}"))
        if val_freq and (step % val_freq == 0 or step == total):
            master.write(_line(0, f"[SFT] Validation loss: {loss * 1.1} for train step {step}/{total}, epoch {(step - 1) // per_epoch}"))
        if step % save_freq == 0 or step == total:
            _save(run, step, ranks, config, policy["model_name_or_path"], export, master)
    for log in (*logs, controller):
        log.close()
    return 0


def _save(run: Path, step: int, ranks: int, config: dict, model: str, export: bool, log) -> None:
    policy = run / "checkpoints" / f"step_{step}" / "policy"
    policy.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        for part in ("model", "optimizer", "scheduler", "extra_info"):
            (policy / f"{part}_rank_{rank}.pth").write_bytes(b"\0" * 16)
    (policy / "cosmos_config").write_text(json.dumps(config, indent=4))
    for rank in range(ranks):
        (policy / f".rank_{rank}_complete").write_text("")
    log.write(_line(0, f"[Policy] Step: {step}, checkpoint saved successfully at {run}/checkpoints/step_{step}/policy."))
    if export:
        target = run / "safetensors" / f"step_{step}"
        tmp = run / "safetensors" / f".step_{step}"
        shutil.copytree(model, tmp, ignore=shutil.ignore_patterns("skillbank_*"))
        tmp.rename(target)
        # logger.info(f"\n\nExported safetensors to {path}\n\n"): the formatter's prefix, then the message's own lines
        log.write(_line(0, "") + f"[rank0]:\n[rank0]:Exported safetensors to {target}\n[rank0]:\n[rank0]:\n")


NVIDIA_SMI = """#!/usr/bin/env bash
# stand-in: lists the GPUs Slurm gave the job (its CUDA_VISIBLE_DEVICES), as `nvidia-smi -L` does
IFS=, read -ra ids <<< "${CUDA_VISIBLE_DEVICES:-0}"
for i in "${!ids[@]}"; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-standin-${ids[$i]})"; done
"""


def vllm_stub(folder: Path) -> Path:
    """A folder holding an empty `vllm` package, for PYTHONPATH: a GRPO job's env check asks only whether vllm imports
    (the rollout engine is this stand-in's)."""
    (folder / "vllm").mkdir(parents=True, exist_ok=True)
    (folder / "vllm" / "__init__.py").write_text("")
    return folder


def install(bin_dir: Path) -> Path:
    """`cosmos-rl` (this replay), `nvidia-smi` and `redis-server` stand-ins in bin_dir (put it first on PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "cosmos-rl").write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                                       "import cosmos_rl_standin\nsys.exit(cosmos_rl_standin.main(sys.argv[1:]))\n")
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "redis-server").write_text("#!/bin/sh\n# stand-in: the real controller starts redis-server; the replay does not\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
