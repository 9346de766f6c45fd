"""Random search vs Hyperband-pruned Bayesian search on the demo task, same seeds and trial count.

Both studies search train.optm_lr (log, 1e-5..3e-3) and train.optm_decay_type on the tiny model
and the demo dataset, with real trials (local backend, every epoch's export evaluated on the
held-out clips). Printed per algorithm: best accuracy, total trial-epochs, and the trial-epochs the
pruned search spent until it first matched random search's best.
Target: the pruned search reaches random's best with <= 50% of random's trial-epochs.

    .venv/bin/python benchmarks/automl_pruning.py [--trials 8] [--epochs 3] [--records 700] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

SKILL = "tao-finetune-cosmos-reason"


def base_spec(work: Path, args: argparse.Namespace) -> Path:
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.spec.build import build_spec
    from skillbank.spec.io import write_spec

    data = build_demo_dataset(None, records=args.records, seed=args.seed, progress=True)
    model = build_tiny_model(None, seed=args.seed)
    built = build_spec(SKILL, "train", [
        f"model={model}", "dp_shard_size=1", f"epoch={args.epochs}", "batch_size=16", "mini_batch=16",
        "train.train_policy.dataloader_num_workers=0", "train.param_dtype=float32",
        "policy.model_gradient_checkpointing=false", "train.optm_betas=[0.9, 0.98]", "train.optm_warmup_steps=30",
        "custom.vision.fps=2", "validation.enable=false", f"train.seed={args.seed}",
        f"output_dir={work / 'train'}", f"results_dir={work}",
    ], dataset_root=data)
    return write_spec(work / "base.yaml", built.spec)


def study(spec: Path, algorithm: str, args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(spec),
                           "--algorithm", algorithm, "--max-trials", str(args.trials), "--seed", str(args.seed),
                           "--study", algorithm, "--param", "train.optm_lr", "--param", "train.optm_decay_type",
                           "--range", "train.optm_lr=1e-5:3e-3", "--no-baseline", "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{algorithm} study failed:\n{proc.stderr[-3000:]}")
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
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--records", type=int, default=700)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", help="keep the studies here (default: a temp folder)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="automl_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    spec = base_spec(work, args)
    results = {alg: study(spec, alg, args) for alg in ("random", "hyperband")}
    random_best = results["random"]["rec"]["metric"]["value"]
    random_epochs = results["random"]["rec"]["trials"]["trial_epochs"]
    print(f"\n{'algorithm':22s} {'best acc':>9s} {'trial-epochs':>13s} {'pruned':>7s} {'epochs to reach random best':>28s} {'wall s':>8s}")
    for alg, res in results.items():
        rec = res["rec"]
        reach = epochs_to_reach(res["rows"], random_best)
        name = "random" if alg == "random" else "bayesian + hyperband"
        print(f"{name:22s} {rec['metric']['value']:9.3f} {rec['trials']['trial_epochs']:13d} {rec['trials']['pruned']:7d} "
              f"{reach if reach is not None else 'never':>28} {res['wall_s']:8.0f}")
    reach = epochs_to_reach(results["hyperband"]["rows"], random_best)
    ratio = None if reach is None else reach / random_epochs
    verdict = "meets" if ratio is not None and ratio <= 0.5 else "misses"
    shown = "never reached" if ratio is None else f"{ratio:.0%} of random's {random_epochs} trial-epochs"
    print(f"\npruned search reached random's best ({random_best:.3f}) with {shown}: {verdict} the <= 50% target")
    print(f"studies kept in {work}")


if __name__ == "__main__":
    main()
