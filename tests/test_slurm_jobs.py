"""Slurm CPU jobs and the scheduler's answers, without a cluster: what `submit --gpus-per-node 0` renders,
and how `jobs status` / `jobs cancel` read squeue, scontrol and sacct (stand-in executables that answer
like Slurm 22.05, including a cluster without accounting). tests/test_slurm_real.py runs the same on a
real one-node Slurm."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from skillbank.platform import slurm_jobs as slurm
from test_platform import _env, fake_tools, run_cli, submit_json, write_spec  # noqa: F401  (fixture: autouse _env)

NO_ACCOUNTING = "echo 'Slurm accounting storage is disabled' >&2; exit 1"
SCONTROL_DONE = (
    "echo 'JobId=77 JobName=x JobState=COMPLETED Reason=None Requeue=1 Restarts=1 ExitCode=0:0 "
    "StartTime=2026-11-26T05:00:01 EndTime=2026-11-26T05:03:04 NodeList=node1'"
)


def cpu_job(tmp_path: Path, capsys, *extra: str) -> dict:
    spec = write_spec(tmp_path, shard=2)
    return submit_json(capsys, "--platform", "slurm", "--backend", "local", "--gpus-per-node", "0", "--spec", str(spec), *extra)["record"]


def test_cpu_job_renders_no_gres_no_exclusive_and_cpus_per_rank(tmp_path, capsys):
    record = cpu_job(tmp_path, capsys, "--dry-run")
    text = Path(record["script"]).read_text()
    subprocess.run(["bash", "-n", record["script"]], check=True)
    header = text.split("set -euo")[0]
    assert "--gpus" not in header and "--exclusive" not in header  # no GRES: a CPU node takes it
    assert "#SBATCH --cpus-per-task=2\n" in text  # one CPU per rank: dp_shard_size 2
    assert text.count('--cpus-per-task="$SLURM_CPUS_PER_TASK"') == 2  # fresh and resumed srun get them all
    preflight = next(ln for ln in text.splitlines() if "skillbank.cli preflight" in ln)
    assert "--gpus-per-node" not in preflight  # the CPU ranks are the spec's shape; no GPU is checked on the node
    assert "export SKILLBANK_JOB_ID=" + record["id"] in text
    assert record["gpus_per_node"] == 0 and any("a CPU job: 2 CPU rank(s)" in n for n in record["notes"])
    gpu = submit_json(capsys, "--platform", "slurm", "--backend", "local", "--spec", str(write_spec(tmp_path, shard=2)), "--dry-run")["record"]
    gpu_text = Path(gpu["script"]).read_text()
    assert "#SBATCH --gpus-per-node=2\n#SBATCH --exclusive\n" in gpu_text and "--cpus-per-task" not in gpu_text


def test_cpu_job_on_every_platform_needs_only_the_local_backend(tmp_path, capsys):
    """--gpus-per-node 0 is a CPU job on local, docker and slurm alike; only cosmos-rl (GPUs only) refuses it,
    with a fix that is not already given."""
    from test_platform import _passing_preflight

    spec = write_spec(tmp_path, shard=2)
    for platform in ("local", "docker", "slurm"):
        code, _, err = run_cli("submit", "--platform", platform, "--backend", "cosmos-rl", "--gpus-per-node", "0", "--spec", str(spec), "--dry-run", capsys=capsys)
        assert code == 2 and "cosmos-rl backend trains on GPUs only" in err and "add --backend local" in err, err
        record = submit_json(capsys, "--platform", platform, "--backend", "local", "--gpus-per-node", "0", "--spec", str(spec), "--dry-run")["record"]
        assert record["gpus_per_node"] == 0 and any("a CPU job: 2 CPU rank(s)" in n for n in record["notes"]), record["notes"]
        assert _passing_preflight.calls[-1]["gpus_per_node"] is None  # the ranks are the spec's shape; no GPU to compare
    docker = submit_json(capsys, "--platform", "docker", "--backend", "local", "--gpus-per-node", "0", "--spec", str(spec), "--dry-run")["record"]
    assert "--gpus" not in docker["argv"] and "--gpus" not in Path(docker["script"]).read_text()
    assert "--gpus-per-node" not in (Path(docker["outputs"]["job_dir"]) / "container.sh").read_text()
    local = submit_json(capsys, "--platform", "local", "--backend", "local", "--gpus-per-node", "0", "--spec", str(spec), "--dry-run")["record"]
    text = Path(local["script"]).read_text()
    preflight = next(ln for ln in text.splitlines() if " preflight " in ln)
    assert 'export CUDA_VISIBLE_DEVICES=""' in text and "--gpus-per-node" not in preflight


def test_status_reads_scontrol_when_the_job_left_the_queue_without_accounting(tmp_path, monkeypatch, capsys):
    calls = fake_tools(tmp_path, monkeypatch, {"sbatch": "echo 77", "squeue": "exit 0", "sacct": NO_ACCOUNTING, "scontrol": SCONTROL_DONE})
    record = cpu_job(tmp_path, capsys)
    code, out, _ = run_cli("jobs", "status", record["id"], "--json", capsys=capsys)
    done = json.loads(out)["record"]
    assert code == 0 and done["status"] == "succeeded" and done["exit_code"] == 0
    assert done["started"] == slurm._utc("2026-11-26T05:00:01") and done["ended"] == slurm._utc("2026-11-26T05:03:04")
    assert done["ended"] and any("requeued by Slurm 1 time(s)" in n for n in done["notes"])
    n_calls = len(calls.read_text().splitlines())
    code, out, _ = run_cli("jobs", "status", record["id"], "--json", capsys=capsys)
    assert json.loads(out)["record"]["status"] == "succeeded"
    assert len(calls.read_text().splitlines()) == n_calls  # a final state is read from the record, Slurm is not asked


def test_status_falls_back_to_sacct_then_says_when_slurm_forgot_the_job(tmp_path, monkeypatch, capsys):
    unknown = "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1"
    fake_tools(tmp_path, monkeypatch, {"sbatch": "echo 78", "squeue": unknown, "scontrol": unknown,
                                       "sacct": "echo 'FAILED|2:0|2026-11-26T05:00:01|2026-11-26T05:01:00|node1'"})
    record = cpu_job(tmp_path, capsys)
    code, out, _ = run_cli("jobs", "status", record["id"], "--json", capsys=capsys)
    failed = json.loads(out)["record"]
    assert failed["status"] == "failed" and failed["exit_code"] == 2
    other = cpu_job(tmp_path, capsys)
    (tmp_path / "fakebin" / "sacct").write_text("#!/usr/bin/env bash\n" + NO_ACCOUNTING + "\n")
    code, out, _ = run_cli("jobs", "status", other["id"], "--json", capsys=capsys)
    gone = json.loads(out)["record"]
    assert gone["status"] == "unknown" and any("no longer knows job 78" in n for n in gone["notes"])


def test_exit_codes_and_times():
    assert slurm._exit_code("0:0") == 0 and slurm._exit_code("3:0") == 3 and slurm._exit_code("0:15") == 143
    assert slurm._exit_code("") is None and slurm._utc("Unknown") is None and slurm._utc("None") is None
    assert slurm._utc("2026-11-26T05:00:01").endswith("Z")


def test_cancel_waits_until_slurm_reports_the_job_ended(tmp_path, monkeypatch, capsys):
    """scancel, then COMPLETING (processes still stopping), then CANCELLED: cancel returns after the end."""
    states = tmp_path / "states"
    states.write_text("RUNNING\nRUNNING\nCOMPLETING\nCOMPLETING\nCANCELLED\n")
    pop = f'state=$(head -1 {states}); if [ "$(wc -l < {states})" -gt 1 ]; then sed -i 1d {states}; fi'
    fake_tools(tmp_path, monkeypatch, {
        "sbatch": "echo 79", "squeue": "exit 0", "sacct": NO_ACCOUNTING, "scancel": "exit 0",
        "scontrol": pop + '; echo "JobId=79 JobState=$state Restarts=0 ExitCode=0:15 StartTime=2026-11-26T05:00:01 EndTime=Unknown"',
    })
    record = cpu_job(tmp_path, capsys)
    code, out, err = run_cli("jobs", "cancel", record["id"], "--json", capsys=capsys)
    cancelled = json.loads(out)["record"]
    assert code == 0 and cancelled["status"] == "cancelled" and cancelled["exit_code"] == 143 and cancelled["ended"]
    assert states.read_text() == "CANCELLED\n"  # it asked until Slurm said the job ended
    assert "scancel 79" in (tmp_path / "calls.log").read_text()


def test_a_controller_that_does_not_answer_leaves_the_record_as_it_was(tmp_path, monkeypatch, capsys):
    down = "echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2; exit 1"
    calls = fake_tools(tmp_path, monkeypatch, {"sbatch": "echo 80", "squeue": down, "scontrol": down, "sacct": NO_ACCOUNTING})
    monkeypatch.setattr(slurm, "RETRIES", (0.0, 0.0))
    record = cpu_job(tmp_path, capsys)
    code, out, err = run_cli("jobs", "status", record["id"], "--json", capsys=capsys)
    assert code == 1 and "Unable to contact slurm controller" in out + err
    assert calls.read_text().count("squeue -h -j 80") == 3  # asked again before giving up
    saved = json.loads(Path(record["outputs"]["job_dir"]).with_suffix(".json").read_text())
    assert saved["status"] == "submitted" and not saved["notes"][-1].startswith("Slurm no longer knows")
