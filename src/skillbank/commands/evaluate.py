"""`skillbank evaluate` and `skillbank inference` (torch and transformers load inside the commands)."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_json, add_quiet, command_parser

EVALUATE_DESCRIPTION = """\
Evaluate a model on a LLaVA video-QA set with batched generation. --config is the seed's flat
TOML (dataset, model, task, evaluation, vision, generation, metrics, results, num_gpus,
results_dir); it writes results_dir/results.json ([{video_id, question, gt, response}]),
results_dir/results.parquet (the same rows and each record's video, stamped with results.json's
size and mtime: gaps reads it at scale) and results_dir/metrics.json. evaluation.answer_type "short" (greedy, 16 tokens, the response is
the answer; the default without a recipe) or "reasoning" (the seed's: the prompt family's reasoning prompt, <think>...</think> then
the answer, 1024 tokens at temperature 0.6, up to 10 retries of unreadable answers); null generation
settings take the answer type's defaults. evaluation.engine "transformers" (default) or "vllm" (GPUs).
task.type "" is the general evaluator (yes/no binary metrics when every
answer is yes/no, else exact match); "its_directionality" scores left/right/straight. Records with a
`family` field also get per-family metrics.

A multi-turn record is scored on every assistant turn that has a reference answer (evaluation.turns all,
--turns all): turn k is asked with the conversation so far, the earlier turns' reference answers as the
history (the chat training builds), and results.json gets one row per turn with its `turn` (0 the first);
the summary, families and metrics.json count every turn, metrics.json "turns" gives each turn's accuracy.
--turns first asks each record's first answer only. A warning says whenever turns are left out (first on
multi-turn data, or a question without a reference answer).

A model folder skillbank wrote holds skillbank_recipe.json (how it was trained: fps or frames,
pixels, system prompt, answer format, model_type). Every vision and prompt setting the config leaves
null comes from it, else from the default (user > recipe > default); a set value that differs from
the recipe's is a warning (stderr and metrics.json "warnings"). evaluation.prompt_family
(auto / cosmos-reason1 / cosmos-reason2) picks the reasoning instruction; one that is not the
checkpoint's family is a warning. metrics.json also records "vision" (the settings used),
"settings_from", "recipe", "ci95" (95% Wilson intervals, overall and per family), "small_samples" and
a warning per set, family or yes/no class under 30 samples (with the n its accuracy would need for a
lower bound of 0.9), and a diagnosis when more than half the answers are unparseable. With
evaluation.answer_type set to another format than the recipe's and no system prompt set, that answer
type's own prompt is sent (generation.system_prompt records it). Retries stop at the first pass that
fixes nothing. The summary line names unparseable answers and, for yes/no, TP FP TN FN and precision
and recall with their 95% intervals; one line per family gives its accuracy with its interval. When most
answers are unparseable, stdout says why and metrics.json "diagnosis" holds the causes (e.g. a
reasoning request to a model trained for short answers).

Training overlap: the evaluated clips are compared with the training data the model's recipe names
(the same clip bytes, sha256 cached per file; or the same question and answer about a clip, questions
asked of several training clips being templates) and metrics.json "training_overlap" lists count and
every overlapping id, with a warning; when the training data is not on this machine it says so.
evaluation.exclude_training_overlap = true scores only the clean items.

--run DIR evaluates every safetensors/step_N of a training run (DIR is <output_dir> or
<output_dir>/<timestamp>; the newest timestamp wins) into results_dir/step_N/ and writes
results_dir/best_checkpoint.json: the best step by metrics.primary, not the last. Without --config
the validation set and vision settings come from the run's own training spec.
"""

EVALUATE_EXAMPLES = """\
examples:
  skillbank evaluate --config evaluate.toml
  skillbank evaluate --run results/train/20250101120000 --config evaluate.toml --json
"""

INFERENCE_DESCRIPTION = """\
Run a model on one video (--video FILE --prompt TEXT: prints the answer) or on a LLaVA annotations
file (--annotations FILE --media-dir DIR: writes --out results.json). --config reads an inference
spec (YAML or TOML, InferenceSpec); flags override it. Unset fps / num_frames / system prompt come
from the model folder's skillbank_recipe.json (how it was trained), else fps 2 and a short-answer
prompt; a flag that differs from the recipe is a warning. It runs on the first GPU torch sees (cuda:0,
bfloat16 under dtype auto), else on the CPU (float32); CUDA_VISIBLE_DEVICES picks the GPU, and --json says
which ("device"). Empty answers (the model wrote nothing but
special tokens or whitespace) are counted (empty_answers in --json) and named in a warning with what to
check: on stdout after the "wrote" line in batch mode, on stderr in single mode (stdout is the answer).
"""

INFERENCE_EXAMPLES = """\
examples:
  skillbank inference --model results/train/2025.../safetensors/step_400 --video clip.mp4 \\
      --prompt "Is the ball red? Answer yes or no."
  skillbank inference --model hf_model://nvidia/Cosmos-Reason2-8B --annotations val/annotations.json \\
      --media-dir val --out results/inference/results.json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "evaluate", EVALUATE_DESCRIPTION, epilog=EVALUATE_EXAMPLES)
    p.add_argument("--config", metavar="FILE.toml", help="evaluate config (flat TOML, EvaluateSpec)")
    p.add_argument("--run", dest="run_dir", metavar="DIR", help="evaluate every safetensors/step_N of this training run")
    p.add_argument("--turns", choices=("all", "first"), help="which answers of a multi-turn record are scored (evaluation.turns; default all: "
                   "every assistant turn with a reference, asked with the conversation so far; first: the first answer only)")
    add_quiet(p)
    add_json(p, "print one JSON document (metrics, or best_checkpoint for --run)")
    p.set_defaults(run=run_evaluate)

    q = command_parser(sub, "inference", INFERENCE_DESCRIPTION, epilog=INFERENCE_EXAMPLES)
    q.add_argument("--config", metavar="FILE", help="inference spec (InferenceSpec, YAML or TOML)")
    q.add_argument("--model", dest="model_path", metavar="DIR", help="model folder, hf_model://owner/repo or owner/repo")
    q.add_argument("--video", metavar="FILE", help="one video (single mode)")
    q.add_argument("--prompt", metavar="TEXT", help="the question (single mode)")
    q.add_argument("--annotations", dest="annotation_path", metavar="FILE", help="LLaVA annotations (batch mode)")
    q.add_argument("--media-dir", dest="media_dir", metavar="DIR", help="folder the records' video paths are relative to")
    q.add_argument("--out", metavar="FILE", help="results.json of batch mode (default: results_dir/results.json)")
    q.add_argument("--system-prompt", dest="system_prompt", metavar="TEXT")
    q.add_argument("--fps", type=float, help="frames per second (clears num_frames)")
    q.add_argument("--num-frames", dest="num_frames", type=int, help="fixed frames per video (clears fps)")
    q.add_argument("--max-tokens", dest="max_tokens", type=int)
    q.add_argument("--temperature", type=float, help="0 is greedy")
    q.add_argument("--batch-size", dest="batch_size", type=int)
    add_quiet(q)
    add_json(q, "print one JSON document")
    q.set_defaults(run=run_inference)


def run_evaluate(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.evaluation.evaluate import evaluate, evaluate_run
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.io import load_spec

    if not args.config and not args.run_dir:
        raise InputError("nothing to evaluate", where="--config / --run", fix="pass --config FILE.toml, or --run DIR of a training run")
    spec = load_spec(args.config, EvaluateSpec) if args.config else None
    if spec is not None and args.turns:
        spec.evaluation.turns = args.turns
    if args.run_dir:  # (args.run is the CLI's command function)
        doc = evaluate_run(args.run_dir, spec, progress=not args.quiet, turns=args.turns)
        if args.json:
            print(json.dumps({"ok": True, **doc}, indent=2))
        else:
            for warning in doc["warnings"]:
                print(f"warning: {warning}", file=sys.stderr)
            for s in doc["steps"]:
                print(f"step {s['step']}: {doc['metric']} {s['value']:.4f}")
            print(f"best: step {doc['step']} ({doc['metric']} {doc['value']:.4f}) {doc['path']}")
        return 0
    doc = evaluate(spec, progress=not args.quiet)
    if args.json:
        print(json.dumps({"ok": True, **doc}, indent=2))
    else:
        from skillbank.evaluation.metrics import family_lines, summary_line

        for warning in doc["warnings"]:
            print(f"warning: {warning}", file=sys.stderr)
        primary = doc["primary_metric"]
        print(f"{summary_line(doc, primary['name'], primary['value'])}; wrote {doc['results_dir']}/metrics.json")
        for line in family_lines(doc):
            print(f"  {line}")
        for line in turn_lines(doc.get("turns") or {}):
            print(f"  {line}")
        print(f"  {overlap_line(doc.get('training_overlap') or {})}")
    return 0


def turn_lines(block: dict) -> list[str]:
    """Each turn's accuracy, when more than the first was scored (metrics.json turns.per_turn)."""
    per_turn = block.get("per_turn") or {}
    if len(per_turn) < 2:
        return []
    return [f"turn {turn}: accuracy {t['accuracy']:.4f} [{t['ci95'][0]:.4f}, {t['ci95'][1]:.4f}] ({t['correct']}/{t['n']})"
            for turn, t in per_turn.items()]


def overlap_line(block: dict) -> str:
    """The training-overlap result in one line (checked or why not)."""
    if not block.get("checked"):
        return f"training overlap: not checked ({block.get('reason', 'no recipe')})"
    left = ", left out of the scores" if block.get("excluded") else ""
    return f"training overlap: {block.get('count', 0)} item(s) share content with {block.get('training_data')}{left}"


FLAGS = ("model_path", "video", "prompt", "annotation_path", "media_dir", "system_prompt", "fps", "num_frames", "max_tokens",
         "temperature", "batch_size")  # each flag's dest is its InferenceSpec key


def run_inference(args: argparse.Namespace) -> int:
    from skillbank.evaluation.inference import run_inference as infer
    from skillbank.specification.actions import InferenceSpec
    from skillbank.specification.io import spec_with_flags

    spec = spec_with_flags(InferenceSpec, args.config, {key: getattr(args, key) for key in FLAGS})
    doc = infer(spec, out=args.out, progress=not args.quiet)  # type: ignore[arg-type]
    if args.json:
        print(json.dumps({"ok": True, **doc}, indent=2))
        return 0
    single = "answer" in doc  # single mode: stdout is the answer alone, so every warning goes to stderr
    for warning in doc["warnings"]:
        if single or warning != doc["empty_warning"]:
            print(f"warning: {warning}", file=sys.stderr)
    if single:
        print(doc["answer"])
        return 0
    print(f"wrote {doc['count']} answers to {doc['results_json']}")
    if doc["empty_warning"]:  # batch mode: the blanks are said beside the result, not only on stderr
        print(f"warning: {doc['empty_warning']}")
    return 0
