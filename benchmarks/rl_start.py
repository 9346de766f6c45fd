"""`skillbank rl` on the tiny model's spec: how long until it answers, with the start check bounded (the
default) beside the full check (the behaviour before the bound: every rollout to the run's
max_response_length), and whether the bounded check still flags a spec whose groups all score alike.

1. The tiny Qwen-VL and the demo dataset from the shared cache (built once, offline).
2. `skillbank spec --action rl --dataset-root DEMO --set policy.model_name_or_path=TINY`: the rl template
   with max_response_length fitted from the data's answers (printed).
3. In a fresh child each (wall, CPU seconds, peak RSS): `skillbank rl --spec rl.yaml --gpus-per-node 8
   --json` with --start-check bounded, then (with --full) --start-check full, then --no-start-check (the
   floor: everything but the check). The check's own line is printed for each.
4. The flat case: the same spec with rollout.max_response_length 16 (an untrained model's answers never
   match), bounded: the warning must name the flat groups.

    .venv/bin/python benchmarks/rl_start.py [--work DIR] [--full]

--full adds the baseline run (minutes to tens of minutes on 2 cores: it samples every prompt group to the
run's length). Figures depend on the machine's load: the uptime load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child_argv, measure  # noqa: E402

SKILL = "tao-finetune-cosmos-reason"
CLI = "from skillbank.cli import main\nsys.argv = ['skillbank', *argv]\nmain()"


def skillbank(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "skillbank.cli", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"skillbank {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stdout


def rl_run(spec: Path, *flags: str) -> tuple[float, float, float, dict]:
    wall, peak, cpu, out = measure(child_argv(CLI, "rl", "--spec", str(spec), "--gpus-per-node", "8", "--json", *flags))
    return wall, peak, cpu, json.loads(out[out.index("{"):])


def check_line(doc: dict) -> str:
    check = doc.get("start_check")
    if not check:
        return "no start check"
    if check.get("skipped"):
        return f"skipped: {check['skipped']}"
    return (f"{check['mode']}: {check['groups']} group(s) of {check['samples_per_group']}, up to {check['tokens']} tokens, "
            f"{check['seconds']:.1f} s ({check['load_seconds']:.1f} s loading); flat {check['flat_groups']}, "
            f"varied {check['varied_groups']}, undecided {check['undecided_groups']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=None, help="keep the specs and runs here (default: a temp folder)")
    ap.add_argument("--full", action="store_true", help="also time --start-check full (the behaviour before the bound; slow)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rl_start_"))
    work.mkdir(parents=True, exist_ok=True)
    tiny = json.loads(skillbank("make-tiny-model", "--cache", "--json"))["path"]
    demo = json.loads(skillbank("make-demo-dataset", "--cache", "--json"))["path"]
    spec = work / "rl.yaml"
    said = skillbank("spec", "--skill", SKILL, "--action", "rl", "--dataset-root", demo, "--set", f"policy.model_name_or_path={tiny}",
                     "--set", f"train.output_dir={work / 'rl-out'}", "--set", f"results_dir={work / 'results'}", "-o", str(spec))
    print(f"load average: {os.getloadavg()[0]:.1f} (2-core figures; others' work makes wall time longer)")
    print("spec: " + "; ".join(line.strip() for line in said.splitlines() if "max_response_length" in line) or "(no max_response_length line)")
    rows = [("bounded (default)", ())]
    if args.full:
        rows.append(("full (before the bound)", ("--start-check", "full")))
    rows.append(("no check (the floor)", ("--no-start-check",)))
    print(f"{'start check':<26}{'wall s':>8}{'CPU s':>8}{'RSS GiB':>9}  check")
    for name, flags in rows:
        wall, peak, cpu, doc = rl_run(spec, *flags)
        print(f"{name:<26}{wall:>8.1f}{cpu:>8.1f}{peak:>9.2f}  {check_line(doc)}")
    flat = work / "rl_flat.yaml"
    skillbank("spec", "--skill", SKILL, "--action", "rl", "--from", str(spec), "--set", "rollout.max_response_length=16", "-o", str(flat))
    wall, peak, cpu, doc = rl_run(flat)
    flagged = [w for w in doc.get("warnings", []) if "start check" in w or "alike" in w]
    print(f"{'flat spec, bounded':<26}{wall:>8.1f}{cpu:>8.1f}{peak:>9.2f}  {check_line(doc)}")
    print(f"flat spec flagged: {'yes: ' + flagged[0][:160] if flagged else 'NO'}")
    return 0 if flagged else 1


if __name__ == "__main__":
    raise SystemExit(main())
