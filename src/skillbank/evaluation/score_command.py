"""`skillbank score`: metrics.json from a results.json, without a model (no torch)."""

from __future__ import annotations

import argparse
import json

from skillbank.scoring.answers import ANSWER_TYPES

DESCRIPTION = """\
Recompute metrics.json from an evaluation's results without loading a model, with the answer rules of
`skillbank evaluate` and `skillbank gaps`. Other engines' results are read as they are:

  --results-dir   a results.json (or a folder holding one, or an evaluate --run folder), any .json file,
                  a JSONL file, or a folder of per-sample JSON files (each an object or a list of them;
                  metrics.json, best_checkpoint.json and *_score.json there are not results); local or URL
  field sets read without flags (the report's source.format says which was read):
    skillbank       gt, response (video_id, question, family, dataset optional): `skillbank evaluate`
    cosmos-reason1  datasource, video_id, prompt, correct_answer, full_response, answer, is_correct:
                    Cosmos-Reason1's evaluate.py (prompt -> question, correct_answer -> gt,
                    full_response -> response, datasource -> dataset)
    cosmos-rl       the same without prompt: cosmos-rl's evaluator (no question, so no mcq task)
  --field gt=FIELD --field response=FIELD maps any other set (question=, video_id=, family=, dataset=
                  optional); an unknown set is an error that lists the fields found.
Their own verdict (is_correct) is not scored; its accuracy is reported beside ours (source.their_verdict).

--task and --answer-format default to the task_type / answer_type recorded in the metrics.json
beside our results.json, else "" and short; for other engines' results the answer format defaults to
reasoning when a response holds an <answer> block or </think>. Answer formats: short (the whole response is the answer) or
reasoning (the last <answer>...</answer> block, closing tag optional; else the text after the last
</think>; else unparseable). Tasks: "" (yes/no per family whose answers are all yes/no, else exact
match), its_directionality (left/right/straight), mcq (options "A) ...", "(A) ...", "A. ..." in the
question; answers "B", "(B)", "B.", "Answer: B", "The answer is B" or the option's text). An
unparseable answer counts as wrong and is reported (unparseable). Rows with `family` / `dataset`
also get per-family / per-dataset metrics.

Writes --out; default: metrics.json beside our results.json (provenance keys of an existing one, such
as model and generation, are kept), or ./metrics.json (the current folder) for results skillbank did not
write: never into the other engine's folder.
"""

EXAMPLES = """\
examples:
  skillbank score --results-dir results/evaluate --answer-format reasoning
  skillbank score --results-dir results/robovqa/results.json --task mcq --answer-format reasoning --json
  skillbank score --results-dir cosmos-reason1/results/ --task mcq --out reason1_metrics.json
  skillbank score --results-dir preds.jsonl --field gt=label --field response=prediction
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
    p.add_argument("--field", action="append", metavar="OURS=THEIRS",
                   help="read field THEIRS as OURS (gt, response, question, video_id, family, dataset); repeat; for a field set not known")
    p.add_argument("--out", metavar="FILE", help="metrics file to write (default: metrics.json beside our results.json; ./metrics.json for other engines' results)")
    p.add_argument("--json", action="store_true", help="print the metrics document as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from skillbank.evaluation import engines
    from skillbank.evaluation.metrics import metric_value
    from skillbank.evaluation.results import METRICS, beside, read_metrics, score_query, scoring_defaults, write_json

    con, source = engines.open_results(args.results_dir, engines.parse_fields(args.field))
    if source.by_skillbank:
        out = args.out or beside(source.pattern, METRICS)
        previous = read_metrics(beside(source.pattern, METRICS))
        task, answer_type = scoring_defaults(source.pattern, args.task, args.answer_type)
    else:
        out = args.out or _outside(source)
        previous = {}
        task, answer_type = args.task or "", args.answer_type or engines.guess_answer_type(con, source)
    report = score_query(con, source.query(), source.where, task, answer_type)
    name, value = metric_value(report, args.primary)
    theirs = engines.their_verdict(con, source)
    document = {
        **report,
        "task_type": task,
        "primary_metric": {"name": name, "value": value},
        "num_samples": report["total"],
        "results_json": source.pattern if source.by_skillbank else source.where,
        "source": {"format": source.reader.name, "layout": source.layout, "files": source.files, "their_verdict": theirs},
        **{k: previous[k] for k in KEPT if k in previous},
        "scored_by": "skillbank score",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(out, document)
    if args.json:
        print(json.dumps({"ok": True, **document, "metrics_json": out}, indent=2))
        return 0
    if not source.by_skillbank:
        read = f"read {source.files:,} file(s) of {source.layout} as {source.reader.name} results"
        print(read + (f" (their own {theirs['field']}: {theirs['correct']}/{theirs['total']})" if theirs else ""))
    print(f"{name} {value:.4f} on {report['total']} results (task {task!r}, answer format {answer_type}; "
          f"{report['unparseable']} unparseable); wrote {out}")
    for field in ("datasets", "families"):
        for key, m in (report.get(field) or {}).items():
            print(f"  {field[:-1] if field == 'datasets' else 'family'} {key}: accuracy {m['accuracy']:.4f} "
                  f"({m['correct']}/{m['total']}, {m['unparseable']} unparseable)")
    return 0


def _outside(source: object) -> str:
    """./metrics.json, unless the current folder is inside the other engine's results (then --out is needed)."""
    import os

    from skillbank.errors import InputError
    from skillbank.evaluation.results import METRICS, is_url

    where = source.where  # type: ignore[attr-defined]
    here = os.path.abspath(METRICS)
    if not is_url(where):
        folder = os.path.abspath(where if os.path.isdir(where) else os.path.dirname(os.path.abspath(where)))
        if here.startswith(folder.rstrip(os.sep) + os.sep):
            raise InputError(
                f"the current folder is inside {where}, results skillbank did not write; metrics.json is not written there",
                where="--out",
                fix="pass --out FILE outside that folder, or run from another folder",
            )
    return here
