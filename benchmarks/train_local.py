"""Local backend on the embedded default: does the tiny model learn the demo tasks in minutes on CPU?

Builds the demo dataset and the tiny Qwen2.5-VL (cached under $SKILLBANK_CACHE), trains with
`skillbank.training.local.launch.train_local` (torchrun + FSDP2, gloo) and evaluates safetensors
exports on the held-out split by greedy exact match, per task family (--eval-every N: every N steps).

Printed: train loss (mean of the first / last 10 steps), validation loss before / after, samples/s
(median over steps, global batch / step time), training wall time, held-out accuracy per family and
the first evaluated step where yes_no and directionality both reach --target.

Why fps 2 (the spec default) and not all 16 frames: 4 frames (2 temporal patches) keep the frame
order the tasks need, sequences are shorter and steps ~2x faster. Above 2 fps, transformers 4.57's
Qwen2.5-VL would put every video token at temporal position 0 (it truncates the seconds per temporal
patch to an integer; at fps 8 directionality stayed at chance for 2,400 steps before the fix):
skillbank.compat.qwen25_temporal, installed by the local backend and evaluation, keeps the order.

    .venv/bin/python benchmarks/train_local.py [--ranks 2] [--steps 1600] [--eval-every 200] [--fps 2]
        [--records 2100] [--batch 16] [--lr 3e-4] [--warmup 30] [--seed 0] [--work DIR] [--json]
    .venv/bin/python benchmarks/train_local.py --eval-only RUN_DIR [--fps 2]   # evaluate an existing run

--batch is the global batch: each of --ranks ranks takes batch / ranks per step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def demo_spec(model: Path, data: Path, out: Path, args: argparse.Namespace) -> dict:
    """The settings the embedded demo uses (docs: cpu-stack, 'making the tiny model learn')."""
    per_rank = args.batch // args.ranks
    return {
        "train": {
            "epoch": args.epochs,
            "train_batch_per_replica": per_rank,
            "max_num_steps": args.steps,
            "output_dir": str(out),
            "seed": args.seed,
            "optm_lr": args.lr,
            "optm_betas": [0.9, 0.98],
            "optm_weight_decay": 0.01,
            "optm_warmup_steps": args.warmup,
            "optm_decay_type": "none",
            "optm_grad_norm_clip": 1.0,
            "param_dtype": "float32",
            "ckpt": {"save_freq_in_epoch": 0, "save_freq": args.eval_every or 100000, "max_keep": -1 if args.eval_every else 1,
                     "export_safetensors": True},
            "train_policy": {"mini_batch": per_rank, "dataloader_num_workers": 0, "dataloader_seed": args.seed},
        },
        "validation": {"enable": True, "freq_in_epoch": 1000, "batch_size": 32},
        "policy": {
            "model_name_or_path": str(model),
            "model_gradient_checkpointing": False,
            "parallelism": {"dp_shard_size": args.ranks, "dp_replicate_size": 1},
        },
        "custom": {
            "train_dataset": {"annotation_path": str(data / "train" / "annotations.json"), "media_path": str(data / "train")},
            "val_dataset": {"annotation_path": str(data / "val" / "annotations.json"), "media_path": str(data / "val")},
            "vision": {"fps": args.fps},
        },
        "results_dir": str(out.parent / "results"),
    }


def evaluate(export: Path, data: Path, fps: float, batch_size: int = 64) -> dict[str, dict[str, float]]:
    """Greedy decoding on the held-out split through `skillbank evaluate`'s own path (model loading
    included, so evaluation sees what the product's does), accuracy per family."""
    from collections import Counter

    from skillbank.data.records import load_records
    from skillbank.evaluation.evaluate import evaluate as evaluate_model
    from skillbank.specification.evaluate import EvaluateSpec

    val = data / "val" / "annotations.json"
    spec = EvaluateSpec.model_validate({
        "dataset": {"annotation_path": str(val), "media_dir": str(data / "val")}, "vision": {"fps": fps},
        "generation": {"max_tokens": 4}, "evaluation": {"batch_size": batch_size}, "num_gpus": 0,
        "results_dir": str(export.parent.parent / "evaluate" / export.name),
    })
    families = evaluate_model(spec, model_name=str(export), progress=False)["families"]
    counts = Counter(r["family"] for r in load_records(val))
    return {family: {"accuracy": m["accuracy"], "n": counts[family]} for family, m in sorted(families.items())}


def summarise(rows: list[dict]) -> dict:
    train = [r for r in rows if "loss" in r]
    vals = [r for r in rows if r.get("val_loss") is not None]
    rates = [r["samples_per_s"] for r in train[1:] if r.get("samples_per_s")]
    return {
        "steps": len(train),
        "train_loss_first10": statistics.fmean(r["loss"] for r in train[:10]),
        "train_loss_last10": statistics.fmean(r["loss"] for r in train[-10:]),
        "val_loss_before": vals[0]["val_loss"] if vals else None,
        "val_loss_after": vals[-1]["val_loss"] if vals else None,
        "samples_per_s_median": statistics.median(rates) if rates else None,
        "train_seconds": train[-1]["time"] - train[0]["time"] if len(train) > 1 else None,
        "curve": [(r["step"], round(r["loss"], 4)) for r in train[:: max(1, len(train) // 20)]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--records", type=int, default=2100)
    parser.add_argument("--batch", type=int, default=16, help="global batch (split over the ranks)")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--fps", type=float, default=2.0, help="custom.vision.fps: 2 samples 4 of the 16 frames (see the module doc)")
    parser.add_argument("--warmup", type=float, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=0, help="export every N steps and evaluate each export (0: final only)")
    parser.add_argument("--target", type=float, default=0.90, help="accuracy the yes_no and directionality families must reach")
    parser.add_argument("--work", default=None, help="keep the run here (default: a temp folder)")
    parser.add_argument("--eval-only", default=None, metavar="RUN_DIR", help="skip training: evaluate the exports of this run folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.batch % args.ranks:
        parser.error("--batch must be a multiple of --ranks")

    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="train_local_"))
    t0 = time.perf_counter()
    data = build_demo_dataset(None, records=args.records, seed=args.seed, progress=True)
    model = build_tiny_model(None, family="qwen2_5_vl", seed=args.seed)
    t_assets = time.perf_counter() - t0
    spec = TrainSpec.model_validate(demo_spec(model, data, work / "out", args))
    log = sys.stderr if args.json else sys.stdout
    t1 = time.perf_counter()
    if args.eval_only:
        run_dir = Path(args.eval_only)
    else:
        result = train_local(spec, log=lambda line: print(line, file=log, flush=True), stdout=sys.stderr if args.json else None)
        run_dir = Path(result["run_dir"])
    t_train = time.perf_counter() - t1
    from skillbank.runs import layout

    metrics = layout.read_metrics(run_dir)
    summary = summarise(metrics)
    t2 = time.perf_counter()
    rows = {r["step"]: r for r in metrics if "loss" in r}
    start_time = rows[1]["time"] - 1.0 / max(1e-9, (rows[1].get("samples_per_s") or 1) / args.batch) if 1 in rows else None
    by_step = {}
    for step in layout.list_safetensors_steps(run_dir):
        by_step[step] = evaluate(layout.safetensors_dir(run_dir, step), data, args.fps)
        print(f"step {step}: " + ", ".join(f"{f} {v['accuracy']:.3f}" for f, v in by_step[step].items()), file=sys.stderr, flush=True)
    accuracy = by_step[max(by_step)]
    reached = next((s for s, acc in sorted(by_step.items())
                    if all(acc[f]["accuracy"] >= args.target for f in ("yes_no", "directionality"))), None)
    t_eval = time.perf_counter() - t2
    doc = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "work")},
        "load_average": os.getloadavg(),
        "assets_seconds": round(t_assets, 1),
        "train_wall_seconds": round(t_train, 1),
        "startup_and_teardown_seconds": round(t_train - (summary["train_seconds"] or 0), 1),
        "eval_seconds": round(t_eval, 1),
        **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()},
        "heldout_accuracy": accuracy,
        "heldout_accuracy_by_step": {s: {f: v["accuracy"] for f, v in acc.items()} for s, acc in by_step.items()},
        "target_reached_at_step": reached,
        "train_seconds_to_target": round(rows[reached]["time"] - start_time, 1) if reached and start_time else None,
        "run_dir": str(run_dir),
    }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"\nranks {args.ranks}, global batch {args.batch}, lr {args.lr}, {summary['steps']} steps, records {args.records}")
        print(f"train loss {summary['train_loss_first10']:.4f} -> {summary['train_loss_last10']:.4f} (mean of first / last 10 steps)")
        print(f"val loss   {summary['val_loss_before']:.4f} -> {summary['val_loss_after']:.4f}")
        print(f"samples/s  {summary['samples_per_s_median']:.1f} (median); training {summary['train_seconds']:.0f} s, "
              f"whole torchrun {t_train:.0f} s, assets {t_assets:.0f} s, eval {t_eval:.0f} s, load avg {os.getloadavg()[0]:.1f}")
        for family, score in accuracy.items():
            print(f"held-out {family:15s} accuracy {score['accuracy']:.3f} (n={score['n']})")
        for step, acc in sorted(by_step.items()):
            print(f"  step {step:5d}: " + ", ".join(f"{f} {v['accuracy']:.3f}" for f, v in acc.items()))
        print(f"yes_no and directionality >= {args.target}: " + (f"step {reached}" if reached else "not reached"))
        print(f"curve: {summary['curve']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
