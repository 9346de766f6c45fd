"""Batched evaluation vs one sample at a time, on the tiny offline model (target: >= 3x samples/s).

Builds the tiny Qwen2.5-VL and N demo clips in a temp dir, then runs the evaluation loop
(`skillbank.evaluation.generate.generate_answers`: left-padded batches, prompts prepared one batch
ahead) on the same records with batch size 1 and --batch-size (each the faster of two passes: the
first pays one-off kernel set-up for new tensor shapes). Printed: samples/s of generation
alone (prompts prepared beforehand: what batching changes) and of the whole loop (video decoding +
processor + generation), and whether both runs gave the same answers.

    .venv/bin/python benchmarks/batched_eval.py [--samples 96] [--batch-size 32] [--max-tokens 16] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path


def build(tmp: Path, samples: int):
    from skillbank.assets import demo_dataset as demo
    from skillbank.assets.tiny_model import build_tiny_model

    model = build_tiny_model(tmp / "tiny")
    (tmp / "videos").mkdir()
    rng = random.Random(0)
    records = []
    for i in range(samples):
        record, clip = demo.make_record(rng, "val", i, demo.FAMILIES[i % 3], i // 3)
        demo.write_mp4(tmp / record["video"], clip.frames())
        records.append(record)
    return model, records


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--torch-threads", type=int, default=1, help="intra-op threads of the generating thread (1: steady on a shared 2-core machine)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.torch_threads)

    from skillbank.data.examples import VisionSettings
    from skillbank.evaluation.generate import GenerationSettings, generate_answers
    from skillbank.evaluation.inputs import PromptBuilder
    from skillbank.evaluation.model import load_model

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        model_dir, records = build(tmp, args.samples)
        loaded = load_model(str(model_dir), num_gpus=1 if torch.cuda.is_available() else 0)
        builder = PromptBuilder(loaded.processor, vision=VisionSettings(fps=8.0), system_prompt="Answer briefly.", media_path=tmp)
        settings = GenerationSettings(max_new_tokens=args.max_tokens)
        prepared = [builder(r) for r in records]  # also warms up the processor
        by_index = {id(r): p for r, p in zip(records, prepared)}

        def run(batch_size: int, builder_fn):
            return generate_answers(loaded.model, loaded.processor, builder_fn, records, device=loaded.device,
                                    batch_size=batch_size, settings=settings, progress=False)

        rows = []
        answers = {}
        for label, fn in (("generation only", lambda r: by_index[id(r)]), ("whole loop", builder)):
            speeds = []
            for size in (1, args.batch_size):
                # steady state: the faster of two passes (the first pays one-off kernel set-up per shape)
                (first, answers[(label, size)]), (second, _) = timed(lambda: run(size, fn)), timed(lambda: run(size, fn))
                speeds.append(args.samples / min(first, second))
            rows.append((label, *speeds))

    print(f"tiny model, {args.samples} clips, {args.max_tokens} new tokens max, device {loaded.device}, torch threads {torch.get_num_threads()}")
    print(f"{'':18}{'batch 1':>14}{f'batch {args.batch_size}':>14}{'speed-up':>10}")
    for label, one, many in rows:
        print(f"{label:18}{one:>10.1f} s/s{many:>10.1f} s/s{many / one:>9.1f}x")
    same = all(answers[(label, 1)] == answers[(label, args.batch_size)] for label, _, _ in rows)
    print(f"same answers batched and one at a time: {same}")
    speedup = rows[0][2] / rows[0][1]
    print(f"target >= 3x (generation): {'met' if speedup >= 3 else 'NOT met'} ({speedup:.1f}x)")
    sys.exit(0 if speedup >= 3 else 1)


if __name__ == "__main__":
    main()
