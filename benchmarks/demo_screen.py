"""Cheap screening of demo recipes: steps to 95% per family, per seed, in one process.

Trains the embedded default (tiny Qwen2.5-VL, demo dataset) in this process with the local backend's
step (same model loading, AdamW fused, betas, weight decay, grad clip, schedule.lr_lambda, loss on the
answer tokens) and the demo's global batch, without torchrun / FSDP, and every --every steps scores
the held-out clips teacher-forced: a clip is right when the argmax of every answer token (and its
<|im_end|>) is the reference, which is what greedy exact match scores. Prints per seed the first step at
which each family reached --target and the accuracies at the end.

    .venv/bin/python benchmarks/demo_screen.py --seeds 0 1 2 3 --steps 1000 [--lr 3e-4] [--prompt quoted]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

WORK = Path(os.environ.get("DEMO_SCREEN_WORK", "/tmp/demo_screen"))


DISTRACTORS = ("white", "black", "brown")  # colours no ball has: "Is the ball white?" is always "no"


def variant_dataset(seed: int, records: int, prompt: str, mix: str, distract: float = 0.0) -> Path:
    """The demo dataset, or a variant of it under WORK: the family mix (new clips), then the yes/no
    wording (quoted) and distractor questions (train only; same clips, videos linked)."""
    import shutil

    from skillbank.assets import demo_dataset as dd

    if mix == "1,1,1":
        base = dd.build_demo_dataset(None, records=records, seed=seed)
    else:
        base = WORK / "data" / f"mix{mix.replace(',', '_')}-{records}-s{seed}"
        if not (base / "val" / "annotations.json").is_file():
            saved = dd.FAMILIES
            weights = [int(w) for w in mix.split(",")]
            tmp = base.with_name(base.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            try:
                dd.FAMILIES = tuple(f for f, w in zip(saved, weights) for _ in range(w))
                dd.write_demo_dataset(tmp, records=records, seed=seed)
            finally:
                dd.FAMILIES = saved
            tmp.rename(base)
    if prompt == "plain" and not distract:
        return base
    out = WORK / "data" / f"{base.name}-{prompt}-D{distract}"
    if (out / "val" / "annotations.json").is_file():
        return out
    rng = random.Random(f"distract/{seed}")
    for split in ("train", "val"):
        (out / split).mkdir(parents=True, exist_ok=True)
        if not (out / split / "videos").exists():
            (out / split / "videos").symlink_to(base / split / "videos")
        rows = json.loads((base / split / "annotations.json").read_text())
        for r in rows:
            if r["family"] != "yes_no":
                continue
            turn = r["conversations"][0]
            asked = turn["value"].split("Is the ball ")[1].split("?")[0]
            if split == "train" and rng.random() < distract:  # either answer: the ball-colour questions stay balanced
                asked = rng.choice(DISTRACTORS)
                r["conversations"][1]["value"] = "no"
            word = f'"{asked}"' if prompt == "quoted" else asked
            turn["value"] = f"<video>\nIs the ball {word}? Answer yes or no."
        (out / split / "annotations.json").write_text(json.dumps(rows, indent=1))
    return out


def load_examples(model: Path, data: Path, fps: float):
    """(family, example) per record of both splits, processed as the demo's trainer does (same spec,
    same vision settings and system prompt, so the examples cache is shared with `skillbank demo`)."""
    from transformers import AutoProcessor

    from skillbank.data.examples import ExampleBuilder, VisionSettings, default_cache_root
    from skillbank.data.records import load_records
    from skillbank.demo.recipe import DemoRecipe, overrides
    from skillbank.demo.run import SKILL
    from skillbank.specification.build import build_spec
    from skillbank.specification.train import TrainSpec

    built = build_spec(SKILL, "train", overrides(DemoRecipe(fps=fps), model=model, out=WORK / "spec"), dataset_root=data)
    spec = TrainSpec.model_validate(built.spec)
    processor = AutoProcessor.from_pretrained(model)
    vp = processor.video_processor
    vision = VisionSettings.from_spec(spec, patch_size=int(vp.patch_size), merge_size=int(vp.merge_size))
    out = {}
    for split in ("train", "val"):
        b = ExampleBuilder(processor, model_path=str(model), vision=vision, system_prompt=spec.custom.system_prompt,
                           media_path=str(data / split), cache_root=default_cache_root(), memory=False)
        out[split] = [(r["family"], b(r)) for r in load_records(data / split / "annotations.json")]
    return out, processor


def score(model, examples, pad: int, batch: int = 128) -> dict[str, float]:
    import torch

    from skillbank.data.examples import collate

    right: dict[str, list[int]] = {}
    model.eval()
    with torch.no_grad():
        for i in range(0, len(examples), batch):
            chunk = examples[i : i + batch]
            b = collate([e for _, e in chunk], pad)
            labels = b.pop("labels")
            logits = model(**b).logits
            pred = logits[:, :-1].argmax(-1)
            gold = labels[:, 1:]
            mask = gold != -100
            ok = ((pred == gold) | ~mask).all(-1)
            for (fam, _), good in zip(chunk, ok.tolist()):
                right.setdefault(fam, [0, 0])
                right[fam][0] += int(good)
                right[fam][1] += 1
    model.train()
    return {f: c / n for f, (c, n) in sorted(right.items())}


def run_seed(args, seed: int) -> dict:
    import torch

    from skillbank.assets.tiny_model import TinySize, build_tiny_model
    from skillbank.data.examples import collate
    from skillbank.training.local import schedule
    from skillbank.training.local.model import load_policy

    size = TinySize(**json.loads(args.size)) if args.size else TinySize()
    data = variant_dataset(seed, args.records, args.prompt, args.mix, args.distract)
    model_dir = build_tiny_model(None, family="qwen2_5_vl", seed=seed, size=size)
    t0 = time.perf_counter()
    examples, processor = load_examples(model_dir, data, args.fps)
    prep_s = time.perf_counter() - t0
    random.seed(seed)
    torch.manual_seed(seed)
    model, _ = load_policy(str(model_dir))
    model.train()
    pad = processor.tokenizer.pad_token_id
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01, fused=True)

    class T:
        optm_warmup_steps = args.warmup
        optm_decay_type = args.decay
        optm_min_lr_factor = 0.0

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule.lr_lambda(T, args.steps))
    train = examples["train"]
    rng = random.Random(f"epoch/{seed}")
    order: list[int] = []
    reached: dict[str, int | None] = {f: None for f in ("yes_no", "directionality", "colour")}
    history = []
    step_s = []
    all_at = None
    for step in range(1, args.steps + 1):
        if len(order) < args.batch:
            fresh = list(range(len(train)))
            rng.shuffle(fresh)
            order += fresh
        idx, order = order[: args.batch], order[args.batch :]
        t = time.perf_counter()
        b = collate([train[i][1] for i in idx], pad)
        out = model(**b)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step_s.append(time.perf_counter() - t)
        if step % args.every == 0 or step == args.steps:
            acc = score(model, examples["val"], pad)
            history.append((step, acc, float(out.loss.detach())))
            for f, a in acc.items():
                if a >= args.target and reached.get(f) is None:
                    reached[f] = step
            if all_at is None and all(a >= args.target for a in acc.values()):
                all_at = step
            print(f"  seed {seed} step {step:5d} loss {float(out.loss.detach()):.4f} " + " ".join(f"{f} {a:.3f}" for f, a in acc.items()),
                  file=sys.stderr, flush=True)
            if args.stop_when_reached and all_at is not None:
                break
    import statistics

    final = history[-1][1]
    return {"seed": seed, "reached": reached, "all_at": all_at, "final": final, "last_step": history[-1][0],
            "step_ms_median": round(1000 * statistics.median(step_s), 1), "prep_s": round(prep_s, 1),
            "history": [(s, a) for s, a, _ in history], "load": os.getloadavg()[0]}


def summary(log: Path) -> str:
    """The log as a markdown table: one row per run (recipe, seed, first step at target per family)."""
    head = "| label | recipe (non-default settings) | seed | colour | directionality | yes/no | every family | final (c / d / y) | ms/step | load |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    defaults = {"steps": 1000, "batch": 32, "lr": 3e-4, "warmup": 30, "decay": "cosine", "fps": 2.0, "records": 2100, "prompt": "plain",
                "mix": "1,1,1", "distract": 0.0, "size": "", "every": 50, "target": 0.95, "stop_when_reached": True, "label": ""}
    for line in log.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        s = r["settings"]
        recipe = ", ".join(f"{k} {v}" for k, v in s.items() if k in defaults and v != defaults[k] and k != "label") or "default"
        cell = {f: (str(v) if v is not None else f"> {r['last_step']}") for f, v in r["reached"].items()}
        final = " / ".join(f"{r['final'][f]:.2f}" for f in ("colour", "directionality", "yes_no"))
        lines.append(f"| {s.get('label') or '-'} | {recipe} | {r['seed']} | {cell['colour']} | {cell['directionality']} | {cell['yes_no']} | "
                     f"{r['all_at'] or '> ' + str(r['last_step'])} | {final} | {r['step_ms_median']:.0f} | {r['load']:.1f} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=float, default=30)
    p.add_argument("--decay", default="cosine")
    p.add_argument("--fps", type=float, default=2.0)
    p.add_argument("--records", type=int, default=2100)
    p.add_argument("--prompt", default="plain", choices=("plain", "quoted"))
    p.add_argument("--mix", default="1,1,1", help="yes_no,directionality,colour records per cycle")
    p.add_argument("--distract", type=float, default=0.0, help="share of train yes/no questions asked about a colour no ball has")
    p.add_argument("--size", default="", help="TinySize overrides as JSON")
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--stop-when-reached", action="store_true")
    p.add_argument("--log", default="benchmarks/demo_screen.jsonl")
    p.add_argument("--label", default="")
    p.add_argument("--summary", action="store_true", help="print the log as a markdown table and exit")
    args = p.parse_args()
    if args.summary:
        print(summary(Path(args.log)))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    settings = {k: v for k, v in vars(args).items() if k not in ("seeds", "log", "threads")}
    for seed in args.seeds:
        row = run_seed(args, seed)
        row["settings"] = settings
        print(json.dumps({k: v for k, v in row.items() if k != "history"}), flush=True)
        Path(args.log).parent.mkdir(parents=True, exist_ok=True)
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
