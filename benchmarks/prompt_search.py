"""Prompt search on the embedded default: does the search find the prompt the model was trained with?

The tiny Qwen2.5-VL is trained on the demo dataset (the demo recipe, local backend) twice over: each
train record as it is under the system prompt TRAINED, and a copy under the system prompt FRENCH
("Answer in French.") with its answer mapped through TO_FRENCH (yes->oui, left->gauche, red->rouge,
...; the same videos). The model's right answer (the English one, what evaluation scores) thus
depends on the system prompt. Then `skillbank automl --action evaluate` searches TRAINED among
distractors (FRENCH, which was trained but scores ~0; the default short-answer prompt, no system
prompt, a reasoning-format prompt, an unrelated persona, a long policy: never seen in training) on a
PROXY half of the demo's held-out clips, and reports the winner on the other half (HELD-OUT),
crossed with vision.fps 2 (trained) or 4 (the base spec's). Printed: every candidate's proxy and
held-out accuracy (the held-out column for all candidates is extra work done here, outside the
search), the winner, the trials, the search's wall time and what it evaluated, as the search's
best_rec.json says.

skillbank's training has one system prompt per run (custom.system_prompt; a record's own system turn
is skipped), so the training processes here get a sitecustomize (PYTHONPATH, this script's PATCH)
that makes a record's system turn replace it: a test device of this benchmark, not a feature.

    .venv/bin/python benchmarks/prompt_search.py [--steps 1000] [--records 2100] [--ranks 2]
        [--work DIR] [--model EXPORT]

--model skips training (any export trained this way); --work keeps the run, and a second call with
the same --work reuses its export. Training is most of the cost (about 8 minutes for 1,000 steps on
2 busy CPU cores); the search itself a few minutes (14 trials on 158 clips).
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
FRENCH = "Answer in French."  # trained too, on the same clips with the answers in French; the search sees it as a distractor
TO_FRENCH = {"yes": "oui", "no": "non", "left": "gauche", "right": "droite", "straight": "tout droit",
             "red": "rouge", "green": "vert", "blue": "bleu", "yellow": "jaune"}
FPS = ("2", "4")  # trained at 2; the base spec of the search starts at 4


def bilingual(work: Path, data: Path) -> Path:
    """The demo's train records twice: as they are (trained with TRAINED, the spec's system prompt) and
    as copies whose first turn is the system prompt FRENCH and whose answers go through TO_FRENCH (ids
    suffixed _fr; the same videos, through the same media folder)."""
    records = json.loads((data / "train" / "annotations.json").read_text(encoding="utf-8"))
    french = []
    for r in records:
        human, gpt = r["conversations"]
        french.append({**r, "id": r["id"] + "_fr", "conversations": [
            {"from": "system", "value": FRENCH}, human, {**gpt, "value": TO_FRENCH[gpt["value"]]}]})
    path = work / "train_bilingual.json"
    path.write_text(json.dumps(records + french), encoding="utf-8")
    return path


PATCH = """# Written by benchmarks/prompt_search.py for its training processes only (PYTHONPATH): a record's own
# system turn replaces the spec's custom.system_prompt. skillbank's training skips record system turns.
try:
    import skillbank.data.chat as _chat
except ImportError:
    pass
else:
    _build = _chat.build_messages

    def build_messages(record, *, system_prompt=None, **kw):
        own = [text for role, text in _chat.turns(record) if role == "system"]
        return _build(record, system_prompt=own[0] if own else system_prompt, **kw)

    _chat.build_messages = build_messages
"""


def train(work: Path, args: argparse.Namespace, data: Path) -> str:
    import os

    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.demo.recipe import DemoRecipe, overrides
    from skillbank.spec.build import build_spec
    from skillbank.spec.io import read_spec_file, write_spec
    from skillbank.training import layout
    from skillbank.training.local.launch import train_local

    done = [layout.safetensors_dir(run, step) for run in layout.run_dirs(work / "train") for step in layout.list_safetensors_steps(run)]
    custom = (read_spec_file(work / "train.yaml").get("custom") or {}) if (work / "train.yaml").is_file() else {}
    if done and custom.get("system_prompt") == TRAINED and "bilingual" in str((custom.get("train_dataset") or {}).get("annotation_path")):
        print(f"reusing {done[-1]}", file=sys.stderr)
        return str(done[-1])
    annotations = bilingual(work, data)
    patch = work / "record_system_prompt"
    patch.mkdir(exist_ok=True)
    (patch / "sitecustomize.py").write_text(PATCH, encoding="utf-8")
    recipe = replace(DemoRecipe(), steps=args.steps, records=args.records, ranks=args.ranks)
    model = build_tiny_model(None, family=recipe.family, seed=recipe.seed)
    built = build_spec(SKILL, "train", [*overrides(recipe, model=model, out=work), f"custom.system_prompt={TRAINED}",
                                        f"custom.train_dataset.annotation_path={annotations}",
                                        f"custom.train_dataset.media_path={data / 'train'}"], dataset_root=data)
    spec_path = write_spec(work / "train.yaml", built.spec)
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(patch), *([saved] if saved else [])])  # the torchrun ranks inherit it
    try:
        run = train_local(built.spec, spec_path=spec_path, log=lambda line: print(line, file=sys.stderr), stdout=sys.stderr)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved
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
    p.add_argument("--steps", type=int, default=1000)
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
    candidates = [TRAINED, FRENCH, *DISTRACTORS]
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
    print(f"model: {model} (trained {'here in %.0fs' % train_s if trained_here else 'earlier'} with TRAINED and, answers in French, FRENCH)")
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
