"""GRPO after SFT on the embedded default: does `skillbank rl --backend local` fix a family SFT left imperfect?

1. SFT: the demo recipe (tiny Qwen2.5-VL, demo dataset, local backend) stopped early, at --sft-steps
   (1,200 by default: colour and directionality are learnt, colour yes/no is not yet; docs/cpu-stack).
2. Evaluate that export on the demo's held-out clips (every family, short answers, greedy).
3. GRPO from it (skillbank.training.local.grpo_launch.rl_local, what `skillbank rl --backend local`
   runs): the demo train prompts of --family plus --anchor prompts of every other family (without them
   the KL term never sees those families and they drift: directionality fell 96.2% -> 86.7% in a
   yes/no-only run), exact_match reward, --generations samples per prompt.
4. Evaluate the GRPO export on the same held-out clips.
Printed: held-out accuracy per family before / after (counts, 95% Wilson intervals, an exact McNemar
test on the paired clips), the reward curve (mean reward of each block of steps), and the wall time of
each stage.

    .venv/bin/python benchmarks/grpo_local.py [--work DIR] [--sft EXPORT] [--sft-steps 1200]
        [--steps 160] [--lr 1e-4] [--batch 32] [--generations 4] [--family yes_no] [--kl-beta 0.1] [--anchor 350]

--sft skips step 1 (any export of the demo recipe); --work keeps everything, and a second call with the
same --work reuses its SFT export. SFT is most of the cost (about 6 minutes for 1,200 steps on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import mcnemar, wilson  # noqa: E402

SKILL = "tao-finetune-cosmos-reason"


def sft(work: Path, steps: int, data: Path) -> str:
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.demo.recipe import DemoRecipe, overrides
    from skillbank.specification.build import build_spec
    from skillbank.specification.io import write_spec
    from skillbank.runs import layout
    from skillbank.training.local.launch import train_local

    done = [layout.safetensors_dir(run, s) for run in layout.run_dirs(work / "train") for s in layout.list_safetensors_steps(run) if s == steps]
    if done:
        print(f"reusing {done[-1]}", file=sys.stderr)
        return str(done[-1])
    recipe = replace(DemoRecipe(), steps=steps, batch=16, decay="none")  # the recipe these figures were measured with
    model = build_tiny_model(None, family=recipe.family, seed=recipe.seed)
    built = build_spec(SKILL, "train", overrides(recipe, model=model, out=work), dataset_root=data)
    spec_path = write_spec(work / "train.yaml", built.spec)
    run = train_local(built.spec, spec_path=spec_path, log=lambda line: print(line, file=sys.stderr), stdout=sys.stderr)
    if not run["final_safetensors"]:
        raise SystemExit(f"SFT wrote no export; see {run['run_dir']}")
    return str(run["final_safetensors"])


def held_out(model: str, data: Path, out: Path) -> dict[str, list[bool]]:
    """Each held-out clip's correctness per family (in record order), as the demo evaluates."""
    from skillbank.demo.recipe import DemoRecipe
    from skillbank.demo.run import _evaluate

    _evaluate(model, data, out, DemoRecipe(), progress=False)
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    correct: dict[str, list[bool]] = {}
    for row in rows:
        correct.setdefault(str(row.get("family")), []).append(bool(row.get("correct")))
    return dict(sorted(correct.items()))


def rl_spec(work: Path, args: argparse.Namespace, start: str, data: Path) -> Any:
    from skillbank.specification.rl import RlSpec

    train = json.loads((data / "train" / "annotations.json").read_text(encoding="utf-8"))
    records = [r for r in train if args.family == "all" or r.get("family") == args.family]
    others: dict[str, int] = {}
    for r in train:  # --anchor: the first N prompts of every other family, so the KL term sees them too
        fam = str(r.get("family"))
        if args.family != "all" and fam != args.family and others.get(fam, 0) < args.anchor:
            records.append(r)
            others[fam] = others.get(fam, 0) + 1
    prompts = work / f"prompts_{args.family}.json"
    prompts.write_text(json.dumps(records), encoding="utf-8")
    return RlSpec.model_validate({
        "train": {"output_dir": str(work / "rl"), "train_batch_per_replica": args.batch, "max_num_steps": args.steps, "epoch": 100,
                  "optm_lr": args.lr, "optm_warmup_steps": 0, "param_dtype": "float32", "seed": 0,
                  "ckpt": {"save_freq": max(1, args.steps // 2), "save_mode": "sync", "max_keep": 2},
                  "train_policy": {"reward_function": {"exact_match": 1.0}, "mini_batch": args.batch // 2, "kl_beta": args.kl_beta,
                                   "temperature": 1.0}},
        "rollout": {"n_generation": args.generations, "max_response_length": 16},
        "policy": {"model_name_or_path": start, "model_gradient_checkpointing": False, "parallelism": {"dp_shard_size": 1}},
        "custom": {"answer_type": "short", "vision": {"fps": 2.0},
                   "train_dataset": {"annotation_path": str(prompts), "media_path": str(data / "train")}},
        "results_dir": str(work / "results"),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--sft", default=None, help="an SFT export to start from (skips SFT)")
    parser.add_argument("--sft-steps", type=int, default=1200)
    parser.add_argument("--steps", type=int, default=160, help="GRPO policy steps")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch", type=int, default=32, help="samples per policy step (prompts x generations)")
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--family", default="yes_no", help="the demo family whose train prompts GRPO gets, or all")
    parser.add_argument("--kl-beta", type=float, default=0.1)
    parser.add_argument("--anchor", type=int, default=350, help="also give GRPO N prompts of every other family (0: none)")
    args = parser.parse_args()

    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.runs import layout
    from skillbank.training.local.grpo_launch import rl_local

    work = args.work or Path(tempfile.mkdtemp(prefix="grpo_local_"))
    work.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    data = build_demo_dataset(None, records=2100, seed=0)
    t = time.perf_counter()
    start = args.sft or sft(work, args.sft_steps, data)
    times["sft_s"] = time.perf_counter() - t
    t = time.perf_counter()
    before = held_out(start, data, work / "eval_sft")
    times["eval_sft_s"] = time.perf_counter() - t
    t = time.perf_counter()
    result = rl_local(rl_spec(work, args, start, data), log=lambda line: print(line, file=sys.stderr), stdout=sys.stderr)
    times["grpo_s"] = time.perf_counter() - t
    t = time.perf_counter()
    after = held_out(str(result["final_safetensors"]), data, work / "eval_grpo")
    times["eval_grpo_s"] = time.perf_counter() - t

    rows = [r for r in layout.read_metrics(Path(result["run_dir"])) if "reward_mean" in r]
    block = max(1, len(rows) // 8)
    print(f"\nGRPO from {start}\n  {len(rows)} policy steps, {args.batch // args.generations} prompts x {args.generations} samples, "
          f"family {args.family} (+{args.anchor} prompts of each other family), lr {args.lr:g}, kl_beta {args.kl_beta:g}")
    print("\nreward curve (mean reward per block of steps; kl: mean per-token KL to the SFT start)")
    for s in range(0, len(rows), block):
        chunk = rows[s : s + block]
        mean = sum(r["reward_mean"] for r in chunk) / len(chunk)
        kl = sum(r["kl"] for r in chunk) / len(chunk)
        print(f"  steps {chunk[0]['step']:>4}-{chunk[-1]['step']:<4} reward {mean:.3f}  kl {kl:.4f}  "
              f"zero-signal groups {sum(r['zero_std_groups'] for r in chunk) / len(chunk):.1f}/{args.batch // args.generations}")
    print("\nheld-out accuracy (demo val clips, greedy, short answers)")
    print(f"  {'family':<16}{'SFT':>26}{'SFT + GRPO':>26}   McNemar (only SFT / only GRPO right, p)")
    tests: dict[str, Any] = {}
    for family, b in before.items():
        a = after[family]
        n, kb, ka = len(b), sum(b), sum(a)
        lo_b, hi_b = wilson(kb, n)
        lo_a, hi_a = wilson(ka, n)
        only_b, only_a, p = mcnemar(b, a)
        tests[family] = {"sft": [kb, n], "grpo": [ka, n], "only_sft": only_b, "only_grpo": only_a, "p": p}
        mark = "  <- GRPO's family" if family == args.family else ""
        print(f"  {family:<16}{kb:>4}/{n:<4}{kb / n:7.1%} [{lo_b:.2f},{hi_b:.2f}]{ka:>6}/{n:<4}{ka / n:7.1%} [{lo_a:.2f},{hi_a:.2f}]"
              f"   {only_b:>3} / {only_a:<3} p={p:.2g}{mark}")
    print("\nwall time (2 CPU cores): " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()))
    summary = {"start": start, "run_dir": result["run_dir"], "held_out": tests, "times": times, "args": {k: str(v) for k, v in vars(args).items()},
               "reward_first_block": sum(r["reward_mean"] for r in rows[:block]) / block,
               "reward_last_block": sum(r["reward_mean"] for r in rows[-block:]) / block}
    (work / "grpo_local.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(f"\nsummary: {work / 'grpo_local.json'}")


if __name__ == "__main__":
    main()
