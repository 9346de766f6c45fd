"""Batched evaluation vs one sample at a time, on the tiny offline model (target: >= 3x samples/s).

Builds the tiny Qwen2.5-VL and N demo clips in a temp dir, then runs the evaluation loop
(`skillbank.evaluation.generate.generate_answers`: left-padded batches, prompts prepared two batches
ahead on worker threads) on the same records with batch size 1 and --batch-size. After one warm-up
pass of each (one-off kernel set-up per tensor shape), --repeats rounds time both sizes back to back
(the machine may be shared: a round's ratio is what compares), and the medians are printed:
samples/s of generation alone (prompts prepared beforehand: what batching changes) and of the whole
loop (video decoding + processor + generation), the speed-up, the same in CPU time per sample (the
work, which a busy machine does not change), where the generating thread spent the whole loop's time (waiting for prompts, collate, generate, decode; ms per sample), and whether both
sizes gave the same answers. Exit 1 when the generation speed-up misses the target.

    .venv/bin/python benchmarks/batched_eval.py [--samples 96] [--batch-size 32] [--max-tokens 16] [--repeats 3] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
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


def cpu_timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads): CPU time is the work, whatever else runs."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of both sizes back to back (medians are printed)")
    parser.add_argument("--torch-threads", type=int, default=1, help="intra-op threads of the generating thread (1: steady on a shared 2-core machine)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.torch_threads)

    from skillbank.data.examples import VisionSettings
    from skillbank.evaluation.generate import GenerationSettings, generate_answers
    from skillbank.data.prompts import PromptBuilder
    from skillbank.evaluation.model import load_model

    sizes = (1, args.batch_size)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        model_dir, records = build(tmp, args.samples)
        loaded = load_model(str(model_dir), num_gpus=1 if torch.cuda.is_available() else 0)
        builder = PromptBuilder(loaded.processor, vision=VisionSettings(fps=8.0), system_prompt="Answer briefly.", media_path=tmp)
        settings = GenerationSettings(max_new_tokens=args.max_tokens)
        prepare_s, prepared = timed(lambda: [builder(r) for r in records])  # also warms up the processor
        by_index = {id(r): p for r, p in zip(records, prepared)}
        modes = {"generation only": lambda r: by_index[id(r)], "whole loop": builder}

        def run(batch_size: int, builder_fn, timings=None):
            return generate_answers(loaded.model, loaded.processor, builder_fn, records, device=loaded.device,
                                    batch_size=batch_size, settings=settings, progress=False, timings=timings)

        answers = {(label, size): run(size, fn) for label, fn in modes.items() for size in sizes}  # warm-up
        speeds: dict[tuple[str, int], list[float]] = {key: [] for key in answers}
        ratios: dict[str, list[float]] = {label: [] for label in modes}
        cpu: dict[tuple[str, int], list[float]] = {key: [] for key in answers}
        stages: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
        for _ in range(args.repeats):
            for label, fn in modes.items():
                for size in sizes:
                    timings: dict[str, float] = {}
                    seconds, cpu_seconds = cpu_timed(lambda: run(size, fn, timings if label == "whole loop" else None))
                    speeds[(label, size)].append(args.samples / seconds)
                    cpu[(label, size)].append(1000 * cpu_seconds / args.samples)
                    if label == "whole loop":
                        stages[size].append(timings)
                ratios[label].append(speeds[(label, sizes[1])][-1] / speeds[(label, sizes[0])][-1])

    print(f"tiny model, {args.samples} clips, {args.max_tokens} new tokens max, device {loaded.device}, torch threads {torch.get_num_threads()}, "
          f"medians of {args.repeats} rounds")
    print(f"{'':18}{'batch 1':>14}{f'batch {args.batch_size}':>14}{'speed-up':>10}")
    for label in modes:
        one, many = (statistics.median(speeds[(label, size)]) for size in sizes)
        print(f"{label:18}{one:>10.1f} s/s{many:>10.1f} s/s{statistics.median(ratios[label]):>9.1f}x")
    print("CPU time (all threads; steady when the machine is shared), ms/sample:")
    for label in modes:
        one, many = (statistics.median(cpu[(label, size)]) for size in sizes)
        print(f"{label:18}{one:>10.1f} ms{many:>11.1f} ms{one / many:>9.1f}x")
    print(f"prompt preparation alone (decode + processor, one thread): {1000 * prepare_s / args.samples:.1f} ms/sample")
    for size in sizes:
        names = sorted({k for t in stages[size] for k in t})
        parts = ", ".join(f"{k} {1000 * statistics.median(t.get(k, 0.0) for t in stages[size]) / args.samples:.1f}" for k in names)
        print(f"whole loop, batch {size}: ms/sample in the generating thread: {parts}")
    same = all(answers[(label, 1)] == answers[(label, args.batch_size)] for label in modes)
    print(f"same answers batched and one at a time: {same}")
    speedup = statistics.median(ratios["generation only"])
    print(f"target >= 3x (generation): {'met' if speedup >= 3 else 'NOT met'} ({speedup:.1f}x)")
    sys.exit(0 if speedup >= 3 and same else 1)


if __name__ == "__main__":
    main()
