"""One AutoML study, 1 worker vs 2 worker processes, on a throwaway PostgreSQL server (CPU, tiny model).

Each worker is the same `skillbank automl --storage postgresql://...` command (local backend, one
rank per trial with OMP_NUM_THREADS = cores / workers, the validation loss as the metric, random search over train.optm_lr, baseline
included). Printed side by side for 1 and 2 workers: finished trials, wall seconds (process start to
the last exit), finished trials per hour over that wall and over the trials' own span (first trial
start to last trial end: without the workers' start-up), and duplicate parameter sets (goal 0).
Target: 2 workers >= 1.6x one worker's trials per hour on 2 cores (a trial is one rank).

    .venv/bin/python benchmarks/automl_workers.py [--trials 12] [--records 24] [--batch 8] [--work DIR]

The server comes from tests/pg_server.py (Debian's postgresql; as root it runs as the postgres user).
At the defaults it takes about 10 minutes on 2 quiet cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILL = "tao-finetune-cosmos-reason"
SEARCH = ["--backend", "local", "--algorithm", "random", "--param", "train.optm_lr", "--range", "train.optm_lr=1e-4:1e-3",
          "--metric", "val_loss"]


def base_spec(work: Path, args: argparse.Namespace) -> Path:
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.specification.build import build_spec
    from skillbank.specification.io import write_spec

    data = build_demo_dataset(work / "data", records=args.records, seed=0)
    val = data / "val" / "annotations.json"
    val.write_text(json.dumps(json.loads(val.read_text())[: args.val]))
    model = build_tiny_model(work / "model", family="qwen2_5_vl", seed=0)
    built = build_spec(SKILL, "train", [
        f"model={model}", "dp_shard_size=1", "epoch=1", f"batch_size={args.batch}", f"mini_batch={args.batch}",
        "validation.batch_size=1", "train.train_policy.dataloader_num_workers=0", "train.param_dtype=float32",
        "policy.model_gradient_checkpointing=false", f"output_dir={work / 'train'}", f"results_dir={work}",
    ], dataset_root=data)
    return write_spec(work / "base.yaml", built.spec)


def run(spec: Path, url: str, study: str, workers: int, trials: int, work: Path) -> dict:
    import os

    import optuna

    # each worker's trial gets its share of the cores: 2 ranks' OpenMP pools on 2 cores spin against each other
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}

    argv = [sys.executable, "-m", "skillbank.cli", "automl", "--skill", SKILL, "--spec", str(spec), "--study", study,
            "--storage", url, "--max-trials", str(trials), *SEARCH]
    start = time.perf_counter()
    procs = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=open(work / f"{study}_{i}.log", "w"), stderr=subprocess.STDOUT)
             for i in range(workers)]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - start
    if any(codes):
        raise SystemExit(f"a worker failed ({codes}): see {work}/{study}_*.log")
    done = [t for t in optuna.load_study(study_name=study, storage=url).get_trials() if t.state.name in ("COMPLETE", "PRUNED")]
    firsts = [t for t in done if "retry_of" not in t.user_attrs and "failed_trial" not in t.system_attrs]
    span = (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds()
    return {"workers": workers, "threads": env["OMP_NUM_THREADS"], "finished": len(done), "wall_s": wall, "per_hour_wall": 3600 * len(done) / wall,
            "trial_span_s": span, "per_hour_span": 3600 * len(done) / span,
            "duplicates": len(firsts) - len({json.dumps(t.params, sort_keys=True) for t in firsts})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=12, help="--max-trials of each study (default: %(default)s)")
    parser.add_argument("--records", type=int, default=24, help="train records (default: %(default)s)")
    parser.add_argument("--val", type=int, default=3, help="validation records (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=8, help="batch size (default: %(default)s)")
    parser.add_argument("--work", metavar="DIR", help="work folder (default: a temporary one)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from pg_server import PgServer

    work = Path(args.work or tempfile.mkdtemp(prefix="automl-workers-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = base_spec(work, args)
    server = PgServer()
    try:
        rows = [run(spec, server.create_db(f"w{k}"), f"w{k}", k, args.trials, work) for k in (1, 2)]
    finally:
        server.stop()
    print(f"{'workers':>7} {'threads':>7} {'finished':>8} {'wall s':>8} {'trials/h (wall)':>16} {'trial span s':>12} {'trials/h (span)':>16} {'duplicates':>10}")
    for r in rows:
        print(f"{r['workers']:>7} {r['threads']:>7} {r['finished']:>8} {r['wall_s']:>8.1f} {r['per_hour_wall']:>16.1f} {r['trial_span_s']:>12.1f} "
              f"{r['per_hour_span']:>16.1f} {r['duplicates']:>10}")
    one, two = rows
    print(f"2 workers / 1 worker: {two['per_hour_wall'] / one['per_hour_wall']:.2f}x over the wall, "
          f"{two['per_hour_span'] / one['per_hour_span']:.2f}x over the trials' span (target >= 1.6x); "
          f"duplicates {one['duplicates'] + two['duplicates']} (target 0)")


if __name__ == "__main__":
    main()
