"""The demo on every seed: `skillbank demo --seed N --json` for seeds 0-9, one after the other.

Prints (and writes as markdown, --md) one row per seed: trained held-out accuracy per family, whether
every family reached the recipe's `expect`, the training steps, the demo's wall time, CPU seconds (with
the training ranks), steps/s and the load average at the end. Targets (issue 41 item 3): every family
>= 95% on every seed, each demo <= 180 s on a quiet 2-core machine with cached assets (the first run of
a seed also writes its clips and builds its model: run the seeds once before timing them).

    .venv/bin/python benchmarks/demo_seeds.py [--seeds 0 1 2 ...] [--out results/demo-seeds] [--md FILE] [-- extra demo flags]
    .venv/bin/python benchmarks/demo_seeds.py --from results/demo-seeds   # the table of finished runs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

FAMILIES = ("colour", "directionality", "yes_no")
BUDGET_S = 180.0


def row(seed: int, doc: dict) -> dict:
    fams = doc["families"]
    expect = doc["short_of_expected"]["expected"]
    return {
        "seed": seed,
        **{f: fams.get(f, {}).get("trained_accuracy") for f in FAMILIES},
        "ok": not doc["short_of_expected"]["families"] and expect is not None,
        "steps": doc["training"]["last_step"],
        "wall_s": doc["wall_s"],
        "train_s": doc["timings"].get("train_s"),
        "cpu_s": doc["cpu_s"],
        "steps_per_s": doc["training"]["steps_per_s"],
        "load": doc["load_average"][0],
    }


def table(rows: list[dict]) -> str:
    head = "| seed | colour | directionality | yes/no | all >= 95% | steps | wall s | train s | CPU s | steps/s | load (1 min) |"
    lines = [head, "|" + "---|" * head.count("|")[:-1] if False else "|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|"]
    for r in rows:
        pct = [f"{100 * r[f]:.1f}%" if r[f] is not None else "n/a" for f in FAMILIES]
        lines.append(f"| {r['seed']} | {' | '.join(pct)} | {'yes' if r['ok'] else 'NO'} | {r['steps']} | {r['wall_s']:.0f} | "
                     f"{r['train_s']:.0f} | {r['cpu_s']:.0f} | {r['steps_per_s']} | {r['load']:.1f} |")
    walls = [r["wall_s"] for r in rows]
    lines.append("")
    lines.append(f"{sum(r['ok'] for r in rows)} of {len(rows)} seeds reached 95% on every family; wall {min(walls):.0f}-{max(walls):.0f} s "
                 f"(budget {BUDGET_S:.0f} s on a quiet machine); {os.cpu_count()} cores")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--out", default="results/demo-seeds", help="one demo folder per seed under it (seed_N)")
    parser.add_argument("--md", default=None, help="also write the table (and the recipe) to this markdown file")
    parser.add_argument("--from", dest="from_dir", default=None, help="read <dir>/seed_N/demo.json instead of running")
    parser.add_argument("extra", nargs="*", help="extra `skillbank demo` flags, after --")
    args = parser.parse_args()
    out = Path(args.from_dir or args.out)
    rows, recipe = [], None
    for seed in args.seeds:
        folder = out / f"seed_{seed}"
        if args.from_dir:
            doc = json.loads((folder / "demo.json").read_text(encoding="utf-8"))
        else:
            folder.mkdir(parents=True, exist_ok=True)
            argv = [sys.executable, "-m", "skillbank.cli", "demo", "--seed", str(seed), "--out", str(folder), "--json", *args.extra]
            started = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"seed {seed}: demo failed ({proc.returncode}):\n{proc.stderr[-3000:]}", file=sys.stderr)
                return 1
            doc = json.loads(proc.stdout)
            (folder / "demo.json").write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
            print(f"seed {seed}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        recipe = doc["recipe"]
        rows.append(row(seed, doc))
    text = table(rows)
    print(text)
    if args.md:
        body = f"# `skillbank demo` on seeds {args.seeds[0]}-{args.seeds[-1]}\n\nrecipe: `{json.dumps(recipe)}`\n\n{text}\n"
        Path(args.md).write_text(body, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
