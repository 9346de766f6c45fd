"""Cold-start wall time of `skillbank route ... --json` (target: median <= 0.25 s).

Each run is a fresh interpreter through the installed console script, as an agent calls it.
Printed beside it, for scale: a bare `python -c pass` and `python -c "import torch"` (what the
command would cost if it imported the training stack).

    .venv/bin/python benchmarks/route_cold_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def median_wall(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    route = [str(BIN / "skillbank"), "route", "--skill", "tao-finetune-cosmos-reason", "--action", "train",
             "--request", "fine-tune on my data, no HPO", "--json"]
    rows = [
        ("skillbank route --json", median_wall(route, args.runs)),
        ("python -c pass (floor)", median_wall([sys.executable, "-c", "pass"], args.runs)),
        ("python -c 'import torch' (avoided)", median_wall([sys.executable, "-c", "import torch"], max(3, args.runs // 5))),
    ]
    print(f"{'command':40s} {'median wall s':>14s}")
    for name, seconds in rows:
        print(f"{name:40s} {seconds:14.3f}")
    verdict = "meets" if rows[0][1] <= 0.25 else "MISSES"
    print(f"\nroute cold start {rows[0][1]:.3f} s {verdict} the 0.25 s target")


if __name__ == "__main__":
    main()
