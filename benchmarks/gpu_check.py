"""The check to run the day a GPU is lent (docs/gpu-check.md): plan's predictions against a real run.

In one script, offline, in under 8 minutes on one H100:
1. model: Cosmos-Reason2-2B built from the config.json the bank ships (models/configs/) with random
   bf16 weights (initialised on the GPU), a tokenizer trained here (skillbank.assets.tiny_model's BPE:
   the model keeps its 151,936-entry embedding; the token ids of the config are re-pointed at the
   BPE's specials) and a Qwen3-VL processor at plan's frame budgets (128-768 tokens per frame);
2. data: a few mp4 clips (PyAV) and LLaVA records that state their duration and frame size, so plan
   counts each sample's tokens exactly as the data path makes them;
3. plan: `python -m skillbank plan --spec SPEC --gpu KIND --json` (the CLI's JSON is the contract):
   memory_per_gpu_gib, step_time_s and the MFU it assumes (its assumptions);
4. train: every record first processed into the example cache (so decoding is not timed), then
   `python -m skillbank train --backend local` (torchrun + FSDP2, bf16, gradient
   checkpointing, one GPU) for --steps steps; rank 0's metrics.jsonl gives each step's time and the
   peak memory (torch.cuda.max_memory_allocated / reserved);
5. evaluate: the batched generation of `skillbank evaluate`'s transformers engine (its own functions,
   in this process, after training has freed the GPU) on --eval-samples records: samples/s, new
   tokens/s if every answer ran to --max-tokens (random weights seldom stop early) and where the time goes;
6. one JSON (--out): every figure, measured over predicted, and what each phase took.

Measured MFU = plan's assumed MFU x plan's step time / the median measured step time (steps after
the first two): plan's FLOPs model (6 x params x tokens + attention, one more forward with
checkpointing) over the GPU's dense bf16 peak. Memory: measured peak allocated over
memory_per_gpu_gib (plan keeps 10% of the GPU aside for the context and fragmentation: reserved
shows that part).

--cpu --tiny runs the same phases and code on CPU with the 2B's config shrunk (one text layer, one
vision block, small widths, head_dim and M-RoPE kept) in about a minute
(tests/test_gpu_check.py), so the script cannot rot; on CPU no GPU memory is measured (null) and
plan's GPU figures are only read. A phase that fails or runs out of --budget-s is recorded with its
error and the JSON is still written (exit 1).

    python benchmarks/gpu_check.py --out gpu_check.json                      # one GPU
    python benchmarks/gpu_check.py --cpu --tiny --out /tmp/gpu_check.json    # the CPU rehearsal
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "src" / "skillbank" / "models" / "configs" / "nvidia--Cosmos-Reason2-2B.json"
PLAN_GPUS = (("H200", "h200"), ("A100", "a100-80gb"), ("H100", "h100-80gb"))
PATCH_PIXELS = 32 * 32  # Qwen3-VL: (patch 16 x merge 2)^2 pixels per vision token


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu", action="store_true", help="run on CPU (CUDA hidden from every phase)")
    p.add_argument("--tiny", action="store_true", help="Cosmos-Reason2-2B's architecture shrunk to one layer each, tiny clips and batches")
    p.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="the JSON written (default ./gpu_check.json)")
    p.add_argument("--work", type=Path, help="working folder (model, clips, runs; default: a folder beside --out)")
    p.add_argument("--steps", type=int, help="training steps (default 20; tiny 2)")
    p.add_argument("--batch", type=int, help="train_batch_per_replica (default 8; tiny 2)")
    p.add_argument("--mini-batch", type=int, help="train_policy.mini_batch (default 4; tiny 1)")
    p.add_argument("--clip-size", type=int, help="clip width = height in pixels (default 448; tiny 64)")
    p.add_argument("--clip-seconds", type=float, help="clip length (default 8; tiny 2); sampled at 2 fps")
    p.add_argument("--eval-samples", type=int, help="records evaluated (default 64; tiny 4)")
    p.add_argument("--eval-batch", type=int, help="evaluation.batch_size (default 16; tiny 2)")
    p.add_argument("--max-tokens", type=int, help="generation.max_tokens (default 32; tiny 4): a random model runs to it")
    p.add_argument("--budget-s", type=float, default=450.0, help="wall seconds for all phases; a phase past it is stopped (default 450)")
    args = p.parse_args(argv)
    defaults = dict(steps=(20, 2), batch=(8, 2), mini_batch=(4, 1), clip_size=(448, 64), clip_seconds=(8.0, 2.0),
                    eval_samples=(64, 4), eval_batch=(16, 2), max_tokens=(32, 4))
    for key, (full, tiny) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, tiny if args.tiny else full)
    args.work = args.work or args.out.resolve().parent / (args.out.stem + "-work")
    return args


class Check:
    """The phases' results, timed; a failed phase is recorded and the next ones still run when they can."""

    def __init__(self, budget_s: float) -> None:
        self.start = time.perf_counter()
        self.budget_s = budget_s
        self.phases: dict[str, dict[str, Any]] = {}

    def left(self) -> float:
        return max(1.0, self.budget_s - (time.perf_counter() - self.start))

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        print(f"[gpu_check] {name} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        try:
            out = fn()
            self.phases[name] = {"ok": True, "wall_s": round(time.perf_counter() - began, 2)}
            return out
        except Exception as exc:  # noqa: BLE001 - recorded in the JSON, the check goes on
            self.phases[name] = {"ok": False, "wall_s": round(time.perf_counter() - began, 2), "error": f"{type(exc).__name__}: {exc}"[-2000:]}
            traceback.print_exc()
            return None


def child_env(cpu: bool, cache: Path) -> dict[str, str]:
    env = {**os.environ, "SKILLBANK_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def skillbank(args: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """A CLI command's --json document; its stderr's tail in the error when it fails."""
    proc = subprocess.Popen([sys.executable, "-m", "skillbank", *args, "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # skillbank stops its whole process tree on SIGTERM (torchrun and its ranks)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise RuntimeError(f"skillbank {args[0]} ran past the check's budget ({timeout:.0f} s left) and was stopped: {err[-800:]}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"skillbank {args[0]} exited {proc.returncode}: {(err or out)[-1500:]}")
    return json.loads(out)


# --- 1. model ------------------------------------------------------------------------------------


def processor_for(tok: Any) -> Any:
    """Qwen3-VL's processor at the frame budgets plan counts with (preflight.vision: 128-768 tokens a frame)."""
    from transformers import Qwen2VLImageProcessorFast, Qwen3VLProcessor, Qwen3VLVideoProcessor

    from skillbank.assets.tiny_model import CHAT_TEMPLATE
    from skillbank.preflight.vision import VIDEO_MAX_TOKENS, VIDEO_MIN_TOKENS

    lo, hi = VIDEO_MIN_TOKENS * PATCH_PIXELS, VIDEO_MAX_TOKENS * PATCH_PIXELS
    return Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessorFast(min_pixels=lo, max_pixels=hi, patch_size=16, merge_size=2, temporal_patch_size=2,
                                                  image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]),
        video_processor=Qwen3VLVideoProcessor(size={"shortest_edge": lo, "longest_edge": hi}, patch_size=16, merge_size=2, temporal_patch_size=2),
        tokenizer=tok, chat_template=CHAT_TEMPLATE)


TINY = {  # --tiny: the same architecture and code path at a CPU's size (head_dim and mrope_section kept)
    "text_config": {"hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                    "vocab_size": 2048},
    "vision_config": {"depth": 1, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2, "out_hidden_size": 256, "deepstack_visual_indexes": [0]},
}


def model_config(tiny: bool) -> dict[str, Any]:
    config = json.loads(BUNDLED.read_text())
    if tiny:
        for section, values in TINY.items():
            config[section].update(values)
    return config


def build_model(folder: Path, config: dict[str, Any], *, cuda: bool, tiny: bool) -> dict[str, Any]:
    """Cosmos-Reason2-2B's architecture (--tiny: shrunk) with random bf16 weights, built on the GPU when
    there is one; the config's token ids re-pointed at the BPE tokenizer's specials."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    from skillbank.assets.tiny_model import _token_ids, build_tokenizer

    tok = build_tokenizer()
    ids = _token_ids(tok)
    for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        config[key] = ids[key]
    config["text_config"].update(bos_token_id=ids["bos_token_id"], eos_token_id=ids["eos_token_id"], pad_token_id=ids["pad_token_id"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    hf_config = AutoConfig.from_pretrained(str(folder))
    torch.manual_seed(0)
    with torch.device("cuda" if cuda else "cpu"):
        model = AutoModelForImageTextToText.from_config(hf_config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = ids["eos_token_id"], ids["pad_token_id"]
    model.generation_config.do_sample = False
    model.save_pretrained(folder, safe_serialization=True)
    processor_for(tok).save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    if cuda:
        torch.cuda.empty_cache()
    what = "nvidia/Cosmos-Reason2-2B's bundled config.json" + (", shrunk (--tiny)" if tiny else "")
    return {"path": str(folder), "architecture": f"{what}, random bf16 weights", "params": params}


# --- 2. data -------------------------------------------------------------------------------------


def write_data(folder: Path, *, clips: int, records: int, size: int, seconds: float) -> dict[str, Any]:
    """`clips` mp4s (a square moving over a gradient, 8 fps) and `records` LLaVA records over them."""
    import numpy as np

    from skillbank.assets.demo_dataset import write_mp4

    videos = folder / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    fps, frames = 8, max(2, int(round(seconds * 8)))
    ramp = np.linspace(0, 160, size, dtype=np.float32)
    for c in range(clips):
        video = np.empty((frames, size, size, 3), dtype=np.uint8)
        for t in range(frames):
            frame = np.stack([np.add.outer(ramp, ramp) / 2, np.tile(ramp, (size, 1)), np.full((size, size), 40.0 * c)], axis=-1)
            x = int((t / frames) * (size - size // 4))
            frame[size // 3: size // 3 + size // 4, x: x + size // 4] = (255, 255, 0)
            video[t] = frame.clip(0, 255).astype(np.uint8)
        write_mp4(videos / f"clip{c}.mp4", video, fps=fps)
    rows = [{"id": f"r{i}", "video": f"videos/clip{i % clips}.mp4", "video_fps": fps, "duration": frames / fps, "width": size, "height": size,
             "conversations": [{"from": "human", "value": "<video>\nWhich way does the yellow square move? Answer with one word."},
                               {"from": "gpt", "value": "right"}]} for i in range(records)]
    annotations = folder / "annotations.json"
    annotations.write_text(json.dumps(rows))
    return {"annotations": str(annotations), "clips": clips, "records": records, "clip": {"width": size, "height": size, "seconds": frames / fps, "video_fps": fps}}


# --- 3-5. plan, train, evaluate ----------------------------------------------------------------------


def write_spec(work: Path, model: str, data: dict[str, Any], args: argparse.Namespace) -> Path:
    import yaml

    spec = {
        "train": {"epoch": math.ceil(args.steps / (data["records"] // args.batch)), "train_batch_per_replica": args.batch,
                  "max_num_steps": args.steps, "output_dir": str(work / "runs"),
                  "optm_lr": 1e-5, "optm_warmup_steps": 0, "param_dtype": "bfloat16", "ckpt": {"enable_checkpoint": False},
                  "train_policy": {"mini_batch": args.mini_batch, "dataloader_num_workers": 0 if args.cpu else 4}},
        "validation": {"enable": False},
        "policy": {"model_name_or_path": model, "model_gradient_checkpointing": True, "parallelism": {"dp_shard_size": 1}},
        "custom": {"train_dataset": {"annotation_path": data["annotations"], "media_path": str(Path(data["annotations"]).parent)},
                   "vision": {"fps": 2.0}},
        "results_dir": str(work / "results"),
    }
    path = work / "train.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def warm_examples(spec_path: Path, model: str) -> dict[str, Any]:
    """Process every record into the local backend's example cache first (decode + processor: what the
    worker otherwise does inside its first epoch's steps, which would count in the step times)."""
    from transformers import AutoProcessor

    from skillbank.specification.io import load_spec
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.data import DataSplits

    spec = load_spec(spec_path, TrainSpec)
    splits = DataSplits.from_spec(spec, processor=AutoProcessor.from_pretrained(model), model_path=model)
    tokens = [int(builder(record)["input_ids"].shape[0]) for record, builder in splits.train]
    return {"records": len(tokens), "tokens_per_sample": {"min": min(tokens), "max": max(tokens), "mean": statistics.fmean(tokens)}}


def plan_figures(doc: dict[str, Any]) -> dict[str, Any]:
    mfu = next((float(m.group(1)) for line in doc.get("assumptions", []) if (m := re.match(r"MFU ([0-9.]+)", line))), None)
    keep = ("gpu", "params", "trainable_params", "tokens_per_sample", "memory_per_gpu_gib", "memory_breakdown_gib", "fits", "step_time_s", "total_steps")
    return {**{k: doc.get(k) for k in keep}, "mfu_assumed": mfu, "assumptions": doc.get("assumptions", [])}


def train_figures(output_dir: Path) -> dict[str, Any]:
    runs = sorted(output_dir.glob("*/metrics.jsonl"))
    if not runs:
        raise RuntimeError(f"no metrics.jsonl under {output_dir}")
    rows = [json.loads(line) for line in runs[-1].read_text().splitlines() if line.strip()]
    steps = [r for r in rows if "iteration_time" in r]
    timed = [r["iteration_time"] for r in steps[2:]] or [r["iteration_time"] for r in steps]
    last = steps[-1] if steps else {}
    return {"run_dir": str(runs[-1].parent), "steps": len(steps), "step_time_s_median": statistics.median(timed) if timed else None,
            "step_times_s": [round(r["iteration_time"], 4) for r in steps], "samples_per_s_median": statistics.median(r["samples_per_s"] for r in steps[2:] or steps),
            "loss_first": steps[0]["loss"] if steps else None, "loss_last": last.get("loss"),
            "peak_allocated_gib": last.get("gpu_memory_allocated_gib"), "peak_reserved_gib": last.get("gpu_memory_reserved_gib")}


def evaluate_throughput(spec_path: Path, model: str, data: dict[str, Any], args: argparse.Namespace, *, cuda: bool) -> dict[str, Any]:
    """Batched generation as `skillbank evaluate` runs it with the transformers engine (load_model,
    PromptBuilder, generate_answers: left-padded batches, prompts prepared ahead on threads), timed
    after one warm-up batch; scoring (DuckDB) is left out: it is not the throughput."""
    import torch

    from skillbank.data.examples import VisionSettings
    from skillbank.data.prompts import PromptBuilder
    from skillbank.evaluation.generate import GenerationSettings, generate_answers
    from skillbank.evaluation.model import load_model
    from skillbank.specification.io import load_spec
    from skillbank.specification.train import TrainSpec

    spec = load_spec(spec_path, TrainSpec)
    loaded = load_model(model, num_gpus=1 if cuda else 0)
    vp = loaded.processor.video_processor
    vision = VisionSettings.from_spec(spec, patch_size=int(vp.patch_size), merge_size=int(vp.merge_size))
    builder = PromptBuilder(loaded.processor, vision=vision, system_prompt=spec.custom.system_prompt, media_path=Path(data["annotations"]).parent)
    records = json.loads(Path(data["annotations"]).read_text())[: args.eval_samples]
    settings = GenerationSettings(max_new_tokens=args.max_tokens)

    def run(batch: list[dict[str, Any]], timings: dict[str, float] | None = None) -> list[str]:
        return generate_answers(loaded.model, loaded.processor, builder, batch, device=loaded.device, batch_size=args.eval_batch,
                                settings=settings, progress=False, timings=timings)

    run(records[: args.eval_batch])  # warm-up: kernels and the allocator, per shape
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    timings: dict[str, float] = {}
    began = time.perf_counter()
    run(records, timings)
    elapsed = time.perf_counter() - began
    return {"engine": "transformers", "samples": len(records), "batch_size": args.eval_batch, "max_new_tokens": args.max_tokens,
            "dtype": str(next(loaded.model.parameters()).dtype).removeprefix("torch."), "elapsed_s": round(elapsed, 3),
            "samples_per_s": round(len(records) / elapsed, 3),
            "new_tokens_per_s_upper": round(len(records) * args.max_tokens / elapsed, 1),  # random weights rarely stop early
            "ms_per_sample": {k: round(1000 * v / len(records), 2) for k, v in sorted(timings.items())},
            "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None}


def compare(plan: dict[str, Any] | None, train: dict[str, Any] | None, examples: dict[str, Any] | None) -> dict[str, Any]:
    """Measured over predicted; null where either side is missing (CPU: no GPU memory)."""
    plan, train, examples = plan or {}, train or {}, examples or {}
    out: dict[str, Any] = {"tokens_measured_over_plan": None, "memory_measured_over_plan": None, "step_time_measured_over_plan": None,
                           "mfu_measured": None, "mfu_assumed": plan.get("mfu_assumed")}
    planned = (plan.get("tokens_per_sample") or {}).get("mean")
    if planned and examples.get("tokens_per_sample"):
        out["tokens_measured_over_plan"] = round(examples["tokens_per_sample"]["mean"] / planned, 3)
    if train.get("peak_allocated_gib") and plan.get("memory_per_gpu_gib"):
        out["memory_measured_over_plan"] = round(train["peak_allocated_gib"] / plan["memory_per_gpu_gib"], 3)
    if train.get("step_time_s_median") and plan.get("step_time_s"):
        ratio = train["step_time_s_median"] / plan["step_time_s"]
        out["step_time_measured_over_plan"] = round(ratio, 3)
        if plan.get("mfu_assumed"):
            out["mfu_measured"] = round(plan["mfu_assumed"] / ratio, 4)
    return out


def device_info(cpu: bool) -> dict[str, Any]:
    import torch

    from importlib.metadata import version

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": version("transformers"), "peft": version("peft")}
    if cpu or not torch.cuda.is_available():
        return {"type": "cpu", "name": None, "plan_gpu": "h100-80gb", "cuda": None, **versions}
    name = torch.cuda.get_device_name(0)
    kind = next((k for marker, k in PLAN_GPUS if marker in name), "h100-80gb")
    return {"type": "cuda", "name": name, "plan_gpu": kind, "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
            "cuda": torch.version.cuda, **versions}


def notes(doc: dict[str, Any]) -> list[str]:
    """What a reader of the figures must know before trusting a ratio."""
    out = []
    ratio = doc["compare"]["tokens_measured_over_plan"]
    if ratio is not None and not 0.9 <= ratio <= 1.1:
        out.append(f"the data path made {ratio:.2f}x the tokens per sample plan counted: memory and step-time ratios compare different "
                   "workloads (see docs/gpu-check.md, 'tokens')")
    if doc["device"]["type"] == "cpu":
        out.append("CPU rehearsal: no GPU memory or MFU is measured; plan's figures are for the GPU named in device.plan_gpu")
    if doc["device"]["type"] == "cuda" and doc["device"]["plan_gpu"] not in (doc["device"]["name"] or "").lower().replace(" ", "-"):
        out.append(f"plan has no entry for {doc['device']['name']}; planned as {doc['device']['plan_gpu']}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from skillbank import atomic

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = child_env(args.cpu, work / "cache")
    # the examples this process caches are the ones the trainer reads; and nothing here asks the hub
    os.environ.update({k: env[k] for k in ("SKILLBANK_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")})
    check = Check(args.budget_s)
    device = device_info(args.cpu)
    cuda = device["type"] == "cuda"
    model = check.run("model", lambda: build_model(work / "model", model_config(args.tiny), cuda=cuda, tiny=args.tiny))
    records = max(args.batch * min(args.steps, 5), args.eval_samples)  # epochs repeat them: few records to process
    data = check.run("data", lambda: write_data(work / "data", clips=4, records=records, size=args.clip_size, seconds=args.clip_seconds))
    plan = train = evaluate = examples = None
    if model and data:
        spec = write_spec(work, model["path"], data, args)
        plan = check.run("plan", lambda: plan_figures(skillbank(["plan", "--spec", str(spec), "--gpu", device["plan_gpu"]], env, check.left())))
        examples = check.run("examples", lambda: warm_examples(spec, model["path"]))
        check.run("train", lambda: skillbank(["train", "--spec", str(spec), "--backend", "local", "--automl-policy", "off"], env, check.left()))
        train = check.run("train_metrics", lambda: train_figures(work / "runs"))
        evaluate = check.run("evaluate", lambda: evaluate_throughput(spec, model["path"], data, args, cuda=cuda))
    ok = all(p["ok"] for p in check.phases.values()) and len(check.phases) == 7
    doc = {"check": "gpu_check", "ok": ok, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "device": device, "tiny": args.tiny,
           "settings": {k: getattr(args, k) for k in ("steps", "batch", "mini_batch", "clip_size", "clip_seconds", "eval_samples", "eval_batch", "max_tokens")},
           "model": model, "data": data, "examples": examples, "plan": plan, "train": train, "compare": compare(plan, train, examples), "evaluate": evaluate,
           "phases": check.phases, "wall_s": round(time.perf_counter() - check.start, 1)}
    doc["notes"] = notes(doc)
    atomic.write_text(args.out, json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"ok": ok, "out": str(args.out), "compare": doc["compare"], "evaluate_samples_per_s": (evaluate or {}).get("samples_per_s"),
                      "wall_s": doc["wall_s"]}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
