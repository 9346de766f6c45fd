"""No orphans: pause, continue and stop reach every process a command started, sessions of their own included.

torchrun starts each rank with start_new_session=True and so does the cosmos-rl launcher with its
workers; the trees here are small Python programs built the same way (real processes, real signals).
The cosmos-rl launcher is a stand-in script on PATH (the real one needs GPUs), and so is
`nvidia-smi` (one fake GPU, so that preflight lets the cosmos-rl backend start here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from helpers import ROOT, SKILL, skillbank
from skillbank import procs

# A parent that starts two children, each in a session of its own (as torchrun starts its ranks), each
# of which starts a grandchild; every pid goes to argv[1] once all are up. IGNORE_TERM=1: the
# grandchildren ignore SIGTERM (only SIGKILL ends them).
TREE = textwrap.dedent(
    """\
    import json, os, signal, subprocess, sys, time
    pids_file = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "leaf":
        if os.environ.get("IGNORE_TERM") == "1":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
    elif len(sys.argv) > 2 and sys.argv[2] == "rank":
        leaf = subprocess.Popen([sys.executable, __file__, pids_file, "leaf"])
        with open(pids_file + f".{os.getpid()}", "w") as f:
            f.write(str(leaf.pid))
        time.sleep(600)
    else:
        ranks = [subprocess.Popen([sys.executable, __file__, pids_file, "rank"], start_new_session=True) for _ in range(2)]
        leaves = []
        for rank in ranks:
            path = pids_file + f".{rank.pid}"
            while not os.path.exists(path) or not open(path).read():
                time.sleep(0.02)
            leaves.append(int(open(path).read()))
        with open(pids_file + ".tmp", "w") as f:
            json.dump([os.getpid(), *[r.pid for r in ranks], *leaves], f)
        os.replace(pids_file + ".tmp", pids_file)
        time.sleep(600)
    """
)


def wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def read_pids(path: Path) -> list[int] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def state(pid: int) -> str | None:
    """psutil's status of pid, None once it is gone (a zombie counts as gone)."""
    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return None
    return None if status == psutil.STATUS_ZOMBIE else status


def kill_all(pids) -> None:
    for pid in pids or []:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def start_tree(tmp_path: Path, **env) -> tuple[subprocess.Popen, list[int]]:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    pids_file = tmp_path / "pids.json"
    proc = subprocess.Popen([sys.executable, str(script), str(pids_file)], env={**os.environ, **env})
    return proc, wait_for(lambda: read_pids(pids_file), what="the tree to start")


def test_pause_resume_and_stop_reach_children_in_sessions_of_their_own(tmp_path):
    proc, pids = start_tree(tmp_path)
    try:
        assert len({os.getsid(p) for p in pids}) == 3  # what os.killpg on the parent's group misses
        procs.pause(proc.pid)
        wait_for(lambda: all(state(p) == psutil.STATUS_STOPPED for p in pids), 10, "every process to be stopped")
        procs.resume(proc.pid)
        wait_for(lambda: all(state(p) != psutil.STATUS_STOPPED for p in pids), 10, "every process to continue")
        procs.pause(proc.pid)  # a paused tree is stopped too: SIGTERM is pending until SIGCONT
        procs.stop(proc.pid, grace_s=10)
        proc.wait(timeout=10)
        assert [p for p in pids if state(p)] == []
    finally:
        kill_all(pids)
        proc.kill()


def test_stop_kills_what_ignores_sigterm_after_the_grace_period(tmp_path):
    proc, pids = start_tree(tmp_path, IGNORE_TERM="1")
    try:
        started = time.monotonic()
        procs.stop(proc.pid, grace_s=0.5)
        proc.wait(timeout=10)
        assert [p for p in pids if state(p)] == [] and time.monotonic() - started < 10
    finally:
        kill_all(pids)
        proc.kill()


SIGNALLED = textwrap.dedent(
    """\
    import subprocess, sys, time
    from skillbank import procs
    with procs.stop_on_signals(grace_s=5):
        try:
            tree = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2]])
            procs.wait(tree)  # a safe point: the handler only records the signal
        except KeyboardInterrupt as exc:
            print("interrupted by", exc.signum, flush=True)
            raise SystemExit(128 + exc.signum)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_every_descendant_of_a_command(tmp_path, sig):
    (tmp_path / "tree.py").write_text(TREE)
    (tmp_path / "main.py").write_text(SIGNALLED)
    pids_file = tmp_path / "pids.json"
    main = subprocess.Popen([sys.executable, str(tmp_path / "main.py"), str(tmp_path / "tree.py"), str(pids_file)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    pids = None
    try:
        pids = wait_for(lambda: read_pids(pids_file), what="the tree to start")
        main.send_signal(sig)
        out, _ = main.communicate(timeout=30)
        assert main.returncode == 128 + sig and f"interrupted by {int(sig)}" in out
        assert [p for p in pids if state(p)] == []
    finally:
        kill_all(pids)
        main.kill()


# A signal that arrives while a weakref callback runs (as in SQLAlchemy's _collection_gced): a handler that
# raised there was swallowed ("Exception ignored in ...") and the stop lost. The handler only records it;
# the next safe point raises.
IN_CALLBACK = textwrap.dedent(
    """\
    import os, signal, sys, time, weakref
    from skillbank import procs

    class Thing:
        pass

    def callback(_ref):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # the signal's Python handler runs here, inside the callback

    try:
        with procs.stop_on_signals(grace_s=5):
            thing = Thing()
            ref = weakref.ref(thing, callback)
            del thing  # the callback runs now
            print("after the callback", flush=True)
            for _ in range(200):
                procs.raise_if_stopped()  # a safe point
                time.sleep(0.05)
            print("not stopped", flush=True)
    except KeyboardInterrupt as exc:
        print("stopped by", exc.signum, flush=True)
        sys.exit(128 + exc.signum)
    """
)


def test_a_signal_during_a_weakref_callback_is_not_lost(tmp_path):
    (tmp_path / "callback.py").write_text(IN_CALLBACK)
    done = subprocess.run([sys.executable, str(tmp_path / "callback.py")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM, done.stdout + done.stderr
    assert done.stdout.split() == "after the callback stopped by 15".split() and "Exception ignored" not in done.stderr


# --- the cosmos-rl launch path ------------------------------------------------------------------

FAKE_COSMOS = textwrap.dedent(
    """\
    #!{python}
    # A stand-in for cosmos-rl: starts its "workers" as the real launcher does (sessions of their own,
    # each with a child), writes their pids beside the run, then waits for ever.
    import subprocess, sys, time
    from pathlib import Path
    argv = sys.argv[1:]
    log_dir = Path(argv[argv.index("--log-dir") + 1])
    tree = subprocess.Popen([sys.executable, {tree!r}, str(log_dir.parent / "pids.json")])
    time.sleep(600)
    """
)

# `skillbank train` with the stand-ins first on the launcher's PATH (launch_env puts this Python's
# bin folder, where the real cosmos-rl is installed, first).
TRAIN = textwrap.dedent(
    """\
    import os, sys
    from skillbank.cli import main
    from skillbank.training.cosmos_rl import launch
    real_env = launch.launch_env
    launch.launch_env = lambda base=None: {{**real_env(base), "PATH": {bin!r} + os.pathsep + real_env(base)["PATH"]}}
    sys.exit(main(sys.argv[1:]))
    """
)


def test_sigterm_on_train_stops_the_cosmos_rl_launcher_and_its_workers(tmp_path, tiny_model_dir, demo_dataset_dir):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "tree.py").write_text(TREE)
    (tmp_path / "train.py").write_text(TRAIN.format(bin=str(bin_dir)))
    (bin_dir / "cosmos-rl").write_text(FAKE_COSMOS.format(python=sys.executable, tree=str(tmp_path / "tree.py")))
    (bin_dir / "redis-server").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    spec = tmp_path / "train.yaml"
    made = skillbank("spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir),
                     "--set", f"model={tiny_model_dir}", "--set", "dp_shard_size=1", "--set", "batch_size=8", "--set", "mini_batch=8",
                     "--set", f"output_dir={tmp_path / 'train'}", "--set", f"results_dir={tmp_path / 'results'}", "-o", str(spec))
    assert made.returncode == 0, made.stderr
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), os.environ["PATH"]])}
    train = subprocess.Popen([sys.executable, str(tmp_path / "train.py"), "train", "--spec", str(spec), "--automl-policy", "off",
                              "--backend", "cosmos-rl"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids = None
    try:
        def started():
            assert train.poll() is None, train.communicate()[0]
            found = next((tmp_path / "train").glob("*/pids.json"), None)
            return found and read_pids(found)

        pids = wait_for(started, 120, "the fake launcher's workers")
        pids.append(psutil.Process(pids[0]).ppid())  # the launcher
        train.send_signal(signal.SIGTERM)
        out, _ = train.communicate(timeout=60)
        assert train.returncode == 128 + signal.SIGTERM, out
        assert [p for p in pids if state(p)] == [], out
        record = json.loads(next((tmp_path / "results" / "jobs").glob("*.json")).read_text())
        assert record["status"] == "cancelled"
    finally:
        kill_all(pids)
        train.kill()


# A skillbank-like starter: starts TREE through procs.start (the guard), prints the guard's pid, waits.
STARTER = textwrap.dedent(
    """\
    import sys, time
    from pathlib import Path
    from skillbank import procs
    proc = procs.start([sys.executable, sys.argv[1], sys.argv[2]], pid_file=Path(sys.argv[3]) / procs.PID_FILE)
    print(proc.pid, flush=True)
    if len(sys.argv) > 4:
        sys.exit(proc.wait())
    time.sleep(600)
    """
)


def start_guarded(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, int, list[int]]:
    (tmp_path / "tree.py").write_text(TREE)
    (tmp_path / "starter.py").write_text(STARTER)
    starter = subprocess.Popen([sys.executable, str(tmp_path / "starter.py"), str(tmp_path / "tree.py"), str(tmp_path / "pids.json"),
                                str(tmp_path), *extra], stdout=subprocess.PIPE, text=True)
    guard = int(starter.stdout.readline())
    return starter, guard, wait_for(lambda: read_pids(tmp_path / "pids.json"), what="the tree to start")


def test_a_sigkilled_starter_takes_its_whole_tree_along(tmp_path):
    """procs.start: SIGKILL on the process that started a command (nothing it could handle) ends the
    command, its children in sessions of their own and their children, paused ones too."""
    starter, guard, pids = start_guarded(tmp_path)
    try:
        assert procs.is_guard(psutil.Process(guard)) and psutil.Process(pids[0]).ppid() == guard
        procs.pause(guard)  # as a trial is paused while its epoch is evaluated: the guard itself keeps running
        wait_for(lambda: all(state(p) == psutil.STATUS_STOPPED for p in pids), 10, "the tree to pause")
        assert state(guard) != psutil.STATUS_STOPPED
        starter.kill()
        starter.wait()
        wait_for(lambda: all(state(p) is None for p in [guard, *pids]), 30, "the guarded tree to die with its starter")
    finally:
        kill_all([guard, *pids])


def test_a_dead_predecessors_leftovers_are_stopped_from_its_pid_file(tmp_path):
    """When the guard too was SIGKILLed (nothing left to act), the next start stops what it left: every
    process that inherited the recorded token, whatever session or parent it has now. A live owner's
    processes are left alone."""
    starter, guard, pids = start_guarded(tmp_path)
    try:
        assert procs.stop_leftovers(tmp_path) == []  # its owner lives
        os.kill(guard, signal.SIGKILL)
        starter.kill()
        starter.wait()
        wait_for(lambda: state(pids[0]) is None, 30, "the guard's command to die with the guard")
        assert any(state(p) for p in pids[1:]), "the ranks were expected to outlive a SIGKILLed guard"
        assert sorted(procs.stop_leftovers(tmp_path, grace_s=5)) == sorted(pids[1:])
        assert all(state(p) is None for p in pids)
    finally:
        kill_all([guard, *pids])


def test_the_guard_passes_on_signals_and_exit_codes(tmp_path):
    """A signal its starter sends the guard (Popen.terminate) reaches its command, once; one from elsewhere is
    not passed on (a job-wide or group signal reached the command already). The guard exits as its command did."""
    proc = procs.start([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert proc.wait(timeout=30) == 3
    proc = procs.start([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    subprocess.run(["kill", "-TERM", str(proc.pid)], check=True)  # from elsewhere (a group, Slurm): the command got its own
    time.sleep(0.5)
    assert proc.poll() is None
    proc.terminate()
    assert proc.wait(timeout=30) == -signal.SIGTERM


# Counts the SIGTERMs it gets (a line each in argv[1]) and ends 2 s after the first, as torchrun stops
# its ranks before it exits: a second SIGTERM meanwhile is what printed torchrun's traceback.
COUNTS_TERMS = textwrap.dedent(
    """\
    import signal, sys, time
    ends = []
    def on_term(signum, frame):
        with open(sys.argv[1], "a") as f:
            f.write("SIGTERM\\n")
        ends.append(time.monotonic() + 2.0)
    signal.signal(signal.SIGTERM, on_term)
    print("up", flush=True)
    while not ends or time.monotonic() < ends[0]:
        time.sleep(0.01)
    """
)


def test_a_process_is_asked_to_stop_once_whoever_stops_its_tree(tmp_path):
    """A tree stop, the stopper's own cleanup stopping the tree again, and another skillbank process (the
    nested command that the same stop reached) stopping it too: one SIGTERM in all."""
    counts = tmp_path / "terms.txt"
    proc = subprocess.Popen([sys.executable, "-c", COUNTS_TERMS, str(counts)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        target = psutil.Process(proc.pid)
        procs.terminate([target])
        procs.terminate([target])
        other = f"import psutil; from skillbank import procs; procs.terminate([psutil.Process({proc.pid})])"
        subprocess.run([sys.executable, "-c", other], check=True)
        procs.stop(proc.pid, grace_s=10)
        assert proc.wait(timeout=10) == 0 and counts.read_text() == "SIGTERM\n"
    finally:
        proc.kill()
