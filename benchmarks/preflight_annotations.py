"""Benchmark: preflight's check of every record vs the public preflight's json.load + 20 samples.

Writes a 1,000,000-record LLaVA annotations.json (~230 MB, video records with video_fps, record
500,000 without it) and a few media files every record points at, then runs, each in a fresh
subprocess and side by side:

- ours:   `run_preflight` (train action) on a spec naming that file: every record's rules, unique
          ids, media existence under the media folder, the token budget, the other spec checks;
- public: json.load of the whole file, then the checks on 20 randomly sampled records.

Wall time is measured inside each subprocess around the work (interpreter start excluded for both;
the process total is printed too), with the CPU time (user + sys) of the same span beside it: on a
shared machine CPU time is the steadier figure. Peak memory is the subprocess's peak RSS. The two methods
alternate, --repeat times each (default 3); medians are compared. Targets (issue 30): ours <= 0.20 of the
public wall time and <= 0.20 of its peak memory, every record checked. The public method misses record
500,000.

Ours reads the array with DuckDB over parts of the file on every core (skillbank.data.jsonparts), so its
wall time gains from a second free core and its CPU time is the figure to compare on a loaded machine.
Why the ratio differs between machines: the public method uses one core, ours two, so the ratio is
ours' CPU ratio divided by what the second core adds. "ours, 1 thread" (DuckDB on one thread, the same
work) measures that in the same run: speed-up = its wall / ours'. On a machine whose second vCPU adds
little (a hyperthread sibling, a busy host), the wall ratio tends to the CPU ratio.

    .venv/bin/python benchmarks/preflight_annotations.py [--records N] [--repeat R] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BAD_INDEX = 500_000
TARGET_WALL = 0.20  # issue 30: ours / public wall time
TARGET_MEMORY = 0.20  # and peak memory
MEDIA_FILES = 8
QUESTION = "<video>\\nIs the vehicle in front of the ego car turning left at the next intersection?"


def generate(folder: Path, records: int) -> Path:
    """Write the annotations (one record per line inside the array) and the media files."""
    media = folder / "media" / "videos"
    media.mkdir(parents=True, exist_ok=True)
    for i in range(MEDIA_FILES):
        (media / f"clip_{i}.mp4").write_bytes(b"\0")
    path = folder / "annotations.json"
    good = (
        '  {{"id": "clip_{i:07d}", "video": "videos/clip_{m}.mp4", "video_fps": 30.0, "conversations": '
        '[{{"from": "human", "value": "' + QUESTION + '"}}, {{"from": "gpt", "value": "{a}"}}]}}'
    )
    bad = good.replace(', "video_fps": 30.0', "")
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n")
        lines = []
        for i in range(records):
            lines.append((bad if i == BAD_INDEX else good).format(i=i, m=i % MEDIA_FILES, a="yes" if i % 2 else "no"))
            if len(lines) == 10_000:
                f.write(",\n".join(lines) + (",\n" if i < records - 1 else "\n"))
                lines = []
        if lines:
            f.write(",\n".join(lines) + "\n")
        f.write("]\n")
    model = folder / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (model / "model.safetensors").write_bytes(b"\0" * 1024)
    return path


def spec_for(folder: Path, annotations: Path) -> dict:
    return {
        "train": {"train_batch_per_replica": 32, "output_dir": str(folder / "out"), "train_policy": {"mini_batch": 2}},
        "policy": {"model_name_or_path": str(folder / "model"), "parallelism": {"dp_shard_size": 8}},
        "custom": {"train_dataset": {"annotation_path": str(annotations), "media_path": str(folder / "media")}},
    }


# ---- the two methods, each run in its own process --------------------------------------------------


def run_ours(folder: Path, annotations: Path, threads: int | None = None) -> dict:
    from skillbank.preflight import datasets
    from skillbank.preflight.run import run_preflight

    if threads:
        connect = datasets.connect

        def one_thread() -> object:
            con = connect()
            con.execute(f"SET threads = {threads}")
            return con

        datasets.connect = one_thread

    started = time.perf_counter()
    report = run_preflight(skill="tao-finetune-cosmos-reason", action="train", spec=spec_for(folder, annotations), gpus_per_node=8, nodes=1, backend="local")
    seconds = time.perf_counter() - started
    found = any(f.where.endswith(f"#{BAD_INDEX}") and f.check == "annotations.video_fps" for f in report.findings)
    return {"seconds": seconds, "checked": report.stats["checked"], "found_bad_record": found, "findings": [f.check for f in report.findings]}


def run_public(folder: Path, annotations: Path) -> dict:
    """The public bank's method: load everything, look at 20 records."""
    import random

    started = time.perf_counter()
    with open(annotations, encoding="utf-8") as f:
        records = json.load(f)
    problems = []
    for index in random.Random(0).sample(range(len(records)), 20):
        rec = records[index]
        if not isinstance(rec, dict) or "conversations" not in rec or len(rec["conversations"]) < 2:
            problems.append(index)
        elif "video" in rec and "video_fps" not in rec:
            problems.append(index)
        elif "video" in rec and not os.path.exists(os.path.join(folder, "media", rec["video"])):
            problems.append(index)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "checked": 20, "found_bad_record": BAD_INDEX in problems, "findings": problems}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(method: str, folder: str, annotations: str) -> None:
    cpu = _cpu()
    methods = {"ours": run_ours, "public": run_public, "ours, 1 thread": lambda f, a: run_ours(f, a, threads=1)}
    result = methods[method](Path(folder), Path(annotations))
    result["cpu_seconds"] = _cpu() - cpu
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(method: str, folder: Path, annotations: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", method, str(folder), str(annotations)], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each method, alternating (medians are compared)")
    parser.add_argument("--keep", metavar="DIR", help="write the data here and keep it (reused when present)")
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "FOLDER", "FILE"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(*opts.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="preflight-bench-") as tmp:
        folder = Path(opts.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        annotations = folder / "annotations.json"
        if not annotations.exists():
            t = time.perf_counter()
            generate(folder, opts.records)
            print(f"wrote {annotations} ({annotations.stat().st_size / 1e6:.0f} MB, {opts.records:,} records) in {time.perf_counter() - t:.1f} s")
        runs: dict[str, list[dict]] = {"ours": [], "public": [], "ours, 1 thread": []}
        for _ in range(opts.repeat):
            for method in runs:
                runs[method].append(measure(method, folder, annotations))
        report(runs)
    return 0


def report(runs: dict[str, list[dict]]) -> None:
    keys = ("seconds", "cpu_seconds", "process_seconds", "peak_rss_mb")
    med = {m: {k: statistics.median(r[k] for r in rs) for k in keys} for m, rs in runs.items()}
    print(f"\n{'method':<15} {'wall s':>8} {'cpu s':>7} {'process s':>10} {'peak RSS MB':>12} {'records checked':>16}  found record {BAD_INDEX:,}")
    for method, rs in runs.items():
        m, last = med[method], rs[-1]
        print(
            f"{method:<15} {m['seconds']:>8.2f} {m['cpu_seconds']:>7.2f} {m['process_seconds']:>10.2f} {m['peak_rss_mb']:>12.0f} "
            f"{last['checked']:>16,}  {last['found_bad_record']}"
        )
    if len(next(iter(runs.values()))) > 1:
        for method, rs in runs.items():
            print(f"  {method} runs (wall / cpu / peak): " + ", ".join(f"{r['seconds']:.2f} s / {r['cpu_seconds']:.2f} s / {r['peak_rss_mb']:.0f} MB" for r in rs))
    ratio = {k: med["ours"][k] / med["public"][k] for k in keys}
    print(
        f"\nours / public (medians): wall {ratio['seconds']:.3f} (target <= {TARGET_WALL}: {'met' if ratio['seconds'] <= TARGET_WALL else 'MISSED'}), "
        f"cpu {ratio['cpu_seconds']:.3f}, process {ratio['process_seconds']:.3f}, "
        f"peak memory {ratio['peak_rss_mb']:.3f} (target <= {TARGET_MEMORY}: {'met' if ratio['peak_rss_mb'] <= TARGET_MEMORY else 'MISSED'})"
    )
    if "ours, 1 thread" in med:
        one = med["ours, 1 thread"]
        print(f"ours on 1 thread / public: wall {one['seconds'] / med['public']['seconds']:.3f}, cpu {one['cpu_seconds'] / med['public']['cpu_seconds']:.3f}; "
              f"the second thread's speed-up: {one['seconds'] / med['ours']['seconds']:.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"ours reported: {sorted(set(runs['ours'][-1]['findings']))}")

if __name__ == "__main__":
    sys.exit(main())
