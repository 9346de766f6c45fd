"""`skillbank evaluate` of a few clips on the tiny model: how much wall time goes beyond generation,
and where it goes (target, issue 41: wall - generation < 10 s on 2 cores).

Builds the tiny Qwen2.5-VL with a recipe naming the demo's training split (as the demo's trained
model has: evaluate checks the training overlap), and an evaluate config of N held-out demo clips
(default 10), then runs
`skillbank evaluate --config ... --quiet` --repeat times, each in a fresh interpreter (what a user
pays): wall time from the parent, generation time from the metrics.json it writes (elapsed_s: the
generation loop with its retries, model loading excluded), CPU time beside them (the steadier figure
on a shared machine). Medians are printed.

One more run, in a child that times itself, says where the rest goes: the wall time of each phase
(the CLI's parser, the spec, records and input checks, the training-overlap check, the model load,
generation, scoring, writing results), the part of each that was importing modules, the import time
by top-level package (self time, as `python -X importtime` counts it) and the processes started
(a subprocess that re-imports torch would show here).

With --baseline SRC (another checkout's src/, e.g. main's), the runs alternate between that code and
this one (before / after in one run, under the same load) and both breakdowns are printed.

    .venv/bin/python benchmarks/evaluate_startup.py [--samples 10] [--repeat 3] [--keep DIR] [--baseline /work/main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_OVERHEAD_S = 10.0  # issue 41: wall - generation time

# The child that times its own phases. Imports are timed by wrapping importlib's _find_and_load
# (CPython calls it by name for every import not already in sys.modules): self time per top-level
# package, and the import time inside each phase.
PHASES = r"""
import importlib._bootstrap as _bootstrap, json, subprocess, sys, time
from collections import defaultdict
T0 = time.perf_counter()
imports = defaultdict(float)
stack = []  # [name, seconds of nested imports]
phase_imports = defaultdict(float)
current = ["start-up"]
_find = _bootstrap._find_and_load
def _timed_find(name, import_):
    stack.append([name, 0.0])
    t = time.perf_counter()
    try:
        return _find(name, import_)
    finally:
        dt = time.perf_counter() - t
        _, nested = stack.pop()
        imports[name.split(".")[0]] += dt - nested
        if stack:
            stack[-1][1] += dt
        else:
            phase_imports[current[0]] += dt
_bootstrap._find_and_load = _timed_find
spent = defaultdict(float)
cpu = defaultdict(float)
started = []
_popen = subprocess.Popen.__init__
def _counted(self, args, *a, **k):
    started.append(str(args if isinstance(args, str) else " ".join(map(str, args)))[:120])
    _popen(self, args, *a, **k)
subprocess.Popen.__init__ = _counted
def wrap(module, attr, phase):
    import importlib
    mod = importlib.import_module(module)
    fn = getattr(mod, attr, None)
    if fn is None:
        return  # not in this version of the code
    def timed(*a, **k):
        outer = current[0]
        if outer != "other":
            return fn(*a, **k)  # nested in a timed phase: counted there
        current[0] = phase
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            spent[phase] += time.perf_counter() - t
            cpu[phase] += time.process_time() - c
            current[0] = outer
    setattr(mod, attr, timed)
spent["start-up"] = time.perf_counter() - T0
cpu["start-up"] = time.process_time()
current[0] = "cli import"
t, c = time.perf_counter(), time.process_time()
import skillbank.cli
spent["cli import"] = time.perf_counter() - t
cpu["cli import"] = time.process_time() - c
current[0] = "other"
for module, attr, phase in (
    ("skillbank.cli", "build_parser", "parser"),
    ("skillbank.specification.io", "load_spec", "spec"),
    ("skillbank.evaluation.evaluate", "load_eval_records", "records + input checks"),
    ("skillbank.evaluation.evaluate", "check_inputs", "records + input checks"),
    ("skillbank.evaluation.evaluate", "resolve_settings", "recipe"),
    ("skillbank.evaluation.evaluate", "_training_overlap", "training overlap"),
    ("skillbank.evaluation.model", "load_model", "model + processor load"),
    ("skillbank.evaluation.generate", "generate_with_retries", "generation (+ retries)"),
    ("skillbank.evaluation.evaluate", "score_results", "scoring"),
    ("skillbank.evaluation.evaluate", "_unparseable", "unparseable diagnosis"),
    ("skillbank.evaluation.evaluate", "write_outputs", "writing results"),
):
    wrap(module, attr, phase)
t = time.perf_counter()
rc = skillbank.cli.main(sys.argv[1:])
total, total_cpu = time.perf_counter() - T0, time.process_time()
spent["other"] = total - sum(v for k, v in spent.items() if k != "other")
cpu["other"] = total_cpu - sum(v for k, v in cpu.items() if k != "other")
print(json.dumps({"rc": rc, "total": total, "cpu": total_cpu, "phases": spent, "phase_cpu": cpu, "phase_imports": phase_imports,
                  "imports": imports, "started": started}))
"""


def build(folder: Path, samples: int) -> Path:
    """A tiny model that carries a recipe as a trained one does (its training data: the demo dataset's
    train split, so evaluate checks the training overlap), the demo's held-out clips (the first
    `samples` of them) and an evaluate config; returns the config."""
    import tomli_w

    from skillbank import recipe
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model

    data = build_demo_dataset()  # the cached copy (built once)
    model = build_tiny_model(folder / "tiny")
    custom = {"train_dataset": {"annotation_path": str(data / "train" / "annotations.json"), "media_path": str(data / "train")},
              "vision": {"fps": 8.0}}
    recipe.write(model, recipe.from_custom(custom, base_model=str(model), model_dir=model))
    config = folder / "eval.toml"
    config.write_text(tomli_w.dumps({
        "results_dir": str(folder / "out"), "num_gpus": 0,
        "dataset": {"annotation_path": str(data / "val" / "annotations.json"), "media_dir": str(data / "val")},
        "model": {"model_name": str(model)},
        "evaluation": {"limit": samples},
    }))
    return config


def argv(config: Path) -> list[str]:
    return ["evaluate", "--config", str(config), "--quiet"]


def env(src: str | None) -> dict[str, str]:
    """The environment of a child that runs the code under `src` (None: this checkout's)."""
    here = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "PYTHONPATH": src or here}


def timed_run(config: Path, src: str | None = None) -> dict[str, float]:
    """One `skillbank evaluate` in a fresh interpreter: wall, CPU (children's rusage) and generation seconds."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "skillbank.cli", *argv(config)], check=True, capture_output=True, text=True, env=env(src))
    wall = time.perf_counter() - start
    after = os.times()
    metrics = json.loads((config.parent / "out" / "metrics.json").read_text())
    return {"wall": wall, "cpu": (after.children_user - before.children_user) + (after.children_system - before.children_system),
            "generation": float(metrics["elapsed_s"])}


def phase_run(config: Path, src: str | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", PHASES, *argv(config)], check=True, capture_output=True, text=True, env=env(src))
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(label: str, runs: list[dict[str, float]], phases: dict) -> float:
    """Print one code's figures; return its median wall - generation."""
    med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "generation")}
    overhead = statistics.median(r["wall"] - r["generation"] for r in runs)
    print(f"{label}: wall {med['wall']:.2f} s, CPU {med['cpu']:.2f} s, generation {med['generation']:.2f} s, "
          f"wall - generation {overhead:.2f} s (target < {TARGET_OVERHEAD_S:.0f} s: {'met' if overhead < TARGET_OVERHEAD_S else 'NOT met'})")
    print("  runs (wall / generation s): " + ", ".join(f"{r['wall']:.2f} / {r['generation']:.2f}" for r in runs))
    gen_cpu = phases["phase_cpu"].get("generation (+ retries)", 0.0)
    print(f"  where one run's {phases['total']:.2f} s ({phases['cpu']:.2f} s CPU, {phases['cpu'] - gen_cpu:.2f} s of it outside "
          "generation) went: wall s, of which importing modules, CPU s:")
    for name, seconds in sorted(phases["phases"].items(), key=lambda kv: -kv[1]):
        if seconds >= 0.005:
            print(f"    {name:<26}{seconds:>7.2f}{phases['phase_imports'].get(name, 0.0):>8.2f}{phases['phase_cpu'].get(name, 0.0):>8.2f}")
    top = sorted(phases["imports"].items(), key=lambda kv: -kv[1])[:12]
    print(f"    imports in all: {sum(phases['imports'].values()):.2f} s; by package: " + ", ".join(f"{k} {v:.2f}" for k, v in top))
    print(f"    processes started: {len(phases['started'])}" + "".join(f"\n      {s}" for s in phases["started"]))
    return overhead


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="build into DIR and keep it (reused when it holds eval.toml)")
    parser.add_argument("--baseline", metavar="SRC", help="another checkout's src/ to time alternately with this one (before / after)")
    opts = parser.parse_args()
    codes = {"before (" + opts.baseline + ")": opts.baseline} if opts.baseline else {}
    codes["this checkout"] = None
    with tempfile.TemporaryDirectory(prefix="eval-startup-") as tmp:
        folder = Path(opts.keep or tmp)
        config = folder / "eval.toml"
        if not config.is_file():
            config = build(folder, opts.samples)
        timed_run(config)  # warm-up: the page cache, the .pyc files and the clips' hashes, as any second run finds them
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
        for _ in range(opts.repeat):
            for label, src in codes.items():
                runs[label].append(timed_run(config, src))
        phases = {label: phase_run(config, src) for label, src in codes.items()}
    print(f"skillbank evaluate, tiny Qwen2.5-VL with a recipe, {opts.samples} held-out demo clips, a fresh interpreter each run, "
          f"medians of {opts.repeat}:")
    overheads = {label: summary(label, runs[label], phases[label]) for label in codes}
    if opts.baseline:
        before, after = overheads.values()
        print(f"wall - generation: {before:.2f} s -> {after:.2f} s ({after - before:+.2f} s)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0 if overheads["this checkout"] < TARGET_OVERHEAD_S else 1


if __name__ == "__main__":
    sys.exit(main())
