"""Runs longer than one job, without Slurm: the requeue hook's decisions (platform.requeue), each job's own run root
(two jobs with one output_dir resume only their own run), --resume-run, --time capped by --time-limit, the nodes a
failed job's logs blame (platform.bad_nodes) and `submit --retry-of` excluding them. The real Slurm runs of the same
(the time limit reached, sinfo's node list) are in test_slurm_real.py."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from skillbank.errors import InputError
from skillbank.platform import bad_nodes, requeue, slurm_limits
from skillbank.runs import layout, node
from test_platform import _env, fake_tools, run_cli, submit_json, write_spec  # noqa: F401 - _env: its autouse fixture (passing preflight, a private cache)


def checkpoint(run: Path, step: int, ranks: int = 8) -> Path:
    """A complete checkpoint by cosmos-rl's markers."""
    policy = layout.checkpoint_dir(run, step)
    policy.mkdir(parents=True)
    (policy / "cosmos_config").write_text(json.dumps({"policy": {"parallelism": {"dp_shard_size": ranks}}}))
    for rank in range(ranks):
        (policy / f".rank_{rank}_complete").write_text("")
    return policy


def test_the_hook_requeues_after_progress_fails_without_and_names_why_each_attempt_ended(tmp_path, monkeypatch):
    job, run = tmp_path / "job", tmp_path / "run"
    job.mkdir()
    checkpoint(run, 2)
    monkeypatch.setenv(node.ATTEMPT_ENV, "0")
    requeue.begin(job, str(run), now="t0", stamp=1000.0)
    checkpoint(run, 4)
    assert requeue.signal(job, str(run), limit_s=120, lead_s=30, now="t1", stamp=1090.0)[0]  # 90 s of 120: the limit
    first = node.read(job)["attempts"][0]
    assert (first["why_ended"], first["status"], first["checkpoint_at_start"], first["checkpoint_at_end"]) == ("time_limit", "requeued", 2, 4)

    monkeypatch.setenv(node.ATTEMPT_ENV, "1")
    requeue.begin(job, str(run), now="t2", stamp=2000.0)
    requeue_it, why = requeue.signal(job, str(run), limit_s=3600, lead_s=300, now="t3", stamp=2100.0)  # early: a preemption's signal
    second = node.read(job)["attempts"][1]
    assert not requeue_it and second["why_ended"] == "preempted" and second["status"] == "failed"
    assert "no progress" in why and "no checkpoint after step 4" in why and second["guard"] == why

    monkeypatch.setenv(node.ATTEMPT_ENV, "3")  # attempt 2 began and was requeued by hand: it recorded no end
    (job / node.NODE_FILE).write_text(json.dumps({"attempts": [{"attempt": 2, "started": "t4", "status": "running"}]}))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    requeue.begin(job, str(run), now="t5")
    assert [a.get("why_ended") for a in node.read(job)["attempts"]] == ["requeued_by_hand", None]
    assert (requeue.signal_lead(120), requeue.signal_lead(4 * 3600), requeue.limit_seconds("1-02:00:00")) == (30, 300, 93600)


def test_two_jobs_with_one_output_dir_resume_only_their_own_run(tmp_path, capsys, monkeypatch):
    """Both jobs render train.output_dir ./results/train: each run folder sits alone under its job's run root, so
    cosmos-rl's resume scan of that root (and `skillbank train --resume --run-dir`) sees that job's checkpoints only."""
    from skillbank.specification.io import load_spec
    from skillbank.specification.train import TrainSpec
    from skillbank.training.cosmos_rl.launch import resume_setting
    from skillbank.training.local.launch import plan_local

    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path)
    a, b = (submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run")["record"] for _ in range(2))
    run_a, run_b = Path(a["outputs"]["run_dir"]), Path(b["outputs"]["run_dir"])
    assert run_a.parent.parent == run_b.parent.parent == tmp_path / "results" / "train" and run_a.parent != run_b.parent
    checkpoint(run_a, 40)
    for record, run in ((a, run_a), (b, run_b)):
        toml = tomllib.loads((Path(record["outputs"]["job_dir"]) / "cosmos-rl.toml").read_text())
        scanned = Path(toml["train"]["output_dir"]).parent  # cosmos-rl's _root_output_dir: what train.resume = true lists
        assert (list(scanned.iterdir()) if scanned.exists() else []) == ([run] if run.exists() else [])
    loaded = load_spec(spec, TrainSpec)
    assert resume_setting(loaded, True, None, run_dir=run_a) == str(layout.checkpoint_dir(run_a, 40))
    assert resume_setting(loaded, True, None, run_dir=run_b) is False  # job b never continues job a's checkpoints
    local = loaded.model_copy(deep=True)
    local.policy.parallelism.dp_shard_size = 8
    assert plan_local(local, resume=True, dry_run=True, run_dir=run_b).resume_from is None

    again = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run", "--resume-run", str(run_a))["record"]
    assert again["outputs"]["run_dir"] == str(run_a) and any("continues run" in n for n in again["notes"])
    local = submit_json(capsys, "--platform", "local", "--spec", str(spec), "--dry-run", "--resume-run", str(run_a))["record"]
    assert local["argv"][-3] == "--run-dir" and (tmp_path / local["argv"][-2]).resolve() == run_a and local["argv"][-1] == "--resume"  # every platform
    run_b.mkdir(parents=True)
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--dry-run", "--resume-run", str(run_b), capsys=capsys)
    assert code == 2 and "holds no complete checkpoint" in err
    other = tmp_path / "results" / "train" / "train-20990101-000000-aaaaaa"  # a run root that already holds another run
    checkpoint(other / "20240101000000", 10)
    monkeypatch.setattr("skillbank.runs.record.new_job_id", lambda action="train": other.name)
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--dry-run", capsys=capsys)
    assert code == 2 and "already holds another run's checkpoints" in err and "--resume-run" in err


def test_time_is_capped_by_the_time_limit_and_the_partition_limit_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path)
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run", "--time", "30:00:00", "--time-limit", "4")["record"]
    script = Path(record["script"]).read_text()
    assert "#SBATCH --time=04:00:00" in script and "#SBATCH --signal=B:USR1@300" in script
    assert any("capped by --time-limit 4" in n for n in record["notes"]) and any("preempt_send_user_signal" in n for n in record["notes"])
    fake_tools(tmp_path, monkeypatch, {"scontrol": 'echo "PartitionName=batch Default=YES MaxTime=1-00:00:00 State=UP"'})
    assert slurm_limits.partition_limit(None) == (86400, "batch")
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run", "--time", "30:00:00")["record"]
    assert "#SBATCH --time=1-00:00:00" in Path(record["script"]).read_text()
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--dry-run", "--time-limit", "soon", capsys=capsys)
    assert code == 2 and "--time-limit" in err


NCCL_LOG = [f"[rank{r}]:[E1128 10:00:00.0 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum=812, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600004 milliseconds before timing out." for r in range(16) if r not in (9, 10)]
XID_LOG = ["Nov 28 10:00:01 gpu-07 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."]
ECC_LOG = ["RuntimeError: CUDA error: uncorrectable ECC error encountered"]


def test_the_logs_blame_the_node_of_a_silent_rank_an_xid_or_an_ecc_error(tmp_path):
    hosts = ["gpu-01", "gpu-02"]
    node0, node1 = tmp_path / "node_0" / "logs_latest" / "policy.log", tmp_path / "node_1" / "logs_latest" / "policy.log"
    blamed = bad_nodes.blame({node0: NCCL_LOG[:8], node1: NCCL_LOG[8:]}, hosts, 8)
    assert [(n["node"], n["why"], n["rank"]) for n in blamed] == [("gpu-02", "nccl_timeout", 9)]  # ranks 9, 10 hung: node 1
    blamed = bad_nodes.blame({node0: ["ok"], node1: ECC_LOG, tmp_path / "syslog": XID_LOG}, hosts, 8)
    assert [(n["node"], n["why"]) for n in blamed] == [("gpu-02", "ecc"), ("gpu-07", "xid")]
    assert bad_nodes.blame({node0: ["loss 1.0", "Step: 3/10"]}, hosts, 8) == []
    batch = tmp_path / "slurm-7.out"
    batch.write_text("skillbank: job 7 attempt 0 on gpu-01 at x\nskillbank: nodes gpu-01;gpu-02, controller on gpu-01:8000\n")
    assert bad_nodes.node_list(batch) == hosts


def test_retry_of_a_failed_job_excludes_the_blamed_node_and_continues_its_run(tmp_path, capsys, monkeypatch):
    """A 2-node job whose node_1 logged an uncorrectable ECC error: `jobs diagnose` names gpu-02, `submit --retry-of`
    renders the same run (its spec, --partition, run folder) with --exclude=gpu-02, checked against sinfo's node list;
    an exclusion that would leave fewer nodes than the job needs is refused."""
    from skillbank.runs import record as rec

    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, replicas=2)
    first = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run", "--partition", "batch", "--time", "04:00:00")
    record = rec.load(first["record_path"])
    record.dry_run, record.status, record.external_id, record.exit_code = False, "failed", "7", 1
    rec.save(record, index=False)
    run = Path(record.outputs.run_dir)
    checkpoint(run, 20)
    logs = run / "cosmos-rl-logs"
    for i, lines in enumerate((["Step: 21/100, Loss: 1.0"], ["Step: 21/100, Loss: 1.0", *ECC_LOG])):
        (logs / f"node_{i}" / "logs_latest").mkdir(parents=True)
        (logs / f"node_{i}" / "logs_latest" / "policy.log").write_text("\n".join(lines) + "\n")
    (Path(record.outputs.job_dir) / "slurm-7.out").write_text("skillbank: nodes gpu-01;gpu-02, controller on gpu-01:8000\n")
    fake_tools(tmp_path, monkeypatch, {"sinfo": "printf 'gpu-01\\ngpu-02\\ngpu-03\\n'", "scontrol": "exit 1", "squeue": "exit 1"})
    code, out, err = run_cli("jobs", "diagnose", first["record_path"], "--json", capsys=capsys)
    diag = json.loads(out)
    assert [n["node"] for n in diag["bad_nodes"]] == ["gpu-02"] and any("--retry-of" in n for n in diag["notes"]), err

    retry = submit_json(capsys, "--platform", "slurm", "--retry-of", first["record_path"], "--dry-run")["record"]
    script = Path(retry["script"]).read_text()
    assert "#SBATCH --exclude=gpu-02" in script and "#SBATCH --partition=batch" in script and "#SBATCH --time=04:00:00" in script
    assert retry["outputs"]["run_dir"] == str(run) and any("excludes gpu-02: ecc" in n for n in retry["notes"])
    assert any("2 of 3 node(s)" in n for n in retry["notes"])
    code, _, err = run_cli("submit", "--platform", "slurm", "--retry-of", first["record_path"], "--exclude", "gpu-01,gpu-03", "--dry-run", capsys=capsys)
    assert code == 2 and "leaves 0 of 3 node(s)" in err
