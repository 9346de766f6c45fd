"""AutoML as a job: `skillbank submit --action automl` on local, Docker and Slurm, with the same
status / logs / cancel as a train job (issue 15, item 3).

No Docker engine, Slurm or GPU here: the Docker and Slurm jobs are rendered (--dry-run) and their
commands checked. The local job really runs detached under the platform runner; only the
`skillbank automl` it starts is a stand-in (a `python` on PATH that hands every other command to the
real interpreter): a real study needs a GPU or minutes of CPU training per trial. The stand-in starts a
grandchild in a session of its own, like a trial's torchrun ranks, so cancel has a tree to stop.
Preflight is stubbed as in test_platform.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from skillbank import procs
from skillbank.commands.flags import add_automl_arguments as add_arguments
from test_platform import _env, _wait_status, run_cli, submit_json, write_spec  # noqa: F401  (fixture: autouse _env)

SEARCH = ("--action", "automl", "--max-trials", "3", "--range", "train.optm_lr=1e-5:0.001",
          "--choices", "train.optm_decay_type=cosine,none", "--param", "train.optm_lr", "--param", "train.optm_decay_type")


def automl_args(argv: list[str]) -> argparse.Namespace:
    """The rendered `python -m skillbank.cli automl ...` (local command.sh: `"${SKILLBANK[@]}" automl ...`, the
    skillbank it found) parsed by `skillbank automl`'s own parser."""
    i = argv.index("automl")
    assert argv[i - 2:i] == ["-m", "skillbank.cli"] or argv[i - 1] == "${SKILLBANK[@]}", argv
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv[i + 1:])


def check_study_command(argv: list[str], spec_copy: str, study_dir: Path) -> None:
    args = automl_args(argv)
    assert args.resume is True  # a requeued or re-submitted job continues the study; a fresh one creates it
    assert args.spec == spec_copy and args.study == "train" and Path.cwd() / args.out == study_dir  # relative to the job's work directory: the submit directory
    assert args.max_trials == 3 and args.range == [("train.optm_lr", (1e-5, 0.001))]
    assert args.choices == [("train.optm_decay_type", ["cosine", "none"])] and args.param == ["train.optm_lr", "train.optm_decay_type"]
    assert args.backend == "cosmos-rl" and args.metric == "accuracy" and args.algorithm == "bayesian"


def test_render_local_docker_slurm_runs_automl_with_resume(tmp_path, capsys):
    spec = write_spec(tmp_path)
    study_dir = tmp_path / "results" / "automl" / "train"
    for platform in ("local", "docker", "slurm"):
        doc = submit_json(capsys, "--platform", platform, "--spec", str(spec), *SEARCH, "--dry-run")
        record = doc["record"]
        assert record["action"] == "automl" and record["id"].startswith("automl-") and record["status"] == "rendered"
        assert Path(record["outputs"]["study_dir"]) == study_dir
        script = Path(record["script"])
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
        if platform == "docker":  # the container script checks the env, then execs the study
            script = script.parent / "container.sh"
        text = script.read_text()
        assert "preflight --skill tao-finetune-cosmos-reason --action train" in text  # the env gate comes first
        line = next(ln for ln in text.splitlines() if " automl " in ln)
        assert text.index("preflight --skill") < text.index(line)
        argv = shlex.split(line.split("srun", 1)[-1] if platform == "slurm" else line)
        check_study_command(argv, "$JOB_DIR/spec.yaml", study_dir)  # the script finds its job folder when it runs
        assert "skillbank.cli train" not in text and "cosmos-rl --config" not in text
        if platform == "local":  # `exec <argv>`: the detached launch runs the same command, the job folder spelled out
            job_dir = str(Path(record["spec"]["copy_path"]).parent)
            launched = record["argv"][record["argv"].index("automl"):]
            assert launched == [a.replace("$JOB_DIR", job_dir) for a in argv[argv.index("automl"):]]


def test_resubmit_of_the_same_spec_uses_the_same_study(tmp_path, capsys):
    spec = write_spec(tmp_path)
    first = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), *SEARCH, "--dry-run")["record"]
    again = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), *SEARCH, "--dry-run")["record"]
    assert first["id"] != again["id"] and first["outputs"]["study_dir"] == again["outputs"]["study_dir"]
    outs = [automl_args(shlex.split(next(ln for ln in Path(r["script"]).read_text().splitlines() if " automl " in ln)))
            for r in (first, again)]
    assert str(tmp_path / outs[0].out) == str(tmp_path / outs[1].out) == first["outputs"]["study_dir"] and outs[0].study == outs[1].study == "train"
    other = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), *SEARCH, "--study", "lr", "--dry-run")["record"]
    assert other["outputs"]["study_dir"] == str(tmp_path / "results" / "automl" / "lr")
    code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(spec), *SEARCH, "--dry-run", capsys=capsys)
    assert code == 0 and f"study:   {first['outputs']['study_dir']}" in out


def test_search_flags_need_automl_and_a_study_runs_on_one_node(tmp_path, capsys):
    spec = write_spec(tmp_path)
    code, out, _ = run_cli("submit", "--platform", "local", "--spec", str(spec), "--max-trials", "3", "--dry-run", "--json", capsys=capsys)
    doc = json.loads(out)
    assert code == 2 and doc["error"]["where"] == "--max-trials" and "--action automl" in doc["error"]["fix"]
    for flags, where in ((("--metric", "bleu"), "--metric"), (("--param", "train.no_such_key"), "train.no_such_key")):
        code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--action", "automl", *flags, "--dry-run", "--json", capsys=capsys)
        doc = json.loads(out)
        assert code == 2 and where in doc["error"]["where"] + doc["error"]["message"], doc
    assert not (tmp_path / "results" / "jobs").exists()  # refused at submit, not on the node
    two_nodes = write_spec(tmp_path, replicas=2)
    code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(two_nodes), "--action", "automl", "--dry-run", "--json", capsys=capsys)
    doc = json.loads(out)
    assert code == 2 and doc["error"]["where"] == "policy.parallelism.dp_replicate_size"
    train = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run")["record"]
    assert train["action"] == "train" and train["outputs"]["study_dir"] is None


def _stand_in_python(tmp: Path, monkeypatch) -> Path:
    """`python` that runs a stand-in for `-m skillbank.cli automl` and the real interpreter otherwise."""
    study = (
        "import subprocess, sys, time\n"
        f"open({str(tmp / 'automl.argv')!r}, 'w').write('\\n'.join(sys.argv[1:]))\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
        f"open({str(tmp / 'trial.pid')!r}, 'w').write(str(p.pid))\n"
        "print('automl: study train (stand-in)', flush=True)\n"
        "time.sleep(120)\n"
    )
    exe = tmp / "fakebin" / "python"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1 $2 $3" = "-m skillbank.cli automl" ]; then shift 3; exec {shlex.quote(sys.executable)} -c {shlex.quote(study)} "$@"; fi\n'
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(exe))  # JobContext.python: what the job's commands start with
    return exe


def test_local_automl_job_status_logs_cancel_leaves_no_process(tmp_path, monkeypatch, capsys):
    _stand_in_python(tmp_path, monkeypatch)
    record = submit_json(capsys, "--platform", "local", "--spec", str(write_spec(tmp_path)), *SEARCH)["record"]
    assert record["action"] == "automl" and record["external_kind"] == "pid"
    runner = int(record["external_id"])
    assert _wait_status(record["id"], {"running"}, capsys)["status"] == "running"
    deadline = time.monotonic() + 20
    while not (tmp_path / "trial.pid").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    study_dir = tmp_path / "results" / "automl" / "train"
    check_study_command(["python", "-m", "skillbank.cli", "automl", *(tmp_path / "automl.argv").read_text().splitlines()],
                        record["spec"]["copy_path"], study_dir)
    deadline = time.monotonic() + 10
    while True:
        code, out, _ = run_cli("jobs", "logs", record["id"], capsys=capsys)
        if "automl: study train" in out or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "automl: study train" in out
    trial = int((tmp_path / "trial.pid").read_text())
    assert {p.pid for p in procs.tree(runner)} >= {runner, trial}
    code, out, _ = run_cli("jobs", "cancel", record["id"], "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["record"]["status"] == "cancelled"
    deadline = time.monotonic() + 10
    while (_live_tree(runner) or _alive(trial)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_tree(runner) == [] and not _alive(trial), "a process of the cancelled study survived"


def _live_tree(pid: int) -> list:
    """procs.tree without zombies: the runner is this test's child (submit ran in-process), so it stays
    a zombie until pytest reaps it; a real `skillbank submit` exits and hands it to init."""
    return [p for p in procs.tree(pid) if _alive(p.pid)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not reaped yet by init in a container) has ended
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def test_a_study_shared_by_jobs_names_its_storage_and_refuses_a_password(tmp_path, capsys):
    """`submit --action automl --storage URL`: each job is one managed worker of the shared study (local and
    Slurm render the same `skillbank automl --storage URL --resume`); the record keeps the URL (jobs status
    reads the study from it); a password in the URL would be written into the script: refused, nothing
    rendered; a unix-socket URL on Slurm gets a note (the workers on other machines cannot reach it)."""
    spec = write_spec(tmp_path)
    url = "postgresql://me@db-host:5432/optuna"
    for platform in ("local", "slurm"):
        record = submit_json(capsys, "--platform", platform, "--spec", str(spec), *SEARCH, "--storage", url, "--dry-run")["record"]
        line = next(ln for ln in Path(record["script"]).read_text().splitlines() if " automl " in ln)
        args = automl_args(shlex.split(line.split("srun", 1)[-1] if platform == "slurm" else line))
        assert args.storage == url and args.resume and record["outputs"]["study_storage"] == url
        assert any("one more worker of the study" in n for n in record["notes"])
    code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(spec), *SEARCH, "--storage", "postgresql://me:s3cret@db/optuna",
                           "--dry-run", "--json", capsys=capsys)
    doc = json.loads(out)
    assert code == 2 and doc["error"]["where"] == "--storage" and "s3cret" not in out and "PGPASSWORD" in doc["error"]["fix"]
    socket_url = "postgresql://me@/optuna?host=/run/postgresql&port=5432"
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), *SEARCH, "--storage", socket_url, "--dry-run")["record"]
    assert any("unix socket" in n and "only workers on that machine" in n for n in record["notes"])
    code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--storage", url, "--dry-run", "--json", capsys=capsys)
    assert code == 2 and json.loads(out)["error"]["where"] == "--storage"  # a study flag on a train job


def test_jobs_status_of_an_automl_job_shows_its_study(tmp_path, capsys):
    """The record, then the study's summary (as `skillbank automl --status`), read from the job's study
    folder; before the study exists, one line says so (the record still prints)."""
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).parent))
    from test_automl_search import SCHEMA, base_spec, fake_runner
    from skillbank.automl.space import build_space
    from skillbank.automl.study import StudySettings
    from skillbank.automl.worker import run_study

    record = submit_json(capsys, "--platform", "local", "--spec", str(write_spec(tmp_path)), *SEARCH, "--dry-run")["record"]
    path = str(tmp_path / "results" / "jobs" / f"{record['id']}.json")
    code, out, _ = run_cli("jobs", "status", path, "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["study"]["ok"] is False and "no study database" in json.loads(out)["study"]["error"]
    study_dir = Path(record["outputs"]["study_dir"])
    settings = StudySettings(study_name="train", storage=f"sqlite:///{study_dir / 'study.db'}", max_trials=2, algorithm="random")
    study_dir.mkdir(parents=True)
    run_study(settings, build_space(SCHEMA, base_spec(), params=["train.optm_lr"]), base_spec(), study_dir / "trials", fake_runner)
    code, out, _ = run_cli("jobs", "status", path, "--json", capsys=capsys)
    doc = json.loads(out)["study"]
    assert code == 0 and doc["study"] == "train" and doc["counts"]["finished"] == 2 and len(doc["trials"]) == 2
    code, out, _ = run_cli("jobs", "status", path, capsys=capsys)
    assert "study train (sqlite:///" in out and "2 of 2 finished" in out and "(baseline)" in out
