"""The DEFT demo's targets: mined selection against random selection on the embedded default.

Runs `skillbank demo --deft --json` (or reads a finished run's deft_demo.json with --from) and prints,
for both arms, the records added and the weak family's (directionality) benchmark accuracy per round,
the records each needed to reach the target, the gain since round 0, the wall time and the machine's
load average. Targets (issue 13 item 7): mined reaches the target with at most half the records of
random (or at least twice its gain every round), and the whole demo takes <= 15 minutes on 2 cores.

    .venv/bin/python benchmarks/deft_demo.py [--out results/bench-deft] [--seed 0] [-- extra demo flags]
    .venv/bin/python benchmarks/deft_demo.py --from results/demo-deft/deft_demo.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 15 * 60


def summary(doc: dict, load_before: tuple[float, ...] | None = None, load_after: tuple[float, ...] | None = None) -> str:
    weak, target = doc["weak_family"], doc["target"]
    lines = [f"weak family {weak}, target {target:.2f}; sets {doc['sets']}", "",
             f"{'round':>5s} | {'mined: added':>12s} {weak[:5] + ' added':>11s} {weak[:5] + ' acc':>9s} {'all acc':>8s} | "
             f"{'random: added':>13s} {weak[:5] + ' added':>11s} {weak[:5] + ' acc':>9s} {'all acc':>8s}"]
    mined, rand = doc["arms"]["mined"]["rounds"], doc["arms"]["random"]["rounds"]
    def cells(row: dict | None, width: int) -> str:
        if row is None:
            return f"{'':>{width}s} {'':>11s} {'':>9s} {'':>8s}"
        return f"{row['records_added']:>{width}d} {row['weak_added']:>11d} {row['families'].get(weak, 0):>9.3f} {row['benchmark']:>8.3f}"

    for m, r in itertools.zip_longest(mined, rand):
        lines.append(f"{(m or r)['round']:>5d} | {cells(m, 12)} | {cells(r, 13)}")
    c = doc["comparison"]

    def need(got: dict | None, rows: list[dict]) -> str:
        return f"{got['records_added']} records (round {got['round']})" if got else f">= {rows[-1]['records_added'] + doc['recipe']['per_round']} records (not reached in {rows[-1]['round']} rounds)"

    lines += ["", f"records to reach {weak} >= {target:.2f}: mined {need(c['mined_reached'], mined)}, random {need(c['random_reached'], rand)}"
              f" -> at most half: {'MET' if c['records_target_met'] else 'not met'}",
              "gain since round 0 (mined / random): " + ", ".join(f"r{g['round']} {g['mined']:+.3f} / {g['random']:+.3f}" for g in c["gain_since_round_0"])
              + f" -> at least 2x every round: {'MET' if c['gain_target_met'] else 'not met'}",
              f"wall time {doc['wall_s']:.0f} s (budget {BUDGET_S} s: {'MET' if doc['wall_s'] <= BUDGET_S else 'not met'}); stages {doc['timings']}"]
    if load_before is not None:
        lines.append(f"load average (1/5/15 min) before {load_before}, after {load_after} on {os.cpu_count()} cores")
    lines.append(f"report: {doc['report']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/bench-deft", help="demo output folder (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from", dest="from_file", metavar="JSON", help="summarise a finished run's deft_demo.json instead of running")
    ap.add_argument("extra", nargs="*", help="more `skillbank demo --deft` flags, after --")
    args = ap.parse_args()
    if args.from_file:
        print(summary(json.loads(Path(args.from_file).read_text(encoding="utf-8"))))
        return
    before = tuple(round(x, 2) for x in os.getloadavg())
    cmd = [sys.executable, "-m", "skillbank.cli", "demo", "--deft", "--json", "--out", args.out, "--seed", str(args.seed), *args.extra]
    print("$ " + " ".join(cmd[2:]), file=sys.stderr, flush=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"skillbank demo --deft failed (exit {proc.returncode}) after {time.perf_counter() - t:.0f} s")
    after = tuple(round(x, 2) for x in os.getloadavg())
    print(summary(json.loads(proc.stdout), before, after))


if __name__ == "__main__":
    main()
