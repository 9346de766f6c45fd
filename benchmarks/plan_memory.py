"""Predicted (skillbank plan's formulas) vs measured peak memory of local-backend training steps on CPU.

Trains a tiny Qwen-VL (text hidden --hidden, --layers decoder layers: tensors dominate the runtime's
overhead) with the local backend's own pieces (training.local.model: load_policy, FSDP2 shard_model on
a one-rank gloo mesh, AdamW) on text-only batches of several (mini batch, sequence) sizes, two micro batches per optimizer step
(gradient accumulation, as the default spec does), with and
without gradient checkpointing. Measured: the peak of live tensor bytes during one optimizer step
(after a warm-up step that creates AdamW's state), from torch.distributed._tools.mem_tracker.MemTracker
(a dispatch-mode tracker of every tensor storage: parameters, gradients, optimizer states,
activations, temporaries); this is tensor memory, not process RSS (no allocator caching, no Python).
Predicted: planning.estimate.memory at compute dtype float32 (the local backend's CPU dtype) with the
model's meta-device count (models.params). The vision tower is not exercised (no video), so its
part is zero on both sides. Goal: within 25% everywhere.

A last row is the fused cross-entropy setting (policy.enable_liger_fused_cross_entropy: liger-kernel's
FusedLinearCrossEntropy, which never holds the full logits). It is measured when liger-kernel runs here
(it needs triton and a CUDA GPU; the local backend trains with the plain loss); where it cannot, the
row prints the prediction and says why it was not measured, and counts for nothing in the goal.

    python benchmarks/plan_memory.py                       # small: hidden 256, 4 layers, 2 sizes
    python benchmarks/plan_memory.py --hidden 512 --layers 8 --sizes 1x512,2x1024,4x2048,8x2048   # full
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="qwen3_vl", choices=("qwen2_5_vl", "qwen3_vl"))
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--sizes", default="1x256,4x1024", help="batch x sequence, comma separated")
    parser.add_argument("--checkpointing", default="off,on", help="off, on or off,on")
    args = parser.parse_args(argv)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29617"), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")

    import torch
    import torch.distributed as dist
    from torch.distributed._tools.mem_tracker import MemTracker

    from skillbank.assets.tiny_model import TinySize, build_tiny_model
    from skillbank.planning import estimate as est
    from skillbank.models.params import count_on_meta, find_config
    from skillbank.training.local.model import load_policy, make_mesh, shard_model

    h = args.hidden
    size = TinySize(text_hidden=h, text_intermediate=2 * h, text_layers=args.layers, text_heads=4, text_kv_heads=2,
                    vision_hidden=64, vision_intermediate=128, vision_depth=1, vision_heads=2)
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    dist.init_process_group("gloo")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / "model", family=args.family, size=size)
        config = find_config(str(path))
        count = count_on_meta(config)
        arch = est.Arch.from_config(config.data)
        for mode in args.checkpointing.split(","):
            gc = mode == "on"
            model, _ = load_policy(str(path), gradient_checkpointing=gc)
            shard_model(model, make_mesh("cpu", 1, 1), dtype=torch.float32)
            model.train()
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
            for batch, seq in sizes:
                ids = torch.randint(16, arch.vocab - 16, (batch, seq))
                inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids.clone())

                def step(tracker=None) -> None:
                    for micro in range(2):  # two micro batches: gradients accumulate, as with train_batch_per_replica > mini_batch
                        if tracker is not None and micro:
                            tracker.reset_mod_stats()  # its per-module stats allow one forward per module; the peak is kept
                        loss = model(**inputs).loss / 2
                        loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)

                step()  # AdamW's state exists from here on, as in every step after the first
                tracker = MemTracker()
                tracker.track_external(model, opt)
                with tracker:
                    step(tracker)
                measured = sum(v for k, v in next(iter(tracker.get_tracker_snapshot("peak").values())).items() if k == "Total")
                predicted = est.memory(arch, total=count.total, trainable=count.trainable, adapters=0, largest_unit=count.largest_unit, root=count.root,
                                       shard=1, b=4, tokens=est.Tokens(seq, 0), mini_batch=batch, checkpointing=gc)
                rows.append((mode, batch, seq, predicted, measured))
                print(f"  gc {mode:<3} batch {batch:>2} seq {seq:>5}: predicted {predicted.total / 2**20:8.1f} MiB  measured {measured / 2**20:8.1f} MiB  "
                      f"({(predicted.total - measured) / measured:+.0%})", flush=True)
            del model, opt
    dist.destroy_process_group()
    print(f"\n{args.family}, text hidden {h}, {args.layers} layers, {count.total / 1e6:.2f}M parameters; tensor memory (MemTracker peak) on CPU, float32")
    print(f"{'checkpointing':>13} {'batch':>5} {'seq':>6} {'predicted MiB':>14} {'measured MiB':>13} {'error':>7}   predicted parts (MiB)")
    worst = 0.0
    for mode, batch, seq, predicted, measured in rows:
        err = (predicted.total - measured) / measured
        worst = max(worst, abs(err))
        parts = " ".join(f"{k}={v / 2**20:.1f}" for k, v in predicted.parts.items())
        print(f"{mode:>13} {batch:>5} {seq:>6} {predicted.total / 2**20:>14.1f} {measured / 2**20:>13.1f} {err:>+7.1%}   {parts}")
    print(f"worst error {worst:.1%} (goal: within 25%)")
    fused_row(arch, count, sizes[-1])
    return 0 if worst <= 0.25 else 1


def fused_row(arch, count, size: tuple[int, int]) -> None:
    """The fused cross-entropy setting: its predicted loss memory beside the plain loss's, measured only where liger-kernel runs."""
    import importlib.util

    import torch

    from skillbank.planning import estimate as est

    batch, seq = size
    plain = est.memory(arch, total=count.total, trainable=count.trainable, adapters=0, largest_unit=count.largest_unit, root=count.root,
                       shard=1, b=4, tokens=est.Tokens(seq, 0), mini_batch=batch, checkpointing=True)
    fused = est.memory(arch, total=count.total, trainable=count.trainable, adapters=0, largest_unit=count.largest_unit, root=count.root,
                       shard=1, b=4, tokens=est.Tokens(seq, 0), mini_batch=batch, checkpointing=True, fused_loss=True)
    line = (f"fused cross-entropy (policy.enable_liger_fused_cross_entropy), gc on, batch {batch} seq {seq}: predicted {fused.total / 2**20:.1f} MiB "
            f"(logits part {fused.parts['logits'] / 2**20:.1f} MiB, against {plain.parts['logits'] / 2**20:.1f} MiB unfused)")
    if importlib.util.find_spec("liger_kernel") is None:
        print(f"{line}; NOT MEASURED: liger-kernel is not installed here (it needs triton and a CUDA GPU; the local backend computes the plain loss)")
    elif not torch.cuda.is_available():
        print(f"{line}; NOT MEASURED: liger-kernel is installed but its triton kernels need a CUDA GPU, and this machine has none")
    else:
        print(f"{line}; not measured by this script yet: run the cosmos-rl backend with the setting and compare torch.cuda.max_memory_allocated")


if __name__ == "__main__":
    raise SystemExit(main())
