"""Prompt search on the embedded default: does the search find the prompt the model was trained with?

The tiny Qwen2.5-VL is trained on the demo dataset (the demo recipe, local backend) with a known
system prompt (TRAINED); then `skillbank automl --action evaluate` searches that prompt among
distractors (the default short-answer prompt, no system prompt, a reasoning-format prompt, an
unrelated persona) on a PROXY half of the demo's held-out clips, and reports the winner on the
other half (HELD-OUT), crossed with vision.fps 2 (trained) or 4 (the base spec's). Printed: every candidate's proxy and held-out accuracy (the held-out column
for all candidates is extra work done here, outside the search), the winner, the trials, the
search's wall time and what it evaluated, as the search's best_rec.json says.

    .venv/bin/python benchmarks/prompt_search.py [--steps 800] [--records 2100] [--ranks 2]
        [--work DIR] [--model EXPORT]

--model skips training (any export trained with TRAINED); --work keeps the run, and a second call
with the same --work reuses its export. Training is most of the cost: 5-7 minutes for 800 steps
on 2 busy CPU cores; the search itself about 2.5 minutes (12 trials on 158 clips).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

SKILL = "tao-finetune-cosmos-reason"
TRAINED = ("You are the video analyst of a traffic camera network. Each clip shows one object moving across a plain "
           "background. Look at every frame, then answer the question about the clip with a single word: the colour, the "
           "direction of motion, or yes or no. Do not explain the answer.")
DISTRACTORS = [
    "You are a helpful assistant. Answer the question about the video with a short answer.",  # the default short prompt
    "",  # no system prompt
    "Answer the question with provided options in the following format:\n<think>\nyour reasoning\n</think>\n\n<answer>\nyour answer\n</answer>.",
    ("You are a friendly museum guide who answers visitors' questions about paintings. Describe the brush strokes, the "
     "light and the mood of the painting, mention the painter when you know them, and finish with one sentence that "
     "invites the visitor to look closer."),  # as long as TRAINED, another task
    " ".join(["Follow the operating policy of the traffic centre: check the camera, the time, the weather, the lane layout and "
              "the signal state, log every vehicle with its colour and heading, and escalate anything unusual."] * 12),  # a long policy
]
FPS = ("2", "4")  # trained at 2; the base spec of the search starts at 4


def train(work: Path, args: argparse.Namespace, data: Path) -> str:
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.demo.recipe import DemoRecipe, overrides
    from skillbank.spec.build import build_spec
    from skillbank.spec.io import read_spec_file, write_spec
    from skillbank.training import layout
    from skillbank.training.local.launch import train_local

    done = [layout.safetensors_dir(run, step) for run in layout.run_dirs(work / "train") for step in layout.list_safetensors_steps(run)]
    trained_with = (read_spec_file(work / "train.yaml").get("custom") or {}).get("system_prompt") if (work / "train.yaml").is_file() else None
    if done and trained_with == TRAINED:
        print(f"reusing {done[-1]}", file=sys.stderr)
        return str(done[-1])
    recipe = replace(DemoRecipe(), steps=args.steps, records=args.records, ranks=args.ranks)
    model = build_tiny_model(None, family=recipe.family, seed=recipe.seed)
    built = build_spec(SKILL, "train", [*overrides(recipe, model=model, out=work), f"custom.system_prompt={TRAINED}"], dataset_root=data)
    spec_path = write_spec(work / "train.yaml", built.spec)
    run = train_local(built.spec, spec_path=spec_path, log=lambda line: print(line, file=sys.stderr), stdout=sys.stderr)
    if not run["final_safetensors"]:
        raise SystemExit(f"training wrote no export; see {run['run_dir']}")
    return str(run["final_safetensors"])


def split_val(work: Path, data: Path) -> tuple[Path, Path]:
    """The demo's held-out clips, halved: even records the proxy set, odd records the held-out set."""
    records = json.loads((data / "val" / "annotations.json").read_text(encoding="utf-8"))
    proxy, held = work / "proxy.json", work / "holdout.json"
    proxy.write_text(json.dumps(records[0::2]), encoding="utf-8")
    held.write_text(json.dumps(records[1::2]), encoding="utf-8")
    return proxy, held


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--records", type=int, default=2100)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--work", type=Path)
    p.add_argument("--model", help="an export trained with TRAINED (skips training)")
    args = p.parse_args()
    import yaml

    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.automl.prompts import EvalSession, holdout_spec
    from skillbank.spec.evaluate import EvaluateSpec
    from skillbank.spec.io import read_spec_file, write_spec

    work = args.work or Path(tempfile.mkdtemp(prefix="prompt_search_"))
    work.mkdir(parents=True, exist_ok=True)
    data = build_demo_dataset(None, records=args.records, seed=0, progress=True)
    t = time.perf_counter()
    model = args.model or train(work, args, data)
    train_s = time.perf_counter() - t
    trained_here = not args.model and train_s > 5  # else an export given or reused from --work
    proxy, held = split_val(work, data)
    candidates = [TRAINED, *DISTRACTORS]
    (work / "prompts.yaml").write_text(yaml.safe_dump(candidates[::-1], allow_unicode=True), encoding="utf-8")  # trained prompt last
    spec = write_spec(work / "evaluate.yaml", {
        "dataset": {"annotation_path": str(proxy), "media_dir": str(data / "val"), "system_prompt": DISTRACTORS[0]},
        "model": {"model_name": model, "dtype": "float32"}, "vision": {"fps": float(FPS[1])},
        "evaluation": {"batch_size": 64}, "generation": {"max_tokens": 4}, "num_gpus": 0, "results_dir": str(work / "results"),
    })
    study = work / time.strftime("study-%Y%m%d-%H%M%S")
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "skillbank.cli", "automl", "--action", "evaluate", "--spec", str(spec),
                           "--prompts", str(work / "prompts.yaml"), "--choices", f"vision.fps={','.join(FPS)}",
                           "--max-trials", str(len(candidates) * len(FPS)), "--holdout", f"{held}:{data / 'val'}", "--out", str(study),
                           "--json"], capture_output=True, text=True)
    search_s = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    rec = json.loads(proc.stdout)

    import pyarrow.parquet as pq

    session = EvalSession()  # every candidate on the held-out half too: the table's second column, not the search's cost
    rows = []
    for row in pq.read_table(study / "trials.parquet").to_pylist():
        if row["state"] != "COMPLETE":
            continue
        trial_spec = EvaluateSpec.model_validate(holdout_spec(read_spec_file(Path(row["trial_dir"]) / "spec.yaml"), (str(held), str(data / "val"))))
        doc = session.evaluate(trial_spec, work / "holdout_all" / Path(row["trial_dir"]).name)
        params = json.loads(row["params"])
        rows.append((params["dataset.system_prompt"], row["value"], doc["primary_metric"]["value"], row["number"], params["vision.fps"]))
    winner = rec["best_params"]["dataset.system_prompt"]
    tied = {r[3]: r for r in rows if r[3] in rec["tied_trials"]}
    print(f"model: {model} (trained {'here in %.0fs' % train_s if trained_here else 'earlier'} with the system prompt TRAINED)")
    print(f"proxy {rec['proxy']['annotation_path']} / held-out {rec['holdout']['annotation_path']} ({rec['holdout']['records']} clips)")
    print(f"{'trial':>5s} {'fps':>4s} {'proxy':>7s} {'held-out':>9s}  system prompt")
    for prompt, value, held_value, number, fps in rows:
        tag = " <- TRAINED" if prompt == TRAINED and fps == float(FPS[0]) else ""
        print(f"{number:5d} {fps:4g} {100 * value:6.1f}% {100 * held_value:8.1f}%  {json.dumps(prompt)[:60]}{tag}")
    print(f"winner: trial {rec['trial_number']} fps {rec['best_params']['vision.fps']:g} {json.dumps(winner)[:60]} "
          f"({'the trained prompt' if winner == TRAINED else 'not the trained prompt'}); trained prompt at fps 2 among the best: "
          f"{any(r[0] == TRAINED and r[4] == float(FPS[0]) for r in tied.values())}")
    print(f"best_rec: proxy {rec['metric']['value']:.4f}, held-out {rec['holdout']['metric_value']:.4f} "
          f"(baseline {rec['baseline']['metric_value']:.4f} / {rec['holdout']['baseline_metric_value']:.4f}); "
          f"algorithm {rec['algorithm']}, trials {rec['trials']['complete']} complete, {rec['trials']['pruned']} pruned")
    if len(rec["tied_trials"]) > 1:
        print(f"tied at the best proxy value: trials {rec['tied_trials']} (the earliest is reported)")
    cost = rec["cost"]
    print(f"search cost: {search_s:.1f}s wall for the command ({cost['wall_s']:.1f}s inside it, {cost['evaluate_s']:.1f}s generating), "
          f"{cost['evaluations']} evaluations, {cost['samples']} samples, model loaded {cost['model_loads']}x")
    print(json.dumps({"trained_prompt_won": winner == TRAINED, "tied_trials": rec["tied_trials"], "search_wall_s": round(search_s, 1), "train_s": round(train_s, 1),
                      "rows": [{"prompt": r[0][:80], "fps": r[4], "proxy": r[1], "holdout": r[2]} for r in rows], "cost": cost}))


if __name__ == "__main__":
    main()
