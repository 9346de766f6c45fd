"""Jobs that travel, and following them: a local job folder moved anywhere runs (a real tiny CPU training),
finds skillbank through SKILLBANK_VENV, then `skillbank` on PATH, then the rendering machine's interpreter and
says which; its spec copy names every path absolute; `jobs wait` returns on the job's end with its documented
exit code; `jobs attach` refuses what it cannot follow (the real Slurm attach is in tests/test_slurm_real.py).

The moved-folder run is real end to end (the CLI, the rendered command.sh under bash, preflight, torchrun, the
tiny model on the demo data). The SKILLBANK_VENV and PATH branches use stand-in executables that log their
argv (which skillbank was chosen is all they prove; the real run proves the command works). The local jobs
waited for run detached under the real platform runner with a small python program as the train command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import local_train_spec
from skillbank import cli
from skillbank.runs import layout
from test_platform import _env, _fake_train, fake_tools, run_cli, submit_json, write_spec  # noqa: F401  (fixture: autouse _env, preflight stubbed at submit)

ROOT = Path(__file__).resolve().parents[1]


def bash(script: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run a rendered script as a person would elsewhere: another working directory, no SKILLBANK_* hints."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLBANK_VENV", "SKILLBANK_JOB_DIR", "CUDA_VISIBLE"))}
    return subprocess.run(["bash", str(script)], cwd=cwd, capture_output=True, text=True, env=base | env, timeout=300)


def stand_in(path: Path, log: Path) -> Path:
    """An executable that logs `<its path> <argv>` and succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/usr/bin/env bash\necho "$0 $*" >> {log}\n')
    path.chmod(0o755)
    return path


# --- a local job folder that travels -------------------------------------------------------------


def test_a_moved_local_job_folder_runs_a_real_cpu_training(tiny_model_dir, demo_dataset_dir, tmp_path, monkeypatch, capsys):
    """submit --dry-run --gpus-per-node 0 with relative paths (and the relative default results_dir), move the whole
    site with its job folder, run its command.sh from another directory: it trains on CPU inside the moved site (the
    spec copy keeps its paths relative: they start at the submit directory, found from the job folder), into the run
    folder the record names; an absolute path missing where the job runs is named by the first step, not created."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "data").symlink_to(demo_dataset_dir)
    (proj / "model").symlink_to(tiny_model_dir)
    spec = local_train_spec(Path("model"), Path("data"), Path("out"), {
        "train.max_num_steps": 1, "train.train_batch_per_replica": 1, "validation.enable": False, "train.ckpt.save_freq": 1,
    }, dp_shard_size=1)
    del spec["results_dir"]  # the default ./results, relative too
    (proj / "train.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(proj)
    code = cli.main(["submit", "--platform", "local", "--backend", "local", "--gpus-per-node", "0", "--spec", "train.yaml", "--dry-run", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err + out.out
    record = json.loads(out.out)["record"]
    job_dir = Path(record["outputs"]["job_dir"])
    assert job_dir.parent == proj / "results" / "jobs" and record["gpus_per_node"] == 0
    assert record["outputs"]["run_dir"] == str(layout.job_run_dir(proj / "out", record["id"]))  # fixed at submit
    assert (job_dir / "spec.yaml").read_text() == (proj / "train.yaml").read_text()  # relative paths kept, byte for byte
    assert (proj / "train.yaml").read_text() == yaml.safe_dump(spec)  # the input is untouched

    site = tmp_path / "elsewhere" / "site"
    site.parent.mkdir()
    shutil.move(str(proj), site)
    moved = site / "results" / "jobs" / record["id"]
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    t0 = time.monotonic()
    done = bash(moved / "command.sh", nowhere, PATH="/usr/bin:/bin")  # no skillbank on PATH, no SKILLBANK_VENV
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"skillbank: using the rendering machine's environment ({sys.executable})" in done.stderr
    run = layout.job_run_dir(site / "out", record["id"])  # inside the moved site, not the old one
    assert not proj.exists() and (run / "checkpoints" / "step_1").is_dir()
    assert [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r] == [1]
    assert json.loads((run / "result.json").read_text())["status"] == "succeeded"
    assert sorted(p.name for p in moved.iterdir()) == sorted(["command.sh", "spec.yaml", "job.json", "node.json"])  # + the attempt the run recorded
    [attempt] = json.loads((moved / "node.json").read_text())["attempts"]
    assert attempt["status"] == "succeeded" and attempt["run_dir"] == str(run)
    assert not any(nowhere.iterdir())  # nothing where it was started from

    # An absolute path that does not exist where the job runs: the first step names it, nothing is created.
    copy = yaml.safe_load((moved / "spec.yaml").read_text())
    copy["train"]["output_dir"] = str(tmp_path / "gone" / "out")
    (moved / "spec.yaml").write_text(yaml.safe_dump(copy))
    done = bash(moved / "command.sh", nowhere, PATH="/usr/bin:/bin")
    assert done.returncode == 2 and "env.paths" in done.stdout + done.stderr and "train.output_dir" in done.stdout + done.stderr, done.stdout[-2000:]
    assert not (tmp_path / "gone").exists()
    print(f"\nmoved local site: command.sh (preflight + 1 CPU step of the tiny model) {took:.1f} s")


def test_command_sh_finds_skillbank_in_order_and_says_which(tmp_path, monkeypatch, capsys):
    """SKILLBANK_VENV wins over `skillbank` on PATH, which wins over the rendering interpreter; each says so.
    A CPU job hides the GPUs; a folder copied anywhere names its own spec copy."""
    record = submit_json(capsys, "--platform", "local", "--backend", "local", "--gpus-per-node", "0", "--spec", str(write_spec(tmp_path, shard=2)), "--dry-run")["record"]
    moved = tmp_path / "copied" / "job"
    shutil.copytree(record["outputs"]["job_dir"], moved)
    log = tmp_path / "calls.log"
    venv = tmp_path / "venv"
    stand_in(venv / "bin" / "python", log)
    on_path = stand_in(tmp_path / "bin" / "skillbank", log)

    done = bash(moved / "command.sh", tmp_path, PATH=f"{tmp_path / 'bin'}:/usr/bin:/bin", SKILLBANK_VENV=str(venv))
    assert done.returncode == 0, done.stderr
    assert f"skillbank: using SKILLBANK_VENV ({venv})" in done.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith(f"{venv}/bin/python -m skillbank.cli preflight ") and f"--spec {moved}/spec.yaml --only env" in calls[0]
    assert calls[1].startswith(f"{venv}/bin/python -m skillbank.cli train --spec {moved}/spec.yaml --backend local")
    log.unlink()
    done = bash(moved / "command.sh", tmp_path, PATH=f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert done.returncode == 0 and f"skillbank: using skillbank on PATH ({on_path})" in done.stderr
    assert log.read_text().splitlines()[1].startswith(f"{on_path} train --spec {moved}/spec.yaml")
    done = bash(moved / "command.sh", tmp_path, PATH="/usr/bin:/bin", SKILLBANK_VENV=str(tmp_path / "nope"))
    assert done.returncode == 2 and "has no bin/python" in done.stderr
    text = (moved / "command.sh").read_text()
    assert 'cd "$JOB_DIR/../../.."' in text and 'export CUDA_VISIBLE_DEVICES=""' in text  # the submit directory: relative paths start there and str(tmp_path / "data") not in text


def test_a_spec_with_absolute_paths_is_copied_byte_for_byte(tmp_path, capsys, monkeypatch):
    spec = write_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["results_dir"] = str(tmp_path / "results")
    data["train"]["output_dir"] = str(tmp_path / "results" / "train")
    for split in ("train_dataset", "val_dataset"):
        for key, value in data["custom"][split].items():
            data["custom"][split][key] = str(tmp_path / value)
    text = "# my spec\n" + yaml.safe_dump(data)
    spec.write_text(text)
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run")["record"]
    assert Path(record["spec"]["copy_path"]).read_text() == text  # comments kept: nothing to rewrite
    facts = json.loads((Path(record["outputs"]["job_dir"]) / "job.json").read_text())
    assert facts["id"] == record["id"] and facts["platform"] == "slurm" and facts["spec_copy"] == "spec.yaml"
    assert set(facts["outputs"]) == {"train_output_dir", "run_dir", "cosmos_log_dir", "study_dir", "deft_dir"}


# --- jobs wait -----------------------------------------------------------------------------------


def wait_cli(capsys, *argv: str) -> tuple[int, dict, str]:
    code = cli.main(["jobs", "wait", *argv, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


WRITES_METRICS = """
import json, os, re, time
from pathlib import Path
job = os.environ["SKILLBANK_JOB_ID"]
run = Path("results/train") / job / "".join(re.search(r"(\\d{8})-(\\d{6})", job).groups())  # the run folder fixed at submit (runs.layout.job_run_dir)
run.mkdir(parents=True, exist_ok=True)
for step in (1, 2, 3):
    time.sleep(0.6)
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step, "total_steps": 3, "epoch": 1, "loss": 1.0 / step, "time": time.time()}) + "\\n")
with open(run / "metrics.jsonl", "a") as f:
    f.write(json.dumps({"step": 3, "total_steps": 3, "epoch": 1, "val_loss": 0.4, "time": time.time()}) + "\\n")
(run / "result.json").write_text(json.dumps({"status": "succeeded", "reason": "trained 3/3 steps"}))
"""


def test_jobs_status_watch_prints_the_progress_as_it_changes_until_the_end(tmp_path, monkeypatch, capsys):
    """`jobs status --watch --json`: one JSON line each time the status or the run's progress changes, ending with the
    job; `jobs wait --json` carries the same progress (last step of total, losses, the final validation and whether it
    was at the final step, the attempt)."""
    spec = str(write_spec(tmp_path))
    _fake_train(monkeypatch, WRITES_METRICS)
    job = submit_json(capsys, "--platform", "local", "--spec", spec)["record"]
    assert job["outputs"]["run_dir"] == str(layout.job_run_dir(tmp_path / "results" / "train", job["id"]))
    assert cli.main(["jobs", "status", job["id"], "--watch", "--json", "--interval", "0.2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    steps = [d["progress"]["last_step"] for d in lines]
    assert len(lines) >= 3 and lines[-1]["status"] == "succeeded" and steps == sorted(steps, key=lambda s: s or 0), steps
    assert all(set(d) == {"ok", "record_path", "status", "progress", "time"} for d in lines)
    code, doc, _ = wait_cli(capsys, job["id"])
    p = doc["progress"]
    assert code == 0 and (p["state"], p["last_step"], p["total_steps"], p["last_loss"]) == ("succeeded", 3, 3, pytest.approx(1 / 3))
    assert (p["last_val_loss"], p["last_val_step"], p["val_at_final_step"]) == (0.4, 3, True) and len(p["attempts"]) == 1


def test_jobs_wait_returns_with_the_jobs_end_and_its_exit_code(tmp_path, monkeypatch, capsys):
    spec = str(write_spec(tmp_path))
    _fake_train(monkeypatch, "import time; time.sleep(1.0); print('done', flush=True)")
    ok = submit_json(capsys, "--platform", "local", "--spec", spec)["record"]
    code, doc, err = wait_cli(capsys, ok["id"], "--timeout", "60")
    assert code == 0 and doc["ok"] and doc["outcome"] == "succeeded" and doc["record"]["exit_code"] == 0, (doc, err)
    assert f"job {ok['id']}: succeeded" in err  # each change of status on stderr
    assert json.loads(Path(doc["record_path"]).read_text())["status"] == "succeeded"  # written to the record

    _fake_train(monkeypatch, "import sys; sys.exit(5)")
    bad = submit_json(capsys, "--platform", "local", "--spec", spec)["record"]
    code, doc, _ = wait_cli(capsys, bad["id"], "--timeout", "60")
    assert code == 1 and not doc["ok"] and doc["outcome"] == "failed" and doc["record"]["exit_code"] == 5

    _fake_train(monkeypatch, "import time; time.sleep(60)")
    slow = submit_json(capsys, "--platform", "local", "--spec", spec)["record"]
    t0 = time.monotonic()
    code, doc, _ = wait_cli(capsys, slow["id"], "--timeout", "1")
    assert code == 3 and doc["outcome"] == "timeout" and doc["record"]["status"] in ("submitted", "running") and time.monotonic() - t0 < 10
    assert cli.main(["jobs", "cancel", slow["id"]]) == 0
    capsys.readouterr()
    code, doc, _ = wait_cli(capsys, slow["id"])
    assert code == 1 and doc["outcome"] == "cancelled"

    code, doc, _ = wait_cli(capsys, "train-20990101-000000-abcdef")
    assert code == 2 and doc["ok"] is False and "no job record" in doc["error"]["message"]
    rendered = submit_json(capsys, "--platform", "slurm", "--spec", spec, "--dry-run")["record"]
    code, doc, _ = wait_cli(capsys, rendered["id"], "--results-dir", str(tmp_path / "results"))
    assert code == 2 and "only rendered" in doc["error"]["message"] and "jobs attach" in doc["error"]["fix"]
    code = cli.main(["jobs", "wait", ok["id"]])  # the human form: the record, no JSON
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"job {ok['id']}: succeeded on local")


def test_jobs_wait_on_slurm_keeps_looking_through_a_controller_hiccup(tmp_path, monkeypatch, capsys):
    """squeue/scontrol stand-ins: RUNNING, one failed answer, then COMPLETED; wait ends 0 with Slurm's exit code."""
    from skillbank.platform import slurm_jobs, submit

    monkeypatch.setattr(slurm_jobs, "RETRIES", ())
    monkeypatch.setattr(submit, "POLL_S", (0.05, 0.05))
    states = tmp_path / "states"
    states.write_text("RUNNING\nDOWN\nCOMPLETED\n")
    pop = f'state=$(head -1 {states}); if [ "$(wc -l < {states})" -gt 1 ]; then sed -i 1d {states}; fi'
    fake_tools(tmp_path, monkeypatch, {
        "sbatch": "echo 81", "sacct": "exit 1",
        "squeue": f'if [ "$(head -1 {states})" = DOWN ]; then echo "Unable to contact slurm controller" >&2; exit 1; fi',  # a finished job left it
        "scontrol": 'case "$*" in *"show partition"*) exit 1;; esac; ' + pop + '; if [ "$state" = DOWN ]; then echo "Unable to contact slurm controller" >&2; exit 1; fi; '
                    'echo "JobId=81 JobName=x JobState=$state Restarts=0 ExitCode=0:0 StartTime=2026-11-26T05:00:01 EndTime=2026-11-26T05:01:00"',
    })
    record = submit_json(capsys, "--platform", "slurm", "--backend", "local", "--gpus-per-node", "0", "--spec", str(write_spec(tmp_path, shard=2)))["record"]
    code, doc, err = wait_cli(capsys, record["id"], "--timeout", "30")
    assert code == 0 and doc["record"]["status"] == "succeeded" and doc["record"]["exit_code"] == 0, (doc, err)
    assert "running" in err and "succeeded" in err


# --- jobs attach: what it refuses ------------------------------------------------------------------


def test_jobs_attach_refuses_what_it_cannot_follow(tmp_path, monkeypatch, capsys):
    spec = str(write_spec(tmp_path, shard=2))
    rendered = submit_json(capsys, "--platform", "slurm", "--backend", "local", "--gpus-per-node", "0", "--spec", spec, "--dry-run")["record"]
    folder = rendered["outputs"]["job_dir"]
    fake_tools(tmp_path, monkeypatch, {
        "squeue": "exit 0", "sacct": "exit 1",
        "scontrol": 'echo "JobId=$4 JobName=skillbank-other JobState=RUNNING Restarts=0 ExitCode=0:0"',
    })
    for argv, said in (
        ((str(tmp_path),), "holds no job.sbatch"),
        ((folder,), "no slurm-<N>.out"),
        ((folder, "--slurm-id", "12a"), "not a Slurm job id"),
        ((folder, "--slurm-id", "5"), "'skillbank-other', not this folder's job"),
        (("--job-dir", folder, str(tmp_path)), "name the job folder once"),
    ):
        code, out, err = run_cli("jobs", "attach", *argv, capsys=capsys)
        assert code == 2 and said in err, (argv, err)
    local = submit_json(capsys, "--platform", "local", "--spec", spec, "--dry-run")["record"]
    shutil.copy(Path(folder) / "job.sbatch", Path(local["outputs"]["job_dir"]) / "job.sbatch")
    code, _, err = run_cli("jobs", "attach", local["outputs"]["job_dir"], "--slurm-id", "5", capsys=capsys)
    assert code == 2 and "holds a local job" in err
    assert json.loads(Path(folder).with_suffix(".json").read_text())["dry_run"] is True  # nothing was written


@pytest.mark.parametrize("alone", [False, True])
def test_jobs_attach_with_stand_in_slurm_records_the_job(tmp_path, monkeypatch, capsys, alone):
    """The dry run's record beside the folder (or, for a folder copied alone, its job.json) becomes a submitted
    Slurm job that status / logs / wait / cancel follow; the id comes from slurm-<N>.out when not given."""
    rendered = submit_json(capsys, "--platform", "slurm", "--backend", "local", "--gpus-per-node", "0", "--spec", str(write_spec(tmp_path, shard=2)), "--dry-run")["record"]
    folder = Path(rendered["outputs"]["job_dir"])
    if alone:
        moved = tmp_path / "cluster" / "somewhere"
        shutil.copytree(folder, moved)
        folder = moved
    calls = fake_tools(tmp_path, monkeypatch, {
        "squeue": "exit 0", "sacct": "exit 1", "scancel": f'touch {tmp_path}/cancelled',
        "scontrol": (f'state=RUNNING; if [ -f {tmp_path}/cancelled ]; then state=CANCELLED; fi; echo "JobId=$4 JobName=skillbank-{rendered["id"]} '
                     'JobState=$state Restarts=0 ExitCode=0:15 SubmitTime=2026-11-26T05:00:00 StartTime=2026-11-26T05:00:01 EndTime=Unknown"'),
    })
    (folder / "slurm-90.out").write_text("skillbank: job 90 attempt 0\n")
    (folder / "slurm-91.out").write_text("skillbank: job 91 attempt 0\nstep 1\n")
    code, out, err = run_cli("jobs", "attach", str(folder), "--json", capsys=capsys)
    assert code == 0, err
    record = json.loads(out)["record"]
    assert record["external_id"] == "91" and record["status"] == "running" and not record["dry_run"] and record["external_kind"] == "slurm-job"
    assert record["outputs"]["job_dir"] == str(folder) and record["outputs"]["log"] == str(folder / "slurm-91.out")
    assert any("older outputs in the folder: slurm-90.out" in n for n in record["notes"]) and any(n.startswith("attached ") for n in record["notes"])
    assert json.loads(out)["record_path"] == str(folder.parent / f"{rendered['id']}.json")
    assert (folder.parent / f"{rendered['id']}.json").is_file()
    if alone:
        assert any("built from" in n for n in record["notes"]) and record["spec"]["copy_path"] == str(folder / "spec.yaml")
    code, out, _ = run_cli("jobs", "logs", rendered["id"], "--tail", "1", capsys=capsys)  # by id, from anywhere: indexed
    assert out == "step 1\n"
    code, out, _ = run_cli("jobs", "cancel", rendered["id"], "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["record"]["status"] == "cancelled" and "scancel 91" in calls.read_text()
    code, doc, _ = wait_cli(capsys, rendered["id"])
    assert code == 1 and doc["outcome"] == "cancelled"
