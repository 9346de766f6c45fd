"""Benchmark: `skillbank data import` of a clips + labels folder vs bare PyAV header probing (the floor).

Writes `--real` real mp4s with PyAV (frame rates 8 / 10 / 24 / 30, 8-40 frames of 64x64), then a source
in the Cosmos-Reason2 AV layout with `--clips` clips: `videos/clipNNNNN.front_wide.mp4` (symlinks to the
real files) and `metas/clipNNNNN.label.json` (one question, every 5th clip two). Then, each in a fresh
subprocess, alternating, `--repeat` times:

- import: `python -m skillbank.cli data import SRC --out OUT` (the whole command: interpreter start,
          walking the folder, reading every label while worker processes probe the clips named so far,
          the split, a link per split, the annotation files and import.json);
- floor:  one process that opens every clip with PyAV, one after another, and reads its first video
          stream's rate, length, frame count and size (what the import must at least do).

Wall times are of the whole subprocess for both (interpreter start included for both), with the CPU
time (user + sys) beside them: on a shared machine CPU time is the steadier figure. Goal: import
<= 1.3x the floor's wall time on 2 cores (parallel probing should beat it).

    .venv/bin/python benchmarks/data_import.py [--clips 10000] [--real 300] [--repeat 3] [--workers N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RATES = (8, 10, 24, 30)
FLOOR = """
import sys, av
paths = open(sys.argv[1], encoding="utf-8").read().split("\\n")
out = []
for path in paths:
    with av.open(path) as c:
        s = c.streams.video[0]
        out.append((float(s.average_rate or s.guessed_rate), float(s.duration * s.time_base) if s.duration else c.duration / 1e6,
                    s.frames, s.codec_context.width, s.codec_context.height))
print(len(out))
"""


def generate(folder: Path, clips: int, real: int) -> tuple[Path, Path]:
    """The source folder and a file listing its clips (the floor's input)."""
    import numpy as np

    from skillbank.assets.demo_dataset import write_mp4

    originals = folder / "real"
    originals.mkdir(parents=True, exist_ok=True)
    for i in range(real):
        frames = np.zeros((8 + (i * 7) % 33, 64, 64, 3), np.uint8)
        frames[:, (i % 40) : (i % 40) + 16, 10:26] = (i * 37) % 255
        write_mp4(originals / f"r{i:04d}.mp4", frames, fps=RATES[i % len(RATES)])
    source = folder / "src"
    (source / "videos").mkdir(parents=True)
    (source / "metas").mkdir()
    listed = []
    for i in range(clips):
        video = source / "videos" / f"clip{i:05d}.front_wide.mp4"
        os.symlink(originals / f"r{i % real:04d}.mp4", video)
        listed.append(str(video))
        labels = [{"question": "Is it safe to change lanes?", "answer": "yes" if i % 2 else "no", "weather": "rain", "family": "yes_no"}]
        if i % 5 == 0:
            labels.append({"question": "Which way does the lead car turn?", "answer": ("left", "right", "straight")[i % 3], "family": "direction"})
        (source / "metas" / f"clip{i:05d}.label.json").write_text(json.dumps(labels), encoding="utf-8")
    listing = folder / "clips.txt"
    listing.write_text("\n".join(listed), encoding="utf-8")
    return source, listing


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=10_000)
    parser.add_argument("--real", type=int, default=300, help="real mp4s the clips link to")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, help="passed to data import --workers")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the source here instead of a temp folder")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="sb-import-bench-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    try:
        if (folder / "clips.txt").is_file():
            source, listing = folder / "src", folder / "clips.txt"
        else:
            started = time.perf_counter()
            source, listing = generate(folder, args.clips, args.real)
            print(f"generated {args.clips} clips ({args.real} real mp4s) in {time.perf_counter() - started:.1f} s under {folder}")
        script = folder / "floor.py"
        script.write_text(FLOOR, encoding="utf-8")
        extra = ["--workers", str(args.workers)] if args.workers else []
        timed([sys.executable, str(script), str(listing)], env)  # warm the page cache for both
        floor, ours, report = [], [], {}
        for _ in range(args.repeat):
            floor.append(timed([sys.executable, str(script), str(listing)], env)[:2])
            out = folder / "out"
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu, stdout = timed([sys.executable, "-m", "skillbank.cli", "data", "import", str(source), "--out", str(out), "--json", *extra], env)
            ours.append((wall, cpu))
            report = json.loads(stdout)
        med = lambda pairs, i: statistics.median(p[i] for p in pairs)  # noqa: E731
        print(f"{report['counts']['records']} records on {report['counts']['clips']} clips; cores: {os.cpu_count()}; "
              f"median of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'':22}{'wall s':>10}{'cpu s':>10}")
        print(f"{'floor (bare PyAV)':22}{med(floor, 0):10.2f}{med(floor, 1):10.2f}")
        print(f"{'skillbank data import':22}{med(ours, 0):10.2f}{med(ours, 1):10.2f}")
        ratio = med(ours, 0) / med(floor, 0)
        print(f"import / floor wall: {ratio:.2f}x (goal <= 1.3x) -> {'met' if ratio <= 1.3 else 'NOT met'}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
