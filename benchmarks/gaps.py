"""DEFT gap analysis on 1,000,000 results + 1,000,000 annotations: ours (DuckDB) over an evaluate
output and over results.json alone vs the previous reader vs the public script's method.

Targets (issue 41): ours over an evaluate output (results.json with the results.parquet evaluate
writes beside it) <= 0.10 of the public method's wall time, ours over results.json alone <= 0.20;
both <= 0.20 of its peak memory, the same rows. The methods alternate, --repeat times each (default
3); medians are compared, CPU time beside wall time (on a loaded machine CPU time is the steadier
figure: ours reads JSON over parts on every core, skillbank.data.jsonparts, so its wall time gains
from a free core).

- ours, evaluate output: `skillbank gaps` on a folder holding results.json and results.parquet
  (skillbank.evaluation.results_parquet: the same rows, written here by evaluate's own writer, with
  each record's video and the stamp that names the annotations): the rules once per distinct answer,
  joined back to the parquet's rows; the annotations file is not read (the stamp says it is the one
  the records came from, unchanged), COPY TO parquet.
- ours, results.json alone: the same command on a folder holding only results.json (a hard link):
  read_json over its parts, the answer rules as SQL, read_json of the annotations for the failing
  ids, COPY TO parquet.
- previous reader: skillbank's hand-written pyarrow JSON-array streaming (gaps/analyze.py and
  gaps/jsonarray.py at commit 5063593), loaded from git history into a temporary package.
- public method: the tao-skill-bank `analyze_gaps.py`: json.load of both files, a Python loop,
  pandas to write.
Data: json.dump(indent=2)-style files (~160 MB results, ~345 MB LLaVA annotations), 70% correct,
yes/no answers; media paths relative. Each method runs in a fresh interpreter (imports included);
peak memory is the child's own max RSS at exit (ru_maxrss). All must find the same failures.

    .venv/bin/python benchmarks/gaps.py [--records 1000000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import os
import random
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _child import child_argv, measure, size_args  # benchmarks/ is sys.path[0] when run as a script

TARGET_WALL = {"ours, evaluate output": 0.10, "ours, results.json alone": 0.20}  # issue 41: ours / public wall time
TARGET_MEMORY = 0.20  # and peak memory

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


def write_parquet(data: Path) -> None:
    """results.parquet beside results.json, as evaluate writes it (its rows scored, each record's video,
    the stamp); and eval_json/, a folder holding only results.json (a hard link: the same file)."""
    import json

    from skillbank.evaluation import results_parquet
    from skillbank.evaluation.metrics import score_results

    results = data / "eval" / "results.json"
    rows, _ = score_results(json.loads(results.read_text()))
    videos = [f"videos/{r['video_id']}.mp4" for r in rows]  # as ANNOTATION writes each record's video
    results_parquet.write(data / "eval" / results_parquet.PARQUET, rows, videos, results_json=results,
                          annotations=str(data / "annotations.json"), task_type="", answer_type="short")
    (data / "eval_json").mkdir(exist_ok=True)
    os.link(results, data / "eval_json" / "results.json")


PREVIOUS_COMMIT = "5063593"
PREVIOUS_FILES = ("src/skillbank/gaps/analyze.py", "src/skillbank/gaps/jsonarray.py")


def previous_package(folder: Path) -> Path:
    """The previous reader (git history) as the package `previous_gaps` under folder; returns folder."""
    root = Path(__file__).resolve().parents[1]
    package = folder / "previous_gaps"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    for path in PREVIOUS_FILES:
        text = subprocess.run(["git", "show", f"{PREVIOUS_COMMIT}:{path}"], cwd=root, capture_output=True, text=True, check=True).stdout
        (package / Path(path).name).write_text(re.sub(r"skillbank\.gaps\.", "previous_gaps.", text))
    return folder


def ours_argv(data: Path, folder: str, stem: str) -> list[str]:
    body = "from skillbank.cli import main; rc = main(argv)\nassert rc == 0, rc"
    return child_argv(body, "gaps", "--results-dir", str(data / folder),
                      "--out", str(data / f"{stem}.parquet"), "--annotations", str(data / "annotations.json"), "--media-root", str(data), "--json")


def previous_argv(data: Path, package_root: Path) -> list[str]:
    body = (f"sys.path.insert(0, {str(package_root)!r}); from previous_gaps.analyze import analyze_gaps\n"
            "analyze_gaps(argv[0], argv[1], annotations=argv[2], media_root=argv[3], threads=2)")
    return child_argv(body, str(data / "eval"), str(data / "previous.parquet"),
                      str(data / "annotations.json"), str(data))


def public_argv(data: Path) -> list[str]:
    body = "exec(compile(" + repr(PUBLIC) + ", 'public_analyze_gaps', 'exec'), {'__name__': '__main__'})"
    return child_argv(body, str(data / "eval"), str(data / "public.parquet"),
                      str(data / "annotations.json"), str(data))


def main() -> None:
    args = size_args(__doc__, repeat=3)

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
        if not (data / "eval" / "results.parquet").is_file():
            start = time.perf_counter()
            here = str(Path(__file__).resolve().parent)  # in a child: this process's peak memory must stay the generator's
            subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); from pathlib import Path; import gaps; "
                            f"gaps.write_parquet(Path({str(data)!r}))"], check=True)
            mb = (data / "eval" / "results.parquet").stat().st_size / 1e6
            print(f"wrote results.parquet as evaluate does ({mb:,.0f} MB) in {time.perf_counter() - start:.1f} s")
        package_root = previous_package(data / "previous")
        stems = {"public method": "public", "previous reader": "previous", "ours, results.json alone": "ours_json",
                 "ours, evaluate output": "ours_parquet"}
        methods = {
            "public method": public_argv(data),
            "previous reader": previous_argv(data, package_root),
            "ours, results.json alone": ours_argv(data, "eval_json", stems["ours, results.json alone"]),
            "ours, evaluate output": ours_argv(data, "eval", stems["ours, evaluate output"]),
        }
        runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in methods}
        outputs: dict[str, str] = {}
        for _ in range(args.repeat):
            for name, argv in methods.items():
                wall, peak, cpu, out = measure(argv)
                runs[name].append((wall, peak, cpu))
                outputs[name] = out
        import json

        import pyarrow.parquet as pq

        rows = {name: pq.read_metadata(data / f"{stem}.parquet").num_rows for name, stem in stems.items()}
        med = {name: tuple(statistics.median(run[i] for run in r) for i in range(3)) for name, r in runs.items()}
        print(f"{'':26}{'wall s':>9}{'peak RSS GiB':>14}{'CPU s':>8}{'failures':>11}   (medians of {args.repeat})")
        for name in methods:
            w, p, c = med[name]
            print(f"{name:26}{w:>9.2f}{p:>14.2f}{c:>8.2f}{rows[name]:>11,}")
        for name in methods:
            print(f"  {name} runs (wall / CPU s): " + ", ".join(f"{w:.2f} / {c:.2f}" for w, _, c in runs[name]))
        pw, pp, pc = med["public method"]
        met = True
        for name, target in TARGET_WALL.items():
            (ow, op, oc), (vw, vp, _) = med[name], med["previous reader"]
            time_ok, mem_ok = ow <= target * pw, op <= TARGET_MEMORY * pp
            met = met and time_ok and mem_ok
            print(f"{name} / public: wall {ow / pw:.3f} (target <= {target}: {'met' if time_ok else 'NOT met'}), CPU {oc / pc:.3f}, "
                  f"memory {op / pp:.3f} (target <= {TARGET_MEMORY}: {'met' if mem_ok else 'NOT met'}); "
                  f"/ previous reader: wall {ow / vw:.3f}, memory {op / vp:.3f}")
        read = json.loads(outputs["ours, evaluate output"])
        print(f"ours over the evaluate output read {Path(read['results_read']).name} and took the media paths from "
              f"{Path(read['media_from'] or '-').name}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if len(set(rows.values())) != 1:
            raise SystemExit(f"the methods disagree on the failures: {rows}")
        public_paths = pq.read_table(data / "public.parquet", columns=["video_id"])["video_id"].to_pylist()
        for name in ("ours, results.json alone", "ours, evaluate output"):
            if pq.read_table(data / f"{stems[name]}.parquet", columns=["media_path"])["media_path"].to_pylist() != public_paths:
                raise SystemExit(f"{name} lists the failures in another order than results.json")  # the public loop keeps file order
        sys.exit(0 if met else 1)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
