"""Random search vs Hyperband-pruned Bayesian search on the demo task, same seeds and trial count.

Both studies search train.optm_lr (log, 1e-5..3e-3) and train.optm_decay_type on the tiny model
and the demo dataset, with real trials (local backend, every epoch's export evaluated on the
held-out clips, accuracy maximised). For each sampler seed the two studies get the same seed and
trial count; training itself is seeded the same in both, so one configuration scores the same
in either study. Printed per seed and algorithm: best accuracy, total trial-epochs, pruned trials,
and the trial-epochs each search spent until it first matched random search's best; then the
ratio pruned / random trial-epochs and the median over the seeds, and what each whole study spent.
Target: the pruned search reaches random's best with <= 50% of random's trial-epochs.

    .venv/bin/python benchmarks/automl_pruning.py [--seeds 0,1,2] [--trials 8] [--epochs 3]
        [--records 2400] [--batch 8] [--work DIR]

The defaults take about 20 minutes per seed on 2 CPU cores (300 steps an epoch).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

SKILL = "tao-finetune-cosmos-reason"
ALGORITHMS = {"random": "random", "hyperband": "bayesian + hyperband"}


def base_spec(work: Path, args: argparse.Namespace) -> Path:
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.specification.build import build_spec
    from skillbank.specification.io import write_spec

    data = build_demo_dataset(None, records=args.records, seed=0, progress=True)
    model = build_tiny_model(None, seed=0)
    built = build_spec(SKILL, "train", [
        f"model={model}", "dp_shard_size=1", f"epoch={args.epochs}", f"batch_size={args.batch}", f"mini_batch={args.batch}",
        "train.train_policy.dataloader_num_workers=0", "train.param_dtype=float32",
        "policy.model_gradient_checkpointing=false", "train.optm_betas=[0.9, 0.98]", "train.optm_warmup_steps=30",
        "custom.vision.fps=2", "validation.enable=false", "train.seed=0", "train.train_policy.dataloader_seed=0",
        f"output_dir={work / 'train'}", f"results_dir={work}",
    ], dataset_root=data)
    return write_spec(work / "base.yaml", built.spec)


def study(spec: Path, algorithm: str, seed: int, args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    name = f"{algorithm}_s{seed}"
    proc = subprocess.run([sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(spec),
                           "--algorithm", algorithm, "--max-trials", str(args.trials), "--seed", str(seed),
                           "--study", name, "--param", "train.optm_lr", "--param", "train.optm_decay_type",
                           "--range", "train.optm_lr=1e-5:3e-3", "--no-baseline", "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} study failed:\n{proc.stderr[-3000:]}")
    rec = json.loads(proc.stdout)
    rows = pq.read_table(Path(rec["trials_table"])).to_pylist()
    return {"rec": rec, "rows": sorted(rows, key=lambda r: r["number"]), "wall_s": time.perf_counter() - start}


def epochs_to_reach(rows: list[dict], target: float) -> int | None:
    spent = 0
    for row in rows:
        spent += row["epochs_run"]
        if row["value"] is not None and row["value"] >= target - 1e-9:
            return spent
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2", help="sampler seeds, comma-separated (default: %(default)s)")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--records", type=int, default=2400, help="demo dataset train records (300 steps an epoch at batch 8)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--work", help="keep the studies here (default: a temp folder)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="automl_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    spec = base_spec(work, args)
    header = f"{'seed':>4s} {'algorithm':22s} {'best acc':>9s} {'trial-epochs':>13s} {'pruned':>7s} {'to reach random best':>21s} {'wall s':>7s}"
    lines, ratios, totals = [header], [], []
    for seed in seeds:
        results = {alg: study(spec, alg, seed, args) for alg in ALGORITHMS}
        random_best = results["random"]["rec"]["metric"]["value"]
        random_epochs = results["random"]["rec"]["trials"]["trial_epochs"]
        for alg, res in results.items():
            rec, reach = res["rec"], epochs_to_reach(res["rows"], random_best)
            lines.append(f"{seed:4d} {ALGORITHMS[alg]:22s} {rec['metric']['value']:9.3f} {rec['trials']['trial_epochs']:13d} "
                         f"{rec['trials']['pruned']:7d} {reach if reach is not None else 'never':>21} {res['wall_s']:7.0f}")
        reach = epochs_to_reach(results["hyperband"]["rows"], random_best)
        ratios.append(float("inf") if reach is None else reach / random_epochs)
        totals.append(results["hyperband"]["rec"]["trials"]["trial_epochs"] / random_epochs)
        print("\n".join(lines if len(lines) == 3 else lines[-2:]), flush=True)  # the header once, then each seed's rows
    print("\n" + "\n".join(lines))
    shown = ", ".join("never" if r == float("inf") else f"{r:.0%}" for r in ratios)
    median = statistics.median(ratios)
    verdict = "meets" if median <= 0.5 else "misses"
    print(f"\npruned search's trial-epochs to reach random's best, as a share of random's: {shown} "
          f"(median {'never' if median == float('inf') else f'{median:.0%}'}): {verdict} the <= 50% target")
    print(f"whole studies: the pruned search spent {', '.join(f'{t:.0%}' for t in totals)} of random's trial-epochs "
          f"(median {statistics.median(totals):.0%})")
    print(f"studies kept in {work}")


if __name__ == "__main__":
    main()
