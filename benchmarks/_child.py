"""What the benchmarks that time whole commands share: run a Python body in a fresh child process
that prints its own CPU seconds and peak RSS last, and read that back beside the wall time."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import time

# The child prints its CPU seconds and peak RSS (ru_maxrss, KiB) as its last line; a body that ends
# in sys.exit(0) (a CLI's main) still reports.
WRAP = (
    "import resource, sys\n"
    "argv = sys.argv[1:]\n"
    "try:\n"
    "{body}\n"
    "except SystemExit as e:\n"
    "    if e.code not in (0, None): raise\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(u.ru_utime + u.ru_stime, u.ru_maxrss)\n"
)


def child_argv(body: str, *args: str) -> list[str]:
    """`python -c` running `body` (which sees its arguments as `argv`) with the report appended."""
    return [sys.executable, "-c", WRAP.format(body=textwrap.indent(body, "    ")), *args]


def measure(argv: list[str]) -> tuple[float, float, float, str]:
    """(wall seconds, peak RSS GiB, CPU seconds, the child's output before its last line)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"a benchmark child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    *head, last = proc.stdout.strip().splitlines()
    cpu, peak_kib = map(float, last.split())
    return wall, peak_kib / 1024**2, cpu, "\n".join(head)


def size_args(doc: str | None, repeat: int = 1) -> argparse.Namespace:
    """The options of a benchmark over N generated records: --records, --repeat, --keep."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=repeat, help=f"runs of each method, alternating (default {repeat})")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it (reused when it exists)")
    return parser.parse_args()
