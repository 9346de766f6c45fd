"""AutoML workers on a real PostgreSQL server (tests/pg_server.py: initdb in a temp folder, a unix socket).

Real `skillbank automl` processes with real trials (the tiny model, 3 train records, one optimizer
step, the validation loss as the metric: no evaluation pass) share one study: no parameters twice,
the baseline once, an exact --max-trials, SIGTERM stops one worker only (one line, no traceback), a
worker with another base spec is refused, --status lists every trial from a machine with no spec, a
SIGKILLed worker leaves no process and its trial runs again once (Optuna's heartbeat). Stand-in
workers (the study machinery of `skillbank automl` with a trainer double: nothing trains) show that two
workers resuming together retry each failed trial once within an exact budget (the study's PostgreSQL
advisory lock), and that --stop-study stops every worker; --delete-study and --dashboard reach the study.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, SKILL, skillbank
from pg_server import pg_server  # noqa: F401 - the fixture

SEARCH = ["--backend", "local", "--algorithm", "random", "--param", "train.optm_lr", "--range", "train.optm_lr=1e-4:1e-3",
          "--metric", "val_loss"]


@pytest.fixture(scope="module")
def tiny_spec(tmp_path_factory, tiny_model_dir) -> Path:
    """The smallest real trial: 3 train records in one step of batch 3, 1 validation record."""
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.specification.build import build_spec
    from skillbank.specification.io import write_spec

    root = tmp_path_factory.mktemp("pg-study")
    data = build_demo_dataset(root / "data", records=3, seed=0)
    val = data / "val" / "annotations.json"
    val.write_text(json.dumps(json.loads(val.read_text())[:1]))
    built = build_spec(SKILL, "train", [
        f"model={tiny_model_dir}", "dp_shard_size=1", "epoch=1", "batch_size=3", "mini_batch=3", "validation.batch_size=1",
        "train.train_policy.dataloader_num_workers=0", "train.param_dtype=float32", "policy.model_gradient_checkpointing=false",
        f"output_dir={root / 'train'}", f"results_dir={root}",
    ], dataset_root=data)
    return write_spec(root / "base.yaml", built.spec)


def worker(spec: Path, url: str, study: str, max_trials: int, log: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(spec), "--study", study,
            "--storage", url, "--max-trials", str(max_trials), *SEARCH, *extra]
    return subprocess.Popen(argv, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def trials_of(url: str, study: str) -> list:
    import optuna

    try:
        return optuna.load_study(study_name=study, storage=url).get_trials()
    except KeyError:  # not created yet
        return []


def owned_running_trial(study_dir: Path, pid: int) -> Path | None:
    """The trial folder whose trainer the worker `pid` started (its pid file), while that trainer runs."""
    import psutil

    for record in study_dir.glob("trials/*/procs.json"):
        rec = json.loads(record.read_text())
        if rec["owner"] == pid and psutil.pid_exists(rec["pid"]):
            return record.parent
    return None


def wait_for(predicate, timeout: float, what: str, procs: list[subprocess.Popen] = ()):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for p in procs:
            assert p.poll() is None, f"a worker exited early ({p.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def kill_all(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_storage_url_whose_driver_is_missing_is_refused_before_anything(tiny_spec, tmp_path):
    proc = skillbank("automl", "--spec", str(tiny_spec), "--storage", "mysql://me:s3cret@db/optuna", "--out", str(tmp_path / "s"), *SEARCH)
    assert proc.returncode == 2, proc.stderr
    assert "mysqlclient" in proc.stderr and "s3cret" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "s").exists()


def test_the_dry_run_checks_that_the_storage_answers(tiny_spec, pg_server, tmp_path):  # noqa: F811
    """--dry-run connects (read only) and reports the server's version, whether the study exists, and warns
    that this unix-socket URL serves one machine; a storage that does not answer is a note, not an error."""
    url = pg_server.create_db("dry")
    plan = skillbank("automl", "--spec", str(tiny_spec), "--study", "dry", "--storage", url, "--dry-run", "--json", *SEARCH, timeout=300)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    check = doc["storage_check"]
    assert check["answers"] is True and check["server"] == "postgresql" and check["version"].split(".")[0].isdigit()
    assert check["study_exists"] is False and check["unix_socket"] == str(pg_server.dir)
    assert any("unix socket" in n for n in doc["notes"]) and trials_of(url, "dry") == []
    gone = f"postgresql://postgres@/dry?host={tmp_path / 'no-server'}&port=5432"
    text = skillbank("automl", "--spec", str(tiny_spec), "--study", "dry", "--storage", gone, "--dry-run", *SEARCH, timeout=300)
    assert text.returncode == 0 and "does NOT answer from here" in text.stdout and "Traceback" not in text.stderr, text.stdout + text.stderr


def test_two_workers_share_one_study_and_sigterm_stops_one_worker_only(tiny_spec, pg_server, tmp_path):  # noqa: F811
    """Two real workers, one command: distinct parameters, the baseline once; SIGTERM on worker A fails
    its trial (no process of it left), worker B runs it again and finishes the study."""
    import psutil

    url = pg_server.create_db("two_workers")
    study_dir = tiny_spec.parent / "automl" / "two"
    a = worker(tiny_spec, url, "two", 3, tmp_path / "a.log")
    b = worker(tiny_spec, url, "two", 3, tmp_path / "b.log")
    try:
        trial_dir = wait_for(lambda: owned_running_trial(study_dir, a.pid), 300, "worker A's trial", [a, b])
        tree = psutil.Process(a.pid).children(recursive=True)
        a.send_signal(signal.SIGTERM)
        assert a.wait(timeout=120) == 128 + signal.SIGTERM, (tmp_path / "a.log").read_text()[-3000:]
        assert [p.pid for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
        assert b.wait(timeout=400) == 0, (tmp_path / "b.log").read_text()[-3000:]
    finally:
        kill_all(a, b)
    a_out = (tmp_path / "a.log").read_text()
    assert "Traceback" not in a_out and a_out.strip().splitlines()[-1].startswith("automl: this worker stopped (SIGTERM): trial #"), a_out[-3000:]
    trials = trials_of(url, "two")
    stopped = next(t for t in trials if t.user_attrs.get("trial_dir") == str(trial_dir))
    assert stopped.state.name == "FAIL" and "SIGTERM" in stopped.user_attrs["fail_reason"]
    retry = [t for t in trials if t.user_attrs.get("retry_of") == stopped.number]
    assert len(retry) == 1 and retry[0].state.name == "COMPLETE" and retry[0].params == stopped.params
    firsts = [t for t in trials if "retry_of" not in t.user_attrs]  # each drawn once, never twice
    assert len({json.dumps(t.params, sort_keys=True) for t in firsts}) == len(firsts)
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(finished) == 3  # --max-trials holds across workers: a trial is claimed only under the budget
    assert sum(bool(t.user_attrs.get("baseline")) for t in finished) == 1
    assert sum(bool(t.user_attrs.get("baseline")) for t in firsts) == 1

    # --status from a machine with no spec: every trial, the retry counted once, who ran what
    status = skillbank("automl", "--study", "two", "--storage", url, "--status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["counts"] == {"total": 3, "complete": 3, "pruned": 0, "running": 0, "waiting": 0, "failed": 0, "retried": 1, "finished": 3}
    rows = {r["number"]: r for r in doc["trials"]}
    assert rows[stopped.number]["worker"].endswith(f":{a.pid}") and rows[retry[0].number]["worker"].endswith(f":{b.pid}")
    assert rows[retry[0].number]["retry_of"] == stopped.number and set(rows[stopped.number]["params"]) == {"train.optm_lr"}
    assert doc["best"]["value"] == min(t.value for t in finished) and doc["max_trials"] == 3
    text = skillbank("automl", "--study", "two", "--storage", url, "--status").stdout
    assert "3 of 3 finished" in text and "1 stopped or failed trial(s) re-queued, each counted once" in text

    # another base spec joins no study: exit 2 naming the differing key, nothing added
    other = yaml.safe_load(tiny_spec.read_text())
    other["train"]["optm_weight_decay"] = 0.5
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    refused = skillbank("automl", "--skill", SKILL, "--spec", str(tmp_path / "other.yaml"), "--study", "two", "--storage", url,
                        "--max-trials", "3", "--out", str(study_dir), *SEARCH, timeout=300)
    assert refused.returncode == 2 and "train.optm_weight_decay: study 0.01, this spec 0.5" in refused.stderr, refused.stderr
    assert "--allow-spec-change" in refused.stderr and "Traceback" not in refused.stderr
    assert len(trials_of(url, "two")) == len(trials)


def test_a_sigkilled_worker_leaves_no_process_and_its_trial_runs_again_once(tiny_spec, pg_server, tmp_path):  # noqa: F811
    """SIGKILL on `skillbank automl` alone: its trainer (skillbank train, torchrun, the rank in a session of
    its own) dies with it. Its trial stops beating; the next worker fails it and runs it again, once."""
    import psutil

    from skillbank.automl.study import GRACE_S

    url = pg_server.create_db("killed")
    study_dir = tiny_spec.parent / "automl" / "killed"
    a = worker(tiny_spec, url, "killed", 1, tmp_path / "a.log")
    b = None
    try:
        def rank_started():
            tree = psutil.Process(a.pid).children(recursive=True)
            return tree if any("skillbank.training.local.worker" in " ".join(p.cmdline()) for p in tree if p.is_running()) else None

        tree = wait_for(rank_started, 300, "worker A's training rank", [a])
        a.kill()
        killed_at = time.monotonic()
        a.wait()
        left = psutil.wait_procs(tree, timeout=30)[1]
        assert [" ".join(p.cmdline()) for p in left if p.status() != psutil.STATUS_ZOMBIE] == [], "orphans of a SIGKILLed worker"
        time.sleep(max(0.0, GRACE_S + 1 - (time.monotonic() - killed_at)))  # its heartbeat is stale now
        b = worker(tiny_spec, url, "killed", 1, tmp_path / "b.log")  # the same command: it joins
        assert b.wait(timeout=400) == 0, (tmp_path / "b.log").read_text()[-3000:]
    finally:
        kill_all(a, *([b] if b else []))
    trials = trials_of(url, "killed")
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].system_attrs["failed_trial"] == 0 and trials[1].params == trials[0].params
    assert trials[1].user_attrs["baseline"]  # the baseline, run again, still the baseline
    assert owned_running_trial(study_dir, a.pid) is None


STAND_IN = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_automl_search import SCHEMA, base_spec, fake_runner
from skillbank import procs
from skillbank.automl.space import build_space
from skillbank.automl.study import StudySettings, TrialFailed
from skillbank.automl.worker import run_study

mode, url, study, max_trials = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def runner(trial_dir, spec, report):  # a trainer double
    if mode == "fail":
        raise TrialFailed("training failed (exit 1)")
    if mode == "ok":
        time.sleep(0.5)
        return fake_runner(trial_dir, spec, report)
    while not procs.stop_requested():  # "stop": runs until told to stop, as the real runner polls
        time.sleep(0.05)
    raise TrialFailed(procs.stop_reason())

space = build_space(SCHEMA, base_spec(), params=["train.optm_lr"])
st = StudySettings(study_name=study, storage=url, max_trials=max_trials, algorithm="random", resume="--resume" in sys.argv)
with procs.stop_on_signals():
    run_study(st, space, base_spec(), Path(sys.argv[5]), runner)
"""


def stand_in(tmp_path: Path, mode: str, url: str, study: str, max_trials: int, *extra: str) -> subprocess.Popen:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN.format(tests=str(Path(__file__).parent)))
    return subprocess.Popen([sys.executable, str(script), mode, url, study, str(max_trials), str(tmp_path / "t"), *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_workers_resuming_together_retry_each_failure_once_within_an_exact_budget(pg_server, tmp_path):  # noqa: F811
    """Three failed trials; then two workers started together with --resume: each failed trial runs again
    exactly once (the re-enqueue happens once, under the study's advisory lock), no parameters run twice,
    and the study ends with exactly --max-trials finished trials (claims under the same lock)."""
    url = pg_server.create_db("race")
    first = stand_in(tmp_path, "fail", url, "race", 3)
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 0 and [t.state.name for t in trials_of(url, "race")] == ["FAIL"] * 3, out
    assert "Traceback" not in out and out.count("failed: training failed (exit 1)") == 3  # an environment failure: one line each
    workers = [stand_in(tmp_path, "ok", url, "race", 5, "--resume") for _ in range(2)]
    for w in workers:
        out, _ = w.communicate(timeout=180)
        assert w.returncode == 0, out
    trials = trials_of(url, "race")
    retries = collections.Counter(t.user_attrs.get("retry_of") for t in trials if "retry_of" in t.user_attrs)
    assert retries == {0: 1, 1: 1, 2: 1}, retries
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(finished) == 5 and len({json.dumps(t.params, sort_keys=True) for t in finished}) == 5
    assert not [t for t in trials if t.state.name in ("RUNNING", "WAITING")]
    assert {t.user_attrs["worker"] for t in finished} == {f"{socket.gethostname()}:{w.pid}" for w in workers}


def test_stop_study_stops_every_worker_and_resume_lifts_it(tiny_spec, pg_server, tmp_path):  # noqa: F811
    """--stop-study (the CLI) stops two workers' trials (a trainer double: nothing trains here) and names
    them in one line; --status shows the stopped study from a machine with no spec; a new worker is
    refused until --resume. --delete-study asks for --yes. --dashboard serves the study on 127.0.0.1."""
    from skillbank.automl.study import STOP_ATTR, StudySettings, open_study

    url = pg_server.create_db("stopped")
    workers = [stand_in(tmp_path, "stop", url, "s", 3) for _ in range(2)]
    try:
        wait_for(lambda: sum(t.state.name == "RUNNING" for t in trials_of(url, "s")) == 2, 60, "two running trials", workers)
        stop = skillbank("automl", "--spec", str(tiny_spec), "--study", "s", "--storage", url, "--stop-study")
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout.strip().splitlines() == ["study s: stopped: trial(s) #0, #1 stopped (FAIL; --resume runs them again); "
                                                    "new workers are refused until one starts with --resume"], stop.stdout
        for w in workers:
            out, _ = w.communicate(timeout=60)
            assert w.returncode == 0 and "Traceback" not in out, out
        trials = trials_of(url, "s")
        assert [t.state.name for t in trials] == ["FAIL", "FAIL"] and all("--stop-study" in t.user_attrs["fail_reason"] for t in trials)
        status = skillbank("automl", "--study", "s", "--storage", url, "--status")
        assert status.returncode == 0 and "STOPPED (--resume continues it)" in status.stdout, status.stderr
        assert "0 of 3 finished" in status.stdout and "2 failed" in status.stdout and "none yet" in status.stdout
        refused = stand_in(tmp_path, "ok", url, "s", 3)
        out, _ = refused.communicate(timeout=60)
        assert refused.returncode != 0 and "was stopped" in out
        study, created = open_study(StudySettings(study_name="s", storage=url, resume=True))  # --resume lifts the stop
        assert not created and study.user_attrs[STOP_ATTR] is False

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dash = subprocess.Popen([sys.executable, "-m", "skillbank.cli", "automl", "--study", "s",
                                 "--storage", url, "--dashboard", "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        workers.append(dash)

        def served():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as r:
                    return json.loads(r.read())
            except OSError:
                return None

        studies = wait_for(served, 60, "the dashboard", [dash])
        assert [s["study_name"] for s in studies["study_summaries"]] == ["s"]
        assert all(c.laddr.ip == "127.0.0.1" for c in __import__("psutil").Process(dash.pid).net_connections() if c.status == "LISTEN")
        kill_all(dash)

        unsure = skillbank("automl", "--study", "s", "--storage", url, "--delete-study")
        assert unsure.returncode == 2 and "add --yes" in unsure.stderr and len(trials_of(url, "s")) == 2
        deleted = skillbank("automl", "--study", "s", "--storage", url, "--delete-study", "--yes", "--json")
        assert deleted.returncode == 0 and json.loads(deleted.stdout)["trials"] == 2 and trials_of(url, "s") == []
    finally:
        kill_all(*workers)
