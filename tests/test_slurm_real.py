"""Jobs on a real one-node Slurm 22.05 (tests/slurm_cluster.py starts munged, slurmctld and slurmd for
the session and stops them at the end): `skillbank submit --platform slurm --backend local
--gpus-per-node 0` trains on CPU ranks, `jobs status` follows it through Slurm, `scontrol requeue`
resumes the run from its checkpoint, an AutoML study requeued continues its study, a DEFT loop requeued
between its rounds continues at its round, and `jobs cancel` leaves no process behind.

Everything is real: the CLI in fresh interpreters, sbatch, the rendered script, srun, torchrun ranks,
Optuna on SQLite. A requeued job waits for a BeginTime about two minutes ahead; the tests move it to
now with `scontrol update StartTime=now` (measured: the next attempt starts within ~1 s).
Without Slurm or root these tests skip with the reason; under CI=true they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

import slurm_cluster
from conftest import local_train_spec
from test_deft_loop import bench_dir, make_inputs  # noqa: F401  (fixture)
from helpers import json_out, skillbank
from skillbank.platform import slurm_jobs as slurm_platform
from skillbank.runs import layout


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    reason = slurm_cluster.why_not()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the Slurm tests: {reason}")
        pytest.skip(reason)
    cluster = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()
    left = [*cluster.job_pids(), *cluster.stepds(), *(p for p in cluster.procs if p.poll() is None)]
    assert not left, f"the test Slurm left processes running: {left}"


@pytest.fixture
def env(slurm, tmp_path):
    """The environment of a user on the cluster's submit host."""
    return {**slurm.env, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def submit(spec: Path, env: dict, *extra: str) -> dict:
    what = ("--config", str(spec)) if "deft" in extra else ("--backend", "local", "--spec", str(spec))
    proc = skillbank("submit", "--platform", "slurm", "--gpus-per-node", "0", *what, *extra, "--json", cwd=spec.parent, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    return json_out(proc)["record"]


def status(job_id: str, env: dict) -> dict:
    proc = skillbank("jobs", "status", job_id, "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json_out(proc)["record"]


def wait_for(what: str, check, timeout: float, slurm, job: str, *, every: float = 0.2, log: str | None = None):
    """Poll `check` until it returns something true; a job that ended first (unless its end is what is
    awaited) or the deadline fails the test with Slurm's view and the tail of the job's output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if log is not None and settled(slurm, job):
            value = check()  # what is awaited may have come with the end (or be the end itself)
            if value:
                return value
            break
        time.sleep(every)
    tail = "".join(Path(log).read_text(errors="replace").splitlines(keepends=True)[-40:]) if log and Path(log).is_file() else ""
    raise AssertionError(f"no {what}: scontrol: {slurm.job(job).get('JobState')}\n{tail}")


def requeue_now(slurm, job: str) -> None:
    """`scontrol requeue`, then move the BeginTime Slurm sets (~2 minutes ahead) to now."""
    slurm.run("scontrol", "requeue", job)
    wait_for("pending state after the requeue", lambda: slurm.job(job).get("JobState") == "PENDING", 60, slurm, job)
    slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now")


def cmdlines(slurm, job: str) -> list[str]:
    out = []
    for proc in slurm.job_pids(job):
        try:
            out.append(" ".join(proc.cmdline()))
        except Exception:  # noqa: BLE001 - it ended meanwhile
            pass
    return out


def freeze_training(slurm, job: str) -> list[str]:
    """SIGSTOP the job's `skillbank train` process and its children (the ranks; not the batch shell, srun or the attempt
    hook): the attempt makes no progress until Slurm ends it. Returns their command lines."""
    import signal

    frozen = []
    for proc in slurm.job_pids(job):
        try:
            argv = proc.cmdline()
            if "train" not in argv or "attempt" in argv or Path(argv[0]).name in ("bash", "sh", "srun"):
                continue
            for one in [*proc.children(recursive=True), proc]:
                one.send_signal(signal.SIGSTOP)
                frozen.append(" ".join(one.cmdline()))
        except Exception:  # noqa: BLE001 - it ended meanwhile
            pass
    return frozen


def settled(slurm, job: str) -> dict | None:
    info = slurm.job(job)
    return info if info.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") else None


def test_cpu_job_requeued_mid_run_resumes_from_its_checkpoint_and_completes(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """2 CPU ranks, 12 steps, a checkpoint every 2: requeued right after the first checkpoint, the second
    attempt continues the same run folder from it; `jobs status` records the end Slurm reports."""
    spec = tmp_path / "train.yaml"
    spec.write_text(yaml.safe_dump(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.epoch": 2, "train.ckpt.save_freq": 2, "train.ckpt.max_keep": 20, "validation.enable": False,
    })))
    t0 = time.monotonic()
    record = submit(spec, env)
    script = Path(record["script"]).read_text()
    assert "--gpus-per-node" not in script and "--exclusive" not in script and "#SBATCH --cpus-per-task=2" in script
    assert record["gpus_per_node"] == 0 and record["status"] == "submitted"
    job = record["external_id"]

    log = record["outputs"]["log"]
    first = wait_for("first checkpoint", lambda: layout.newest_complete_checkpoint(record["outputs"]["run_dir"]), 120, slurm, job, every=0.1, log=log)
    requeue_now(slurm, job)
    t_requeue = time.monotonic()
    seen = status(record["id"], env)
    assert seen["status"] in ("submitted", "running"), (seen, slurm.job(job), Path(log).read_text()[-3000:])

    end = wait_for("end of the job", lambda: settled(slurm, job), 150, slurm, job, every=0.5, log=log)
    assert end["JobState"] == "COMPLETED", Path(log).read_text()[-3000:]
    done = status(record["id"], env)
    assert done["status"] == "succeeded" and done["exit_code"] == 0 and done["ended"] and done["started"]
    assert any("requeued by Slurm 1 time(s)" in n for n in done["notes"])
    assert [a.get("why_ended") for a in done["attempts"]] == ["requeued_by_hand", None], done["attempts"]  # scontrol requeue, no signal
    run = Path(done["outputs"]["run_dir"])
    runs = layout.run_dirs(run.parent)
    assert runs == [run] and run.parent.name == record["id"], runs  # the requeue continued the run, no new one; its run root is the job's
    assert str(run) == str(layout.job_run_dir(tmp_path / "out", record["id"]))  # where the record said, fixed at submit
    assert json.loads((run / "result.json").read_text())["status"] == "succeeded" and (run / "tensorboard").is_dir()
    assert [a["attempt"] for a in done["attempts"]] == [0, 1] and done["attempts"][-1]["status"] == "succeeded"  # node.json, merged
    first_step = layout.step_of(first)
    log = (run / "train.log").read_text()
    resumed = re.search(r"Resumed from step (\d+)/12", log)
    assert resumed and first_step <= int(resumed.group(1)) < 12, log[-2000:]  # mid-run, from a checkpoint
    assert layout.list_checkpoint_steps(run)[-1] == 12
    assert [r["step"] for r in layout.read_metrics(run) if "loss" in r] == list(range(1, 13))
    out = skillbank("jobs", "logs", record["id"], "--tail", "400", env=env).stdout
    assert f"job {job} attempt 0" in out and f"job {job} attempt 1" in out
    assert not slurm.job_pids(job)
    print(f"\nslurm cpu job: submit->first checkpoint (step {first_step}) {t_requeue - t0:.1f} s, "
          f"requeue->completed {time.monotonic() - t_requeue:.1f} s")


def test_automl_study_requeued_continues_then_cancel_leaves_no_process(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """A study as a Slurm job: requeued after its first finished trial, the next attempt keeps it and
    goes on with the next trial numbers; `jobs cancel` during that trial ends every process of the job."""
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.max_num_steps": 1, "train.train_batch_per_replica": 1, "validation.enable": False,
    }, dp_shard_size=1)))
    record = submit(spec, env, "--action", "automl", "--max-trials", "6", "--algorithm", "random", "--metric", "loss",
                    "--param", "train.optm_lr", "--range", "train.optm_lr=1e-4:1e-3")
    job = record["external_id"]
    db = Path(record["outputs"]["study_dir"]) / "study.db"
    log = record["outputs"]["log"]

    def trials() -> list[tuple[int, str]]:
        if not db.is_file():
            return []
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
                return con.execute("SELECT number, state FROM trials ORDER BY number").fetchall()
        except sqlite3.Error:
            return []

    finished = ("COMPLETE", "PRUNED")  # both count toward --max-trials and are kept by a resume
    wait_for("finished trial", lambda: any(s in finished for _, s in trials()), 150, slurm, job, every=0.5, log=log)
    before = trials()
    requeue_now(slurm, job)
    kept = {n: s for n, s in before if s in finished}
    wait_for("trial of the second attempt", lambda: max((n for n, _ in trials()), default=-1) > max(n for n, _ in before), 120, slurm, job,
             every=0.5, log=log)
    wait_for("training in the second attempt", lambda: any("skillbank.training.local.torchrun" in cmd for cmd in cmdlines(slurm, job)), 60, slurm, job, log=log)
    assert slurm_platform.leftovers(record["id"])  # the job's processes carry its SKILLBANK_JOB_ID
    after = dict(trials())
    assert all(after[n] == state for n, state in kept.items())  # the study kept what the first attempt finished

    proc = skillbank("jobs", "cancel", record["id"], "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cancelled = json_out(proc)["record"]
    assert cancelled["status"] == "cancelled" and cancelled["ended"]
    assert not slurm.job_pids(job), [p.cmdline() for p in slurm.job_pids(job)]  # nothing of the job left
    assert not slurm_platform.leftovers(record["id"])
    assert slurm.job(job)["JobState"] == "CANCELLED"
    assert status(record["id"], env)["status"] == "cancelled"  # the final state stays in the record
    out = skillbank("jobs", "logs", record["id"], "--tail", "400", env=env).stdout
    assert f"job {job} attempt 1" in out


def sbatch_by_hand(folder: Path, env: dict) -> str:
    """`cd <job folder> && sbatch job.sbatch`, as a person does with a rendered folder."""
    import subprocess

    proc = subprocess.run(["sbatch", "--parsable", "job.sbatch"], cwd=folder, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().split(";")[0]


def test_a_hand_submitted_job_is_attached_waited_for_and_a_folder_copied_alone_is_attached_and_cancelled(
        slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """`submit --dry-run`, then `sbatch job.sbatch` by hand: `jobs attach --slurm-id N --job-dir DIR` records it and
    `jobs wait` returns 0 when Slurm says COMPLETED. The same folder copied elsewhere alone (no record beside it),
    sbatch'ed there and attached by its folder (the id read from slurm-<N>.out): `jobs cancel` ends it, `jobs wait` says 1."""
    spec = tmp_path / "train.yaml"
    spec.write_text(yaml.safe_dump(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.max_num_steps": 1, "train.train_batch_per_replica": 1, "validation.enable": False, "train.ckpt.save_freq": 1,
    }, dp_shard_size=1)))
    rendered = submit(spec, env, "--dry-run")
    folder = Path(rendered["outputs"]["job_dir"])
    copied = tmp_path / "elsewhere" / "job-copy"
    import shutil

    shutil.copytree(folder, copied)
    t0 = time.monotonic()
    job = sbatch_by_hand(folder, env)
    proc = skillbank("jobs", "attach", "--slurm-id", job, "--job-dir", str(folder), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    attached = json_out(proc)["record"]
    assert attached["id"] == rendered["id"] and attached["external_id"] == job and not attached["dry_run"]
    assert attached["status"] in ("submitted", "running") and attached["outputs"]["log"] == str(folder / f"slurm-{job}.out")
    proc = skillbank("jobs", "wait", rendered["id"], "--timeout", "240", "--json", env=env, timeout=300)
    done = json_out(proc)
    assert proc.returncode == 0 and done["outcome"] == "succeeded", (done, Path(attached["outputs"]["log"]).read_text()[-3000:])
    assert done["record"]["exit_code"] == 0 and done["record"]["ended"] and slurm.job(job).get("JobState") == "COMPLETED"
    assert layout.newest_complete_checkpoint(rendered["outputs"]["run_dir"])
    assert f"job {job} attempt 0" in skillbank("jobs", "logs", rendered["id"], "--tail", "400", env=env).stdout
    t_first = time.monotonic() - t0

    other = sbatch_by_hand(copied, env)
    wait_for("the copied job's output", lambda: (copied / f"slurm-{other}.out").is_file(), 60, slurm, other)
    proc = skillbank("jobs", "attach", str(copied), "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    second = json_out(proc)
    assert second["record"]["external_id"] == other and second["record_path"] == str(copied.parent / f"{rendered['id']}.json")
    assert any("built from" in n for n in second["record"]["notes"])  # no record beside the copy: job.json told what it is
    proc = skillbank("jobs", "cancel", rendered["id"], "--json", env=env)
    assert proc.returncode == 0 and json_out(proc)["record"]["status"] == "cancelled", proc.stderr[-2000:]
    proc = skillbank("jobs", "wait", rendered["id"], "--json", env=env)
    assert proc.returncode == 1 and json_out(proc)["outcome"] == "cancelled"
    assert not slurm.job_pids(other) and not slurm_platform.leftovers(rendered["id"])
    print(f"\nslurm attach: sbatch by hand -> attach -> wait succeeded {t_first:.1f} s")


def test_deft_loop_as_a_job_requeued_between_rounds_continues_at_its_round(slurm, env, tiny_model_dir, demo_dataset_dir, bench_dir, tmp_path):
    """`submit --action deft`: two tiny rounds (2 steps each, 4 records mined a round) as one CPU job; requeued
    once round 1 is decided, the second attempt (`skillbank deft --resume`) keeps round 0 and round 1 as they
    were and runs round 2 to the stop."""
    config = make_inputs(tmp_path, tiny_model_dir, demo_dataset_dir, bench_dir, {"mining": {"k": 4, "records_per_round": 4, "batch_size": 8}},
                         train={"train.max_num_steps": 2})
    out = tmp_path / "out"
    t0 = time.monotonic()
    record = submit(config, env, "--action", "deft")
    assert record["action"] == "deft" and record["outputs"]["deft_dir"] == str(out) and Path(record["outputs"]["job_dir"]).parent == out / "jobs"
    job, log = record["external_id"], record["outputs"]["log"]

    def stage(name: str) -> str | None:
        try:
            return json.loads((out / "state.json").read_text())["stages"].get(name, {}).get("status")
        except (OSError, ValueError):
            return None

    wait_for("round 1 decided", lambda: stage("round_1/decide") == "done", 600, slurm, job, every=0.2, log=log)
    requeue_now(slurm, job)
    t_requeue = time.monotonic()
    end = wait_for("end of the job", lambda: settled(slurm, job), 600, slurm, job, every=0.5, log=log)
    assert end["JobState"] == "COMPLETED", Path(log).read_text()[-3000:]
    done = status(record["id"], env)
    assert done["status"] == "succeeded" and any("requeued by Slurm 1 time(s)" in n for n in done["notes"])
    state = json.loads((out / "state.json").read_text())
    assert state["status"] == "done" and state["stop"]["reason"] == "max_rounds" and [r["round"] for r in state["rounds"]] == [0, 1, 2]
    before = [k for k in state["stages"] if k.startswith(("round_0/", "round_1/"))]
    assert len(before) == 7 and all(state["stages"][k]["attempts"] == 1 for k in before)  # the second attempt redid none of them
    events = [json.loads(line)["event"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert events.count("start") == 1 and events.count("resume") == 1
    spec = yaml.safe_load((out / "round_2" / "train" / "train.yaml").read_text())
    assert spec["policy"]["parallelism"]["dp_shard_size"] == 1 and spec["policy"]["parallelism"]["dp_replicate_size"] == 1  # the job's node
    text = skillbank("jobs", "logs", record["id"], "--tail", "2000", env=env).stdout
    assert f"job {job} attempt 0" in text and f"job {job} attempt 1" in text and "stopped: max_rounds" in text
    proc = skillbank("jobs", "status", record["id"], "--json", env=env)
    loop = json_out(proc)["deft"]
    assert loop["ok"] and loop["status"] == "done" and loop["stop"]["reason"] == "max_rounds" and not loop["running"]
    assert not slurm.job_pids(job) and not slurm_platform.leftovers(record["id"])
    print(f"\nslurm deft job: submit->round 1 decided {t_requeue - t0:.1f} s, requeue->completed {time.monotonic() - t_requeue:.1f} s")


def standin_venv(tmp_path: Path) -> Path:
    """A Python environment for the job whose bin/ holds the cosmos-rl stand-in (tests/cosmos_rl_standin.py: cosmos-rl's
    SFT trainer is CUDA-only, so it cannot run here; the stand-in replays cosmos-rl 0.4.7's log text and outputs),
    nvidia-smi and redis-server stand-ins, and `python`: this interpreter (skillbank, torch: evaluate runs for real)."""
    import sys

    import cosmos_rl_standin

    venv = tmp_path / "job-venv"
    cosmos_rl_standin.install(venv / "bin")
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    return venv


def cosmos_site(tmp_path: Path, tiny_model_dir: Path, demo_dataset_dir: Path, steps: int, save_freq: int) -> Path:
    """A site folder with a spec whose output_dir is relative (./out): the job folder keeps it relative."""
    site = tmp_path / "site"
    site.mkdir()
    spec = local_train_spec(tiny_model_dir, demo_dataset_dir, site / "out", {
        "train.max_num_steps": steps, "train.ckpt.save_freq": save_freq, "train.ckpt.enable_checkpoint": True, "train.output_dir": "./out",
    })
    spec.pop("results_dir")
    (site / "train.yaml").write_text(yaml.safe_dump(spec))
    return site / "train.yaml"


def submit_cosmos(spec: Path, env: dict) -> dict:
    proc = skillbank("submit", "--platform", "slurm", "--backend", "cosmos-rl", "--gpus-per-node", "2", "--spec", str(spec), "--json",
                     cwd=spec.parent, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    return json_out(proc)["record"]


def test_a_cosmos_rl_job_is_watched_like_skillbank_train_then_evaluated_and_reported(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """A cosmos-rl job on the real one-node Slurm (GPUs as generic resources, no device behind them): its launcher is
    the stand-in named cosmos-rl first on the job's PATH, replaying real cosmos-rl 0.4.7 log text (the GPU-only engine
    cannot run here). Node 0's `skillbank train` watches it: the run folder the record names holds metrics.jsonl, tensorboard/,
    result.json (the final validation at the final step) and the recipe in its export; `jobs wait --json` carries the
    progress; `evaluate --run` reads the recipe and really evaluates the export (the tiny model's weights); `report --run`
    draws the curves."""
    spec = cosmos_site(tmp_path, tiny_model_dir, demo_dataset_dir, steps=4, save_freq=4)
    env = {**env, "SKILLBANK_VENV": str(standin_venv(tmp_path)), "STANDIN_STEP_S": "0.5"}
    t0 = time.monotonic()
    record = submit_cosmos(spec, env)
    run = Path(record["outputs"]["run_dir"])
    assert run == layout.job_run_dir(spec.parent / "out", record["id"]) and record["outputs"]["cosmos_log_dir"] == str(run / "cosmos-rl-logs")
    assert "output_dir: ./out" in (Path(record["outputs"]["job_dir"]) / "spec.yaml").read_text()  # kept relative: the site moves with it
    proc = skillbank("jobs", "wait", record["id"], "--timeout", "240", "--json", env=env, timeout=300)
    done = json_out(proc)
    log = Path(done["record"]["outputs"]["log"])
    assert proc.returncode == 0 and done["outcome"] == "succeeded", (done["progress"], log.read_text()[-4000:])
    progress = done["progress"]
    assert (progress["state"], progress["last_step"], progress["total_steps"], progress["last_val_step"], progress["val_at_final_step"]) == (
        "succeeded", 4, 4, 4, True)
    assert progress["last_complete_checkpoint"] == str(layout.checkpoint_dir(run, 4)) and progress["export"] == str(layout.safetensors_dir(run, 4))
    assert [a["attempt"] for a in progress["attempts"]] == [0] and progress["attempts"][0]["status"] == "succeeded"
    t_job = time.monotonic() - t0
    rows = layout.read_metrics(run)
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4] and all(r["total_steps"] == 4 and "time" in r for r in rows)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "succeeded" and result["val_at_final_step"] and result["last_val_loss"] == rows[-1]["val_loss"]
    assert any((run / "tensorboard").iterdir())
    recipe = json.loads((layout.safetensors_dir(run, 4) / "skillbank_recipe.json").read_text())
    assert recipe["steps_trained"] == 4 and recipe["base_model"] == str(tiny_model_dir)
    assert "final validation loss" in log.read_text() and "at the final step" in log.read_text()

    proc = skillbank("evaluate", "--run", str(run), "--quiet", "--json", cwd=spec.parent, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    evaluated = json_out(proc)
    metrics = json.loads(Path(evaluated["metrics_json"]).read_text())
    assert evaluated["step"] == 4 and metrics["recipe"] == str(layout.safetensors_dir(run, 4) / "skillbank_recipe.json")
    assert metrics["settings_from"]["vision.fps"] == "recipe" and metrics["total"] == 9  # the export really evaluated, read as trained
    proc = skillbank("report", "--run", str(run), "--out", str(tmp_path / "report"), "--json", env=env)
    shown = json_out(proc)["sections"]
    assert proc.returncode == 0 and shown["training"]["shown"] and shown["recipe"]["shown"]
    assert (tmp_path / "report" / "training.png").stat().st_size > 1000
    print(f"\nslurm cosmos-rl job (stand-in launcher): submit -> succeeded {t_job:.1f} s")


def test_a_cancelled_cosmos_rl_job_is_diagnosed_as_cancelled(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """`jobs cancel` mid-run, then `jobs diagnose` on the job id, its job folder, its run folder and a node's log folder:
    cancelled (exit 3) from the record, whatever the logs say, and --stale-after 0 blames no time limit or OOM killer."""
    spec = cosmos_site(tmp_path, tiny_model_dir, demo_dataset_dir, steps=40, save_freq=2)
    env = {**env, "SKILLBANK_VENV": str(standin_venv(tmp_path)), "STANDIN_STEP_S": "1.0"}
    record = submit_cosmos(spec, env)
    run = Path(record["outputs"]["run_dir"])
    wait_for("first checkpoint", lambda: layout.newest_complete_checkpoint(run) if run.is_dir() else None, 120, slurm, record["external_id"],
             log=str(Path(record["outputs"]["job_dir"]) / f"slurm-{record['external_id']}.out"))
    proc = skillbank("jobs", "diagnose", record["id"], "--json", env=env)
    assert proc.returncode == 0 and json_out(proc)["state"] == "running", proc.stdout[-2000:]
    proc = skillbank("jobs", "cancel", record["id"], "--json", env=env)
    assert proc.returncode == 0 and json_out(proc)["record"]["status"] == "cancelled", proc.stderr[-2000:]
    for target in (record["id"], record["outputs"]["job_dir"], str(run), str(run / "cosmos-rl-logs" / "node_0")):
        proc = skillbank("jobs", "diagnose", target, "--stale-after", "0", "--json", env=env)
        diag = json_out(proc)
        assert proc.returncode == 3 and diag["state"] == "cancelled", (target, diag)
        assert diag["job_id"] == record["id"] and "time limit" not in (diag["cause"] or "") and diag["last_complete_checkpoint"]
        assert diag["scheduler"]["state"] == "CANCELLED" and diag["last_step"] >= 2
    text = skillbank("jobs", "diagnose", str(run / "cosmos-rl-logs"), env=env).stdout
    print("\njobs diagnose after jobs cancel:\n" + text)
    assert "state      : cancelled" in text and "scheduler  : CANCELLED (scontrol)" in text
    assert not slurm.job_pids(record["external_id"])


def test_a_grpo_job_is_watched_on_slurm_like_an_sft_job(slurm, env, tmp_path):
    """`submit --action rl --backend cosmos-rl` on the real one-node Slurm (GPUs as generic resources, the stand-in launcher
    replaying cosmos-rl 0.4.7's GRPO controller lines, a vllm stub for the env check: the GPU-only engine cannot run here):
    node 0 runs `skillbank rl --launch` under the log watcher; `jobs wait --json` carries the rewards' run to its end and the
    run folder holds metrics.jsonl with reward rows, result.json and the recipe in the export."""
    from test_grpo_watch import run_rl_job
    from test_rl_command import write_case

    spec = write_case(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["policy"]["parallelism"]["dp_shard_size"], data["rollout"]["num_gpus"], data["rollout"]["parallelism"]["tp_size"] = 1, 1, 1
    spec.write_text(yaml.safe_dump(data))  # one policy GPU + one rollout GPU: the test node's 2
    env = {**env, "SKILLBANK_VENV": str(standin_venv(tmp_path)), "STANDIN_STEP_S": "0.2"}
    t0 = time.monotonic()
    record, proc, done = run_rl_job(spec, env, platform="slurm", gpus=2)
    log = Path(done["record"]["outputs"]["log"])
    assert proc.returncode == 0 and done["outcome"] == "succeeded", (done.get("progress"), log.read_text()[-4000:])
    progress, run = done["progress"], Path(record["outputs"]["run_dir"])
    assert progress["state"] == "succeeded" and progress["last_step"] == progress["total_steps"] > 0, progress
    rows = [r for r in layout.read_metrics(run) if "reward_mean" in r]
    assert [r["step"] for r in rows] == list(range(1, progress["total_steps"] + 1)), rows
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "succeeded" and result["last_reward_mean"] is not None
    assert (Path(progress["export"]) / "skillbank_recipe.json").is_file() and (run / "tensorboard").is_dir()
    assert "skillbank rl --launch" in (Path(record["outputs"]["job_dir"]) / "cosmos-node.sh").read_text().replace("-m skillbank.cli rl", "skillbank rl")
    assert not slurm.job_pids(record["external_id"])
    print(f"\nslurm grpo job (stand-in launcher): submit -> succeeded {time.monotonic() - t0:.1f} s, {len(rows)} reward rows, "
          f"last reward mean {result['last_reward_mean']}")


def test_a_job_past_its_time_limit_requeues_itself_and_resumes_without_repeating_steps(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """`--time 00:02:00` on a run longer than that: Slurm signals the batch shell 30 s before the limit (--signal=B:USR1@30),
    the trap requeues the same job id, the next attempt resumes from the run's newest complete checkpoint, and the job
    completes. Steps run again only after the checkpoint an attempt resumed from; `jobs status` counts the attempts and
    says why each ended. The first attempt outlasts its limit on any machine: once it has written its first checkpoint the
    test freezes its training processes (SIGSTOP; Slurm's own kill after the requeue ends them), so whether 192 steps take
    15 s or 5 min, attempt 0 ends at the limit (its step count varies, not its end). Later attempts run as they are: each
    trains ~1 min of its 2 (192 steps, one CPU rank: ~1 min on a quiet 2-core machine, so 2 attempts; a loaded one takes more)."""
    total = 192
    spec = tmp_path / "train.yaml"
    spec.write_text(yaml.safe_dump(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.epoch": 16, "train.ckpt.save_freq": 8, "train.ckpt.max_keep": 4, "validation.enable": False,
    }, dp_shard_size=1)))  # 192 steps, a checkpoint every 8
    t0 = time.monotonic()
    record = submit(spec, env, "--time", "00:02:00")
    script = Path(record["script"]).read_text()
    assert "#SBATCH --signal=B:USR1@30" in script and "#SBATCH --time=00:02:00" in script and "trap on_usr1 USR1" in script
    job, log = record["external_id"], record["outputs"]["log"]
    run = Path(record["outputs"]["run_dir"])
    wait_for("first checkpoint", lambda: layout.newest_complete_checkpoint(run) if run.is_dir() else None, 600, slurm, job, every=0.1, log=log)
    frozen = freeze_training(slurm, job)
    assert frozen, cmdlines(slurm, job)
    moved: set[str] = set()

    def ended() -> dict | None:
        info = slurm.job(job)
        restarts = info.get("Restarts", "0")
        if info.get("JobState") == "PENDING" and restarts != "0" and restarts not in moved:  # skip the requeue's ~2 min BeginTime
            moved.add(restarts)
            slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now", check=False)
        return settled(slurm, job)

    end = wait_for("end of the job", ended, 2400, slurm, job, every=1.0, log=log)
    wall = time.monotonic() - t0
    assert end["JobState"] == "COMPLETED", Path(log).read_text()[-3000:]
    done = status(record["id"], env)
    attempts = done["attempts"]
    assert done["status"] == "succeeded" and len(attempts) >= 2 and int(end["Restarts"]) == len(attempts) - 1, attempts
    assert all(a["why_ended"] == "time_limit" and a["status"] == "requeued" for a in attempts[:-1]), attempts
    assert Path(done["outputs"]["run_dir"]) == run
    rows = [r["step"] for r in layout.read_metrics(run) if "loss" in r]  # a resume drops the killed attempt's rows past its checkpoint
    assert rows == list(range(1, total + 1)) and layout.list_checkpoint_steps(run)[-1] == total
    for before, after in zip(attempts, attempts[1:]):  # each attempt starts from the newest checkpoint the previous one left
        assert after["checkpoint_at_start"] >= before["checkpoint_at_end"] is not None, attempts
    text = (run / "train.log").read_text()  # every attempt's lines, appended
    resumed = [int(s) for s in re.findall(rf"Resumed from step (\d+)/{total}", text)]
    assert resumed == [a["checkpoint_at_start"] for a in attempts[1:]], resumed
    ran = [int(s) for s in re.findall(rf"Step: (\d+)/{total},", text)]  # each step each attempt trained
    restarts = [step for i, step in enumerate(ran) if i and step <= ran[i - 1]]
    assert all(step - 1 in resumed for step in restarts), (ran, resumed)  # a step runs again only after the checkpoint its attempt resumed from
    repeated = len(ran) - total
    out = skillbank("jobs", "status", record["id"], env=env).stdout
    assert f"attempts: {len(attempts)}" in out and "0: time_limit" in out
    print(f"\nslurm time limit: --time 00:02:00, {len(attempts)} attempts, {len(ran)} steps run for {total} ({repeated} repeated after a "
          f"checkpoint), resumed from steps {resumed}, wall {wall:.0f} s")


def test_an_exclusion_is_checked_against_the_real_sinfo_and_the_partition_limit_is_read(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """--exclude of the cluster's only node is refused (it would empty the partition); a name sinfo does not list is dropped
    with a note; the partition's MaxTime (INFINITE here) caps nothing."""
    spec = tmp_path / "train.yaml"
    spec.write_text(yaml.safe_dump(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {"validation.enable": False}, dp_shard_size=1)))
    proc = skillbank("submit", "--platform", "slurm", "--backend", "local", "--gpus-per-node", "0", "--spec", str(spec), "--dry-run",
                     "--exclude", slurm.node, "--json", cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == 2 and f"excluding {slurm.node} leaves 0 of 1 node(s)" in proc.stdout + proc.stderr, proc.stdout[-2000:]
    record = submit(spec, env, "--dry-run", "--exclude", "gpu-99")
    assert "--exclude" not in Path(record["script"]).read_text() and any("gpu-99 not in" in n for n in record["notes"])
    assert any("not capped: partition debug has no time limit" in n for n in record["notes"]), record["notes"]


def test_a_spec_fitted_to_a_sample_is_refitted_on_the_node_and_the_record_says_so(slurm, env, tiny_model_dir, demo_dataset_dir, tmp_path):
    """The spec's batch was fitted to a 24-record sample on a laptop (its fitted block, as `skillbank spec --path-map`
    writes it); the node has the full file (96 records). Node 0's `skillbank train` fits it again to the files where it
    runs: the ceiling comes back (1 -> 8), the TOML it renders uses it, and `jobs wait --json` shows the change
    (record `fitted`, where node) and the run's progress. The cosmos-rl launcher is the stand-in (the engine is GPU-only)."""
    full = tmp_path / "full" / "train" / "annotations.json"
    full.parent.mkdir(parents=True)
    sample = json.loads((demo_dataset_dir / "train" / "annotations.json").read_text())
    full.write_text(json.dumps([{**r, "id": f"{r['id']}-{i}"} for i in range(4) for r in sample]))  # the node's file: 4 x the sample
    spec = cosmos_site(tmp_path, tiny_model_dir, demo_dataset_dir, steps=4, save_freq=4)
    data = yaml.safe_load(spec.read_text())
    data["custom"]["train_dataset"]["annotation_path"] = str(full)
    data["train"]["train_batch_per_replica"] = 1
    data["fitted"] = {"records": len(sample), "counted": "/laptop/sample/train/annotations.json", "ceilings": {"train.train_batch_per_replica": 8}}
    spec.write_text(yaml.safe_dump(data))
    env = {**env, "SKILLBANK_VENV": str(standin_venv(tmp_path)), "STANDIN_STEP_S": "0.3"}
    record = submit_cosmos(spec, env)
    proc = skillbank("jobs", "wait", record["id"], "--timeout", "240", "--json", env=env, timeout=300)
    done = json_out(proc)
    log = Path(done["record"]["outputs"]["log"]).read_text()
    assert proc.returncode == 0 and done["outcome"] == "succeeded", log[-4000:]
    node = [(f["key"], f["from"], f["to"], f["records"]) for f in done["record"]["fitted"] if f["where"] == "node"]
    assert ("train.train_batch_per_replica", 1, 8, 4 * len(sample)) in node, done["record"]["fitted"]
    assert "refit: train.train_batch_per_replica 1 -> 8" in log
    run = Path(record["outputs"]["run_dir"])
    import tomllib

    assert tomllib.loads((run / layout.TOML_FILE).read_text())["train"]["train_batch_per_replica"] == 8
    assert yaml.safe_load((Path(record["outputs"]["job_dir"]) / "spec.yaml").read_text())["train"]["train_batch_per_replica"] == 1  # the copy untouched
    print("\nnode refit (before -> after):", *(f"  {k}: {a} -> {b} ({n} records on the node)" for k, a, b, n in node), sep="\n")
    print("jobs wait --json progress:", json.dumps(done["progress"], indent=1))
    print("metrics.jsonl head:", *(run / "metrics.jsonl").read_text().splitlines()[:3], sep="\n  ")
    print("result.json:", (run / "result.json").read_text())
    recipe = json.loads((layout.safetensors_dir(run, 4) / "skillbank_recipe.json").read_text())
    print("recipe keys in safetensors/step_4:", sorted(recipe)[:20])
