"""What `skillbank schemas generate --check` costs now that it covers the snapshots that need cosmos-rl
or torch (skillbank.generate.snapshots), side by side in one run, median of --repeat:

- light: cosmos_rl, torch and transformers hidden (a machine without them): the schemas alone;
- cold: an empty skillbank cache, so both snapshots are computed in their child processes;
- warm: the same cache again, so the snapshots' input digests match and no child starts.

Each figure is wall seconds and CPU seconds of the process and its children (RUSAGE_CHILDREN), with
its ratio to `light`. The machine's load moves the wall figures; the CPU figures move less.

    .venv/bin/python benchmarks/schemas_check.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HIDE = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("cosmos_rl", "torch", "transformers"):
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
from skillbank import cli
raise SystemExit(cli.main(["schemas", "generate", "--check"]))
"""


def measure(argv: list[str], cache: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env={**os.environ, "SKILLBANK_CACHE": cache}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    check = [sys.executable, "-m", "skillbank", "schemas", "generate", "--check"]
    runs: dict[str, list[tuple[float, float]]] = {"light": [], "cold": [], "warm": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            runs["light"].append(measure([sys.executable, "-c", HIDE], cache))
            runs["cold"].append(measure(check, cache))
            runs["warm"].append(measure(check, cache))
    light_wall = statistics.median(w for w, _ in runs["light"])
    light_cpu = statistics.median(c for _, c in runs["light"])
    print(f"{'':6} {'wall s':>8} {'x light':>8} {'cpu s':>8} {'x light':>8}   (median of {args.repeat}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    for name, values in runs.items():
        wall, cpu = statistics.median(w for w, _ in values), statistics.median(c for _, c in values)
        print(f"{name:6} {wall:8.2f} {wall / light_wall:8.2f} {cpu:8.2f} {cpu / light_cpu:8.2f}")


if __name__ == "__main__":
    main()
