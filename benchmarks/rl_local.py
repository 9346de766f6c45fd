"""`skillbank rl --backend local` on the tiny model with the rl template's spec: how long an 8-step GRPO run takes
(target, issue 41: under 3 minutes on 2 cores), beside the same run at the template's old fixed
rollout.max_response_length (2048: every rollout of an untrained model runs to the cap).

1. The tiny Qwen-VL and the demo dataset from the shared cache (built once, offline).
2. `skillbank spec --action rl --dataset-root DEMO --set policy.model_name_or_path=TINY --set train.max_num_steps=8`:
   the rl template, max_response_length fitted from the data's answers (printed).
3. In a fresh child (wall, CPU seconds, peak RSS): `skillbank rl --spec rl.yaml --backend local --no-start-check`
   (the start check is timed by benchmarks/rl_start.py), then the run's metrics.jsonl: steps, the reward of each
   step, rollout lengths.
4. With --before: the same spec at rollout.max_response_length 2048 (the template's value before the fit), capped at
   --before-steps policy steps (each takes minutes: the figure is per step, and the 8-step time is projected).

    .venv/bin/python benchmarks/rl_local.py [--work DIR] [--before] [--before-steps 1]

Figures depend on the machine's load: the uptime load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child_argv, measure  # noqa: E402
from rl_start import SKILL, CLI, skillbank  # noqa: E402

STEPS = 8


def run(spec: Path, out: Path) -> tuple[float, float, float, list[dict]]:
    wall, peak, cpu, _ = measure(child_argv(CLI, "rl", "--spec", str(spec), "--backend", "local", "--no-start-check", "--json"))
    rows = []
    for metrics in sorted(out.glob("**/metrics.jsonl")):
        rows += [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return wall, peak, cpu, [r for r in rows if "reward_mean" in r]


def report(name: str, wall: float, cpu: float, peak: float, rows: list[dict], steps: int) -> None:
    rewards = " ".join(f"{r['reward_mean']:.2f}" for r in rows)
    lengths = [r.get("response_length") for r in rows if r.get("response_length") is not None]
    length = f", rollout length mean {sum(lengths) / len(lengths):.0f} tokens" if lengths else ""
    per_step = wall / max(1, len(rows))
    print(f"{name:<34}{wall:>8.1f}{cpu:>8.1f}{peak:>9.2f}{len(rows):>6}{per_step:>9.1f}{per_step * steps:>11.0f}")
    print(f"  rewards per step: {rewards or '-'}{length}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=None, help="keep the specs and runs here (default: a temp folder)")
    ap.add_argument("--before", action="store_true", help="also time the run at max_response_length 2048 (slow: minutes a step)")
    ap.add_argument("--before-steps", type=int, default=1, help="policy steps of the --before run (default 1; its 8-step time is projected)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rl_local_"))
    work.mkdir(parents=True, exist_ok=True)
    tiny = json.loads(skillbank("make-tiny-model", "--cache", "--json"))["path"]
    demo = json.loads(skillbank("make-demo-dataset", "--cache", "--json"))["path"]
    spec, out = work / "rl.yaml", work / "rl-out"
    skillbank("spec", "--skill", SKILL, "--action", "rl", "--dataset-root", demo, "--set", f"policy.model_name_or_path={tiny}",
                     "--set", f"train.max_num_steps={STEPS}", "--set", f"train.output_dir={out}", "--set", f"results_dir={work / 'results'}",
                     "-o", str(spec))
    print(f"load average: {os.getloadavg()[0]:.1f} (2-core figures; others' work makes wall time longer)")
    written = yaml.safe_load(spec.read_text())
    print(f"spec: rollout.max_response_length {written['rollout']['max_response_length']} (fitted from the data's answers; the template "
          f"says 2048), {written['train']['train_batch_per_replica']} samples a step, n_generation {written['rollout']['n_generation']}")
    print(f"{'run':<34}{'wall s':>8}{'CPU s':>8}{'RSS GiB':>9}{'steps':>6}{'s/step':>9}{'8 steps s':>11}")
    wall, peak, cpu, rows = run(spec, out)
    report("fitted max_response_length", wall, cpu, peak, rows, STEPS)
    ok = len(rows) == STEPS and all(r["reward_mean"] == r["reward_mean"] for r in rows)  # every step logged, rewards finite
    if args.before:
        before, before_out = work / "rl_2048.yaml", work / "rl-out-2048"
        skillbank("spec", "--skill", SKILL, "--action", "rl", "--from", str(spec), "--set", "rollout.max_response_length=2048",
                  "--set", f"train.max_num_steps={args.before_steps}", "--set", f"train.output_dir={before_out}", "-o", str(before))
        wall, peak, cpu, rows = run(before, before_out)
        report("max_response_length 2048 (before)", wall, cpu, peak, rows, STEPS)
    print(f"8 steps logged with finite rewards: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
