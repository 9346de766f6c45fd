"""Benchmark: the default `skillbank plan`'s clip probe vs `skillbank data import`'s, on the same 10,000 clips.

Builds the clips + labels source of benchmarks/data_import.py (`--real` real mp4s that `--clips` clip
files link to), imports it once to get LLaVA records (train and val together: every clip), and strips
the fields the import writes from the headers (duration, num_frames, width, height): records as a user
brings them, without clip lengths.
Then, each in a fresh subprocess, alternating, `--repeat` times:

- import: `python -m skillbank.cli data import SRC --out OUT` (walking the folder, reading every label
          while worker processes probe every clip's headers, the split, the annotation files);
- plan:   the default plan's token stage (skillbank.planning.tokens.from_data: preflight's scan of every
          record, every clip's headers read on worker processes and written to a fresh file cache, one
          token estimate per record), in a fresh interpreter with a fresh SKILLBANK_CACHE;
- again:  the same with the cache the plan just wrote (a second plan: every header from the cache).

Wall times of the whole subprocess (interpreter start included for all), CPU time (user + sys) beside
them: on a shared machine CPU time is the steadier figure. Goal: plan <= 1.3x import's wall time.
The whole `skillbank plan` (which also builds the model on the meta device) is timed once, for scale.

    .venv/bin/python benchmarks/plan_probe.py [--clips 10000] [--real 300] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_import import generate, timed  # noqa: E402 - the same clips and the same timing as the import benchmark

PLAN = """
import sys
from skillbank.planning.tokens import from_data
from skillbank.specification.io import load_spec
from skillbank.specification.train import TrainSpec
figures = from_data(load_spec(sys.argv[1], TrainSpec), "tao-finetune-cosmos-reason", "train")
t = figures.tokens
print(t["samples"], t["probed"], t["budget"], t["probe"]["from_cache"], t["probe"]["read"])
"""
STRIPPED = ("duration", "num_frames", "frames", "width", "height")


def bare_records(out: Path, folder: Path) -> Path:
    """The imported records (train and val: every clip the import probed; both splits link the same source
    folder) without the clip fields the import read from the headers."""
    records = [r for split in ("train", "val") for r in json.loads((out / split / "annotations.json").read_text(encoding="utf-8"))]
    for record in records:
        for key in STRIPPED:
            record.pop(key, None)
    path = out / "train" / "bare.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    spec = {"policy": {"model_name_or_path": "nvidia/Cosmos-Reason2-8B"}, "train": {"output_dir": str(folder / "run")},
            "validation": {"enable": False}, "custom": {"train_dataset": {"annotation_path": str(path), "media_path": str(out / "train")}}}
    spec_path = folder / "train.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    return spec_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=10_000)
    parser.add_argument("--real", type=int, default=300, help="real mp4s the clips link to")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the source here instead of a temp folder")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="sb-plan-probe-"))
    src_path = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src_path, os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
    try:
        if (folder / "clips.txt").is_file():
            source = folder / "src"
        else:
            started = time.perf_counter()
            source, _ = generate(folder, args.clips, args.real)
            print(f"generated {args.clips} clips ({args.real} real mp4s) in {time.perf_counter() - started:.1f} s under {folder}")
        script = folder / "plan_tokens.py"
        script.write_text(PLAN, encoding="utf-8")
        imported = folder / "imported"
        shutil.rmtree(imported, ignore_errors=True)
        timed([sys.executable, "-m", "skillbank.cli", "data", "import", str(source), "--out", str(imported)], env)  # the records, and a warm page cache
        spec = bare_records(imported, folder)
        imports, plans, agains, said = [], [], [], ""
        for i in range(args.repeat):
            out = folder / "out"
            shutil.rmtree(out, ignore_errors=True)
            imports.append(timed([sys.executable, "-m", "skillbank.cli", "data", "import", str(source), "--out", str(out)], env)[:2])
            cache = folder / f"cache{i}"
            shutil.rmtree(cache, ignore_errors=True)
            wall, cpu, stdout = timed([sys.executable, str(script), str(spec)], {**env, "SKILLBANK_CACHE": str(cache)})
            plans.append((wall, cpu))
            said = stdout.strip()
            agains.append(timed([sys.executable, str(script), str(spec)], {**env, "SKILLBANK_CACHE": str(cache)})[:2])
        whole = timed([sys.executable, "-m", "skillbank.cli", "plan", "--spec", str(spec), "--json"], {**env, "SKILLBANK_CACHE": str(folder / "cache0")})
        samples, probed, budget, _, read = (int(x) for x in said.split())
        med = lambda pairs, i: statistics.median(p[i] for p in pairs)  # noqa: E731
        print(f"{samples:,} train records, {read:,} clips read by the plan ({probed:,} probed, {budget:,} at the budget); cores: {os.cpu_count()}; "
              f"median of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'':36}{'wall s':>10}{'cpu s':>10}")
        print(f"{'skillbank data import':36}{med(imports, 0):10.2f}{med(imports, 1):10.2f}")
        print(f"{'plan tokens, every clip probed':36}{med(plans, 0):10.2f}{med(plans, 1):10.2f}")
        print(f"{'plan tokens again (from the cache)':36}{med(agains, 0):10.2f}{med(agains, 1):10.2f}")
        print(f"{'whole skillbank plan (cache warm)':36}{whole[0]:10.2f}{whole[1]:10.2f}   (once; it also builds the model on the meta device)")
        ratio = med(plans, 0) / med(imports, 0)
        print(f"plan / import wall: {ratio:.2f}x (goal <= 1.3x) -> {'met' if ratio <= 1.3 else 'NOT met'}; "
              f"cpu: {med(plans, 1) / med(imports, 1):.2f}x; a second plan: {med(agains, 0) / med(imports, 0):.2f}x")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
