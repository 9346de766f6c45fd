"""DEFT gap analysis on 1,000,000 results + 1,000,000 annotations: ours vs the public script's method.

Targets: ours <= 1/4 of the public method's wall time and <= 1/3 of its peak memory.

The public tao-skill-bank `analyze_gaps.py` json.loads both files, loops in Python and writes with
pandas. Ours (`skillbank gaps`) parses the arrays with pyarrow in bounded pieces and looks up only
the failing ids. Data: json.dump(indent=2)-style files (~160 MB results, ~345 MB LLaVA annotations),
70% correct, yes/no answers; media paths relative. Each method runs in a fresh interpreter (imports
included); peak memory is the child's own max RSS at exit (ru_maxrss). Both must find the same failures.

    .venv/bin/python benchmarks/gaps.py [--records 1000000] [--repeat 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTIONS = ("Is the ball red? Answer yes or no.", "Is the ball moving left? Answer yes or no.")

RESULT = """  {{
    "video_id": "{id}",
    "question": "{q}",
    "gt": "{gt}",
    "response": "{r}"
  }}"""

ANNOTATION = """  {{
    "id": "{id}",
    "video": "videos/{id}.mp4",
    "video_fps": 8.0,
    "conversations": [
      {{
        "from": "human",
        "value": "<video>\\n{q}"
      }},
      {{
        "from": "gpt",
        "value": "{gt}"
      }}
    ]
  }}"""

# the public script's method (NVIDIA-TAO/tao-skill-bank scripts/analyze_gaps.py), same inputs and output
PUBLIC = """
import json, os, sys
import pandas as pd
results_dir, gaps_parquet, kpi_ann_path, kpi_media_path = sys.argv[1:5]
with open(kpi_ann_path) as f:
    annotations = json.load(f)
with open(os.path.join(results_dir, "results.json")) as f:
    predictions_data = json.load(f)
ann_lookup = {ann["id"]: ann["video"] for ann in annotations}
fp_fn_cases = []
for item in predictions_data:
    video_id = item.get("video_id", "")
    response = item.get("response", "").lower().strip()
    question = item.get("question", "")
    gt = item.get("gt", "").lower().strip()
    if response != gt:
        video_path = ann_lookup.get(video_id)
        if not video_path:
            raise FileNotFoundError(video_id)
        if not os.path.isabs(video_path):
            video_path = os.path.join(kpi_media_path, video_path)
        fp_fn_cases.append({"video_id": video_path, "question": question, "ground_truth": gt})
df = pd.DataFrame(fp_fn_cases)
df.to_parquet(gaps_parquet, index=False)
print(len(df))
"""


def generate(folder: Path, records: int, seed: int = 0) -> int:
    """Write results.json and annotations.json; return the number of failures."""
    rng = random.Random(seed)
    (folder / "eval").mkdir(parents=True)
    failures = 0
    with open(folder / "eval" / "results.json", "w") as res, open(folder / "annotations.json", "w") as ann:
        res.write("[\n")
        ann.write("[\n")
        block_r, block_a = [], []
        for i in range(records):
            bits = rng.getrandbits(128)
            h = f"{bits:032x}"
            vid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            q = QUESTIONS[i & 1]
            gt = "yes" if bits & 1 else "no"
            roll = (bits >> 1) % 100
            r = gt if roll < 70 else ("no" if gt == "yes" else "yes")
            if roll % 20 == 0:
                r = r.capitalize() + " "  # same after lower().strip()
            failures += r.lower().strip() != gt
            block_r.append(RESULT.format(id=vid, q=q, gt=gt, r=r))
            block_a.append(ANNOTATION.format(id=vid, q=q, gt=gt))
            if len(block_r) == 50_000 or i == records - 1:
                last = i == records - 1
                res.write(",\n".join(block_r) + ("\n" if last else ",\n"))
                ann.write(",\n".join(block_a) + ("\n" if last else ",\n"))
                block_r, block_a = [], []
        res.write("]\n")
        ann.write("]\n")
    return failures


def measure(argv: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS GiB, CPU seconds) of a fresh child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"a benchmark child failed ({proc.returncode}):\n{err[-3000:]}")
    cpu, peak_kib = map(float, out.strip().splitlines()[-1].split())
    return wall, peak_kib / 1024**2, cpu


# Each child prints its own CPU seconds and peak RSS (ru_maxrss, KiB) last.
WRAP = (
    "import resource, sys\n"
    "argv = sys.argv[1:]\n"
    "try:\n"
    "    {body}\n"
    "except SystemExit as e:\n"
    "    if e.code not in (0, None): raise\n"
    "u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(u.ru_utime + u.ru_stime, u.ru_maxrss)\n"
)


def ours_argv(data: Path) -> list[str]:
    body = "from skillbank.cli import main; rc = main(argv)\n    assert rc == 0, rc"
    return [sys.executable, "-c", WRAP.format(body=body), "gaps", "--results-dir", str(data / "eval"),
            "--out", str(data / "ours.parquet"), "--annotations", str(data / "annotations.json"), "--media-root", str(data), "--json"]


def public_argv(data: Path) -> list[str]:
    body = "exec(compile(" + repr(PUBLIC) + ", 'public_analyze_gaps', 'exec'), {'__name__': '__main__'})"
    return [sys.executable, "-c", WRAP.format(body=body), str(data / "eval"), str(data / "public.parquet"),
            str(data / "annotations.json"), str(data)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each method (alternating); the best is compared")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it (reused when it exists)")
    args = parser.parse_args()

    tmp = None
    if args.keep:
        data = Path(args.keep)
    else:
        tmp = tempfile.mkdtemp(prefix="gaps-bench-")
        data = Path(tmp)
    try:
        if not (data / "eval" / "results.json").is_file():
            start = time.perf_counter()
            expected = generate(data, args.records)
            mb = sum((data / p).stat().st_size for p in ("eval/results.json", "annotations.json")) / 1e6
            print(f"generated {args.records:,} results + annotations ({mb:,.0f} MB, {expected:,} failures) in {time.perf_counter() - start:.1f} s")
        runs: dict[str, list[tuple[float, float, float]]] = {"ours (skillbank gaps)": [], "public method": []}
        for _ in range(args.repeat):
            for name, argv in (("public method", public_argv(data)), ("ours (skillbank gaps)", ours_argv(data))):
                runs[name].append(measure(argv))
        import pyarrow.parquet as pq

        n_ours = pq.read_metadata(data / "ours.parquet").num_rows
        n_public = pq.read_metadata(data / "public.parquet").num_rows
        best = {name: tuple(min(run[i] for run in r) for i in range(3)) for name, r in runs.items()}
        (ow, op, oc), (pw, pp, pc) = best["ours (skillbank gaps)"], best["public method"]
        print(f"{'':24}{'wall s':>9}{'peak RSS GiB':>14}{'CPU s':>8}{'failures':>11}")
        print(f"{'public method':24}{pw:>9.2f}{pp:>14.2f}{pc:>8.2f}{n_public:>11,}")
        print(f"{'ours (skillbank gaps)':24}{ow:>9.2f}{op:>14.2f}{oc:>8.2f}{n_ours:>11,}")
        time_ok, mem_ok = ow <= pw / 4, op <= pp / 3
        print(f"ours / public: time {ow / pw:.3f} (target <= 0.25: {'met' if time_ok else 'NOT met'}), "
              f"memory {op / pp:.3f} (target <= 0.333: {'met' if mem_ok else 'NOT met'})")
        if n_ours != n_public:
            raise SystemExit(f"the two methods disagree: {n_ours} vs {n_public} failures")
        sys.exit(0 if time_ok and mem_ok else 1)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
