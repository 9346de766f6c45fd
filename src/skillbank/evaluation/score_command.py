"""`skillbank score`: metrics.json from a results.json, without a model (no torch)."""

from __future__ import annotations

import argparse
import json

from skillbank.evaluation.answers import ANSWER_TYPES

DESCRIPTION = """\
Recompute metrics.json from an evaluation's results.json without loading a model, like the seed's
calculate_accuracy.py: results of `skillbank evaluate`, of cosmos-rl's evaluator or of any engine
whose rows have video_id, question, gt and response (family and dataset optional) score the same
way, with the answer rules of `skillbank evaluate` and `skillbank gaps`.

--results-dir is a folder or a results.json, local or an fsspec URL (as for `skillbank gaps`).
--task and --answer-format default to the task_type / answer_type recorded in the metrics.json
beside results.json, else "" and short. Answer formats: short (the whole response is the answer) or
reasoning (the last <answer>...</answer> block, closing tag optional; else the text after the last
</think>; else unparseable). Tasks: "" (yes/no per family whose answers are all yes/no, else exact
match), its_directionality (left/right/straight), mcq (options "A) ...", "(A) ...", "A. ..." in the
question; answers "B", "(B)", "B.", "Answer: B", "The answer is B" or the option's text). An
unparseable answer counts as wrong and is reported (unparseable). Rows with `family` / `dataset`
also get per-family / per-dataset metrics. Writes --out (default: metrics.json beside results.json;
provenance keys of an existing one, such as model and generation, are kept).
"""

EXAMPLES = """\
examples:
  skillbank score --results-dir results/evaluate --answer-format reasoning
  skillbank score --results-dir results/robovqa/results.json --task mcq --answer-format reasoning --json
"""

KEPT = ("model", "model_path", "annotation_path", "elapsed_s", "samples_per_s", "generation")  # provenance, not metrics


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="metrics.json from a results.json, no model needed (any engine's results)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--results-dir", required=True, metavar="DIR", help="evaluation results_dir (or a results.json), local or URL")
    p.add_argument("--task", choices=("", "its_directionality", "mcq"), default=None,
                   help='task type (default: metrics.json\'s task_type, else "")')
    p.add_argument("--answer-format", dest="answer_type", choices=ANSWER_TYPES, default=None,
                   help="how responses hold the answer (default: metrics.json's answer_type, else short)")
    p.add_argument("--primary", default="accuracy", metavar="NAME", help="metric named in primary_metric (default: accuracy)")
    p.add_argument("--out", metavar="FILE", help="metrics file to write (default: metrics.json beside results.json)")
    p.add_argument("--json", action="store_true", help="print the metrics document as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from skillbank.evaluation.metrics import metric_value
    from skillbank.evaluation.results import METRICS, beside, find_results_json, read_metrics, score_file, scoring_defaults, write_json

    results_json = find_results_json(args.results_dir)
    out = args.out or beside(results_json, METRICS)
    previous = read_metrics(beside(results_json, METRICS))
    task, answer_type = scoring_defaults(results_json, args.task, args.answer_type)
    report = score_file(results_json, task, answer_type)
    name, value = metric_value(report, args.primary)
    document = {
        **report,
        "task_type": task,
        "primary_metric": {"name": name, "value": value},
        "num_samples": report["total"],
        "results_json": results_json,
        **{k: previous[k] for k in KEPT if k in previous},
        "scored_by": "skillbank score",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(out, document)
    if args.json:
        print(json.dumps({"ok": True, **document, "metrics_json": out}, indent=2))
        return 0
    print(f"{name} {value:.4f} on {report['total']} results (task {task!r}, answer format {answer_type}; "
          f"{report['unparseable']} unparseable); wrote {out}")
    for field in ("datasets", "families"):
        for key, m in (report.get(field) or {}).items():
            print(f"  {field[:-1] if field == 'datasets' else 'family'} {key}: accuracy {m['accuracy']:.4f} "
                  f"({m['correct']}/{m['total']}, {m['unparseable']} unparseable)")
    return 0
