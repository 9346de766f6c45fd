"""A stop is never lost: SIGTERM on a real `skillbank automl` worker, N times, with the CPU kept busy.

Each run starts the same worker as the suite's `test_sigterm_while_a_trial_is_paused_stops_every_process_of_it`
(tests/test_automl_trials.py: the tiny model, the local backend, one trial of two epochs, a SQLite study),
waits for its moment, sends SIGTERM and checks what the issue asks of every run: exit 143, no process of
its tree left (snapshotted just before the signal), no traceback and no "Exception ignored" in its output
or in the trial's train.log, the one stop line last, the trial FAIL and re-queued. The moment is
`paused` (the trainer paused while epoch 1's export is evaluated: the suite's case), `running` (a random
0-`--jitter` s after the trainer started: start-up, preflight, training and evaluation alike), or `mixed`
(alternating). `--busy K` processes spin on the CPU the whole time (the load under which the old handler
lost a stop: its exception landed in a SQLAlchemy weakref callback and was swallowed).

    .venv/bin/python benchmarks/stop_stress.py [--runs 20] [--busy 2] [--when mixed] [--work DIR]

Prints one row per run and the totals (goal: every run 143, nothing left, no traceback). The stop
latency (SIGTERM to exit) is printed beside the median of the runs, for the record. At the defaults it
takes about 15 minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILL = "tao-finetune-cosmos-reason"


def spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def base_spec(work: Path) -> Path:
    """The suite's base spec (test_automl_trials.py), with two epochs so that the trial pauses once."""
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.specification.build import build_spec
    from skillbank.specification.io import write_spec

    data = build_demo_dataset(work / "data", records=24, seed=0)
    model = build_tiny_model(work / "model", family="qwen2_5_vl", seed=0)
    built = build_spec(SKILL, "train", [
        f"model={model}", "dp_shard_size=1", "epoch=2", "batch_size=8", "mini_batch=8", "train.train_policy.dataloader_num_workers=0",
        "train.param_dtype=float32", "policy.model_gradient_checkpointing=false", f"output_dir={work / 'train'}", f"results_dir={work}",
    ], dataset_root=data)
    return write_spec(work / "base.yaml", built.spec)


def one_run(spec: Path, out_dir: Path, when: str, jitter: float, rng: random.Random) -> dict:
    import psutil

    from skillbank import procs

    argv = [sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(spec), "--out", str(out_dir),
            "--backend", "local", "--max-trials", "1", "--param", "train.optm_lr", "--algorithm", "random"]
    worker = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    snapshot: list = []
    deadline = time.monotonic() + 600
    started_at = None
    delay = rng.uniform(0.0, jitter)
    while worker.poll() is None and time.monotonic() < deadline:
        snapshot = procs.descendants(worker.pid) or snapshot
        if when == "paused" and any(p.status() == psutil.STATUS_STOPPED for p in snapshot if procs.alive(p)):
            break
        if when == "running" and any("skillbank.cli train" in " ".join(p.cmdline()) for p in snapshot if procs.alive(p)):
            started_at = started_at or time.monotonic()
            if time.monotonic() - started_at >= delay:
                break
        time.sleep(0.05)
    if worker.poll() is not None:
        out = worker.communicate()[0]
        return {"code": worker.returncode, "left": [], "traceback": "Traceback" in out, "line": out.strip().splitlines()[-1:],
                "latency_s": None, "when": when, "note": "ended before the signal"}
    snapshot = procs.descendants(worker.pid)
    sent = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    out, _ = worker.communicate(timeout=300)
    latency = time.monotonic() - sent
    left = [p.pid for p in snapshot if procs.alive(p)]
    for pid in left:  # leave the machine clean for the next run, whatever happened
        psutil.Process(pid).kill()
    logs = "".join(p.read_text(errors="replace") for p in out_dir.glob("trials/*/train.log"))
    last = out.strip().splitlines()[-1] if out.strip() else ""
    return {"code": worker.returncode, "left": left, "when": when, "latency_s": latency,
            "traceback": any(word in text for text in (out, logs) for word in ("Traceback", "Exception ignored")),
            "line": last, "note": "" if last.startswith("automl: this worker stopped (SIGTERM)") else "no stop line"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="stops to try (default: %(default)s)")
    parser.add_argument("--busy", type=int, default=2, help="CPU-spinning processes during the runs (default: %(default)s)")
    parser.add_argument("--when", choices=("paused", "running", "mixed"), default="mixed", help="the moment of the SIGTERM (default: %(default)s)")
    parser.add_argument("--jitter", type=float, default=20.0, help="--when running: up to this many seconds after the trainer starts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", metavar="DIR", help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="stop-stress-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = base_spec(work)
    rng = random.Random(args.seed)
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    rows = []
    try:
        for i in range(args.runs):
            when = args.when if args.when != "mixed" else ("paused", "running")[i % 2]
            row = one_run(spec, work / f"run{i:02d}", when, args.jitter, rng)
            rows.append(row)
            print(f"run {i + 1:>2}/{args.runs} {row['when']:<7} exit {row['code']:>4}  left {len(row['left'])}  "
                  f"traceback {'YES' if row['traceback'] else 'no '}  stop {row['latency_s'] or 0:5.1f}s  {row['note']}", flush=True)
    finally:
        stop.set()
        for p in busy:
            p.join(timeout=5)
    good = [r for r in rows if r["code"] == 128 + signal.SIGTERM and not r["left"] and not r["traceback"] and not r["note"]]
    latencies = [r["latency_s"] for r in rows if r["latency_s"] is not None]
    print(f"{len(good)}/{len(rows)} runs ended 143 with nothing left, one stop line and no traceback (goal: all), "
          f"{args.busy} busy process(es) on {multiprocessing.cpu_count()} cores; "
          f"stop latency median {statistics.median(latencies) if latencies else float('nan'):.1f}s (max {max(latencies, default=0):.1f}s)")
    sys.exit(0 if len(good) == len(rows) else 1)


if __name__ == "__main__":
    main()
