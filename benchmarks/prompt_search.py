"""Prompt search on the embedded default: does the search find the exact prompt the model was trained with?

The tiny Qwen2.5-VL is trained on the demo dataset (the demo recipe, local backend) under nine system
prompts. TRAINED (the spec's custom.system_prompt) on every train record as it is, twice; and the
eight DISTRACTORS_FR on three more copies of every record (each copy under one of them in turn) that
open with that prompt as their own system turn and whose answers go through TO_FRENCH (yes->oui,
left->gauche, red->rouge, ...; the same videos). A record's own system turn replaces the run's system
prompt (skillbank.data.chat.build_messages), so no patch is needed. DISTRACTORS_FR are three prompts
with the same job in other words (same length and register), two paraphrases of TRAINED (its words
reordered; its first two sentences word for word, then other words) and three short generic ones.
Only the exact TRAINED wording yields the English answers evaluation scores.

Then `skillbank automl --action evaluate` searches TRAINED among the trained distractors and the
untrained ones (the default short-answer prompt, no system prompt, a reasoning-format prompt, a
same-length museum-guide persona, a long policy) crossed with vision.fps 2 (trained) or 4 (the base
spec's) on a PROXY half of the demo's held-out clips, and reports the winner on the other half
(HELD-OUT). Printed: every candidate's proxy and held-out accuracy (the held-out column for all
candidates is extra work done here, outside the search) with a 95% Wilson interval, the winner, its
held-out margin over the best other prompt with an exact McNemar test on the same clips, and the
search's wall time and what it evaluated, as the search's best_rec.json says.

    .venv/bin/python benchmarks/prompt_search.py [--steps 1500] [--records 2100] [--ranks 2]
        [--work DIR] [--model EXPORT]

--model skips training (any export trained this way); --work keeps the run, and a second call with
the same --work reuses its export when the training design (prompts, copies, steps, records, ranks)
is the same. Training is most of the cost (about 10 minutes for 1,500 steps on 2 busy CPU cores);
the search itself 5-8 minutes (28 trials on 158 clips).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import mcnemar, wilson  # noqa: E402

SKILL = "tao-finetune-cosmos-reason"
TRAINED = ("You are the video analyst of a traffic camera network. Each clip shows one object moving across a plain "
           "background. Look at every frame, then answer the question about the clip with a single word: the colour, the "
           "direction of motion, or yes or no. Do not explain the answer.")
DISTRACTORS_FR = [  # trained too, each on a share of the copies of the train set whose answers are in French
    # the same job in other words, same length and register
    ("You are the duty officer of a harbour surveillance room. Every recording contains a single item travelling over an "
     "empty backdrop. Watch the whole recording, then reply to the question about it in one word: its colour, the way it is "
     "heading, or yes or no. Give no reasons."),
    ("You review footage for the security desk of a parking garage. In each video one shape crosses a uniform scene. "
     "Study all the images and respond to the query using one word only: a colour, where the shape goes, or yes or no. "
     "Keep the reply free of any justification."),
    ("You are the inspector of a factory conveyor line. Each sequence shows one part sliding over a flat surface. "
     "Examine the sequence closely, then give a one-word answer to the question: which colour, which way it travels, "
     "or yes or no. Never justify the answer."),
    # paraphrases of TRAINED: its words reordered; its first two sentences word for word, then other words
    ("You are the traffic camera network's video analyst. In each clip one object moves over a plain background. Look at "
     "all the frames, then give a single-word answer to the question about the clip: the colour, the direction of motion, "
     "or yes or no. Do not explain it."),
    ("You are the video analyst of a traffic camera network. Each clip shows one object moving across a plain "
     "background. Watch the clip to the end and reply with one word: its colour, where it heads, or yes or no. Add no "
     "explanation."),
    # short generic prompts
    "Answer briefly.",
    "You are an AI assistant that answers questions about videos.",
    "Reply with one word.",
]
FRENCH_COPIES = 3  # each train record 3 times in French, under DISTRACTORS_FR in turn (record i: prompts 3i, 3i+1, 3i+2 mod 8)
DISTRACTORS = [  # never seen in training
    "You are a helpful assistant. Answer the question about the video with a short answer.",  # the default short prompt
    "",  # no system prompt
    "Answer the question with provided options in the following format:\n<think>\nyour reasoning\n</think>\n\n<answer>\nyour answer\n</answer>.",
    ("You are a friendly museum guide who answers visitors' questions about paintings. Describe the brush strokes, the "
     "light and the mood of the painting, mention the painter when you know them, and finish with one sentence that "
     "invites the visitor to look closer."),  # as long as TRAINED, another task
    " ".join(["Follow the operating policy of the traffic centre: check the camera, the time, the weather, the lane layout and "
              "the signal state, log every vehicle with its colour and heading, and escalate anything unusual."] * 12),  # a long policy
]
ENGLISH_COPIES = 2  # TRAINED's records twice: 2 of 5 training examples answer in English, 3 in French
TO_FRENCH = {"yes": "oui", "no": "non", "left": "gauche", "right": "droite", "straight": "tout droit",
             "red": "rouge", "green": "vert", "blue": "bleu", "yellow": "jaune"}
FPS = ("2", "4")  # trained at 2; the base spec of the search starts at 4


def design_tag(args: argparse.Namespace) -> str:
    """What a reusable export must have been trained with (the annotation file is named after it)."""
    blob = json.dumps([TRAINED, DISTRACTORS_FR, ENGLISH_COPIES, FRENCH_COPIES, TO_FRENCH, args.steps, args.records, args.ranks])
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def training_records(work: Path, data: Path, tag: str) -> Path:
    """The demo's train records ENGLISH_COPIES times as they are (ids suffixed _en1.. after the first;
    trained with TRAINED, the spec's system prompt), and FRENCH_COPIES times as copies whose
    conversations open with a DISTRACTORS_FR prompt as their own system turn (record i: prompts
    FRENCH_COPIES*i + k, k < FRENCH_COPIES, modulo their number) and whose answers go through TO_FRENCH
    (ids suffixed _fr1..; the same videos, through the same media folder)."""
    records = json.loads((data / "train" / "annotations.json").read_text(encoding="utf-8"))
    out = [r if n == 0 else {**r, "id": f"{r['id']}_en{n}"} for n in range(ENGLISH_COPIES) for r in records]
    for k in range(FRENCH_COPIES):
        for i, r in enumerate(records):
            human, gpt = r["conversations"]
            prompt = DISTRACTORS_FR[(FRENCH_COPIES * i + k) % len(DISTRACTORS_FR)]
            out.append({**r, "id": f"{r['id']}_fr{k + 1}", "conversations": [
                {"from": "system", "value": prompt}, human, {**gpt, "value": TO_FRENCH[gpt["value"]]}]})
    path = work / f"train_{tag}.json"
    path.write_text(json.dumps(out), encoding="utf-8")
    return path


def train(work: Path, args: argparse.Namespace, data: Path) -> str:
    from skillbank.assets.tiny_model import build_tiny_model
    from skillbank.demo.recipe import DemoRecipe, overrides
    from skillbank.specification.build import build_spec
    from skillbank.specification.io import read_spec_file, write_spec
    from skillbank.runs import layout
    from skillbank.training.local.launch import train_local

    tag = design_tag(args)
    done = [layout.safetensors_dir(run, step) for run in layout.run_dirs(work / "train") for step in layout.list_safetensors_steps(run)]
    custom = (read_spec_file(work / "train.yaml").get("custom") or {}) if (work / "train.yaml").is_file() else {}
    if done and custom.get("system_prompt") == TRAINED and Path(str((custom.get("train_dataset") or {}).get("annotation_path"))).name == f"train_{tag}.json":
        print(f"reusing {done[-1]}", file=sys.stderr)
        return str(done[-1])
    annotations = training_records(work, data, tag)
    recipe = replace(DemoRecipe(), steps=args.steps, records=args.records, ranks=args.ranks, batch=16, decay="none")  # as measured
    model = build_tiny_model(None, family=recipe.family, seed=recipe.seed)
    built = build_spec(SKILL, "train", [*overrides(recipe, model=model, out=work), f"custom.system_prompt={TRAINED}",
                                        f"custom.train_dataset.annotation_path={annotations}",
                                        f"custom.train_dataset.media_path={data / 'train'}"], dataset_root=data)
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
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--records", type=int, default=2100)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--work", type=Path)
    p.add_argument("--model", help="an export trained this way (skips training)")
    args = p.parse_args()
    import yaml

    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.automl.prompts import EvalSession, holdout_spec
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.io import read_spec_file, write_spec

    work = args.work or Path(tempfile.mkdtemp(prefix="prompt_search_"))
    work.mkdir(parents=True, exist_ok=True)
    data = build_demo_dataset(None, records=args.records, seed=0, progress=True)
    t = time.perf_counter()
    model = args.model or train(work, args, data)
    train_s = time.perf_counter() - t
    trained_here = not args.model and train_s > 5  # else an export given or reused from --work
    proxy, held = split_val(work, data)
    candidates = [TRAINED, *DISTRACTORS_FR, *DISTRACTORS]
    (work / "prompts.yaml").write_text(yaml.safe_dump(candidates[::-1], allow_unicode=True), encoding="utf-8")  # trained prompt last
    spec = write_spec(work / "evaluate.yaml", {
        "dataset": {"annotation_path": str(proxy), "media_dir": str(data / "val"), "system_prompt": DISTRACTORS[0]},
        "model": {"model_name": model, "dtype": "float32"}, "vision": {"fps": float(FPS[1])},
        "evaluation": {"batch_size": 64}, "generation": {"max_tokens": 4}, "num_gpus": 0, "results_dir": str(work / "results"),
    })
    study = work / time.strftime("study-%Y%m%d-%H%M%S")
    command = [sys.executable, "-m", "skillbank.cli", "automl", "--action", "evaluate", "--spec", str(spec),
               "--prompts", str(work / "prompts.yaml"), "--choices", f"vision.fps={','.join(FPS)}",
               "--max-trials", str(len(candidates) * len(FPS)), "--holdout", f"{held}:{data / 'val'}", "--out", str(study), "--json"]
    t = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
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
        results = json.loads((Path(doc["results_dir"]) / "results.json").read_text(encoding="utf-8"))
        params = json.loads(row["params"])
        rows.append({"prompt": params["dataset.system_prompt"], "fps": params["vision.fps"], "trial": row["number"], "proxy": row["value"],
                     "holdout": doc["primary_metric"]["value"], "correct": [bool(r["correct"]) for r in results]})
    n_held = len(rows[0]["correct"])

    def kind(prompt: str | None) -> str:
        return "TRAINED" if prompt == TRAINED else "trained, French" if prompt in DISTRACTORS_FR else "untrained"

    winner = rec["best_params"]["dataset.system_prompt"]
    print(f"model: {model} (trained {'here in %.0fs' % train_s if trained_here else 'earlier'}: TRAINED x{ENGLISH_COPIES} with English "
          f"answers, {len(DISTRACTORS_FR)} English distractors with French answers)")
    print(f"proxy {rec['proxy']['annotation_path']} / held-out {rec['holdout']['annotation_path']} ({rec['holdout']['records']} clips)")
    print(f"{'trial':>5s} {'fps':>4s} {'proxy':>7s} {'held-out':>9s} {'95% Wilson':>13s}  {'prompt':16s} system prompt")
    for r in rows:
        lo, hi = wilson(sum(r["correct"]), n_held)
        print(f"{r['trial']:5d} {r['fps']:4g} {100 * r['proxy']:6.1f}% {100 * r['holdout']:8.1f}% {100 * lo:5.1f}-{100 * hi:5.1f}%  "
              f"{kind(r['prompt']):16s} {json.dumps(r['prompt'])[:56]}")
    won = winner == TRAINED
    best = next(r for r in rows if r["trial"] == rec["trial_number"])
    others = [r for r in rows if r["prompt"] != winner]
    runner = max(others, key=lambda r: r["holdout"])
    only_best, only_runner, p_value = mcnemar(best["correct"], runner["correct"])
    lo_b, _ = wilson(sum(best["correct"]), n_held)
    _, hi_r = wilson(sum(runner["correct"]), n_held)
    margin = best["holdout"] - runner["holdout"]
    beyond = lo_b > hi_r and p_value < 0.05
    print(f"winner: trial {rec['trial_number']} fps {best['fps']:g} {json.dumps(winner)[:60]} "
          f"({'the trained prompt' if won else 'NOT the trained prompt'}); tied at the best proxy value: trials {rec['tied_trials']}")
    print(f"held-out margin over the best other prompt (trial {runner['trial']}, fps {runner['fps']:g}, {kind(runner['prompt'])}, "
          f"{json.dumps(runner['prompt'])[:40]}): {100 * margin:+.1f} points ({100 * best['holdout']:.1f}% vs {100 * runner['holdout']:.1f}%); "
          f"Wilson intervals {'apart' if lo_b > hi_r else 'overlap'}; McNemar on the same {n_held} clips: {only_best} vs {only_runner} "
          f"discordant, p = {p_value:.2g}: {'beyond noise' if beyond else 'NOT beyond noise'}")
    print(f"best_rec: proxy {rec['metric']['value']:.4f}, held-out {rec['holdout']['metric_value']:.4f} "
          f"(baseline {rec['baseline']['metric_value']:.4f} / {rec['holdout']['baseline_metric_value']:.4f}); "
          f"algorithm {rec['algorithm']}, trials {rec['trials']['complete']} complete, {rec['trials']['pruned']} pruned")
    cost = rec["cost"]
    print(f"search cost: {search_s:.1f}s wall for the command ({cost['wall_s']:.1f}s inside it, {cost['evaluate_s']:.1f}s generating), "
          f"{cost['evaluations']} evaluations, {cost['samples']} samples, model loaded {cost['model_loads']}x")
    print(json.dumps({"trained_prompt_won": won, "tied_trials": rec["tied_trials"], "margin": round(margin, 4), "mcnemar_p": p_value,
                      "beyond_noise": beyond, "search_wall_s": round(search_s, 1), "train_s": round(train_s, 1),
                      "rows": [{k: (v[:80] if k == "prompt" else v) for k, v in r.items() if k != "correct"} for r in rows], "cost": cost}))


if __name__ == "__main__":
    main()
