"""`skillbank score`: metrics.json from a results.json, without a model (no torch)."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_answer_format, add_json, add_results_dir, command_parser

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
beside our results.json. Without either, the task is detected: mcq when every question lists options
(A) ... B) ..., or the row has a `choices` list, written into the question as A) ... B) ...) and every
ground truth names one, else "" (the output says which and why: task_from); the answer format is short
for our results and, for other engines', reasoning when a response holds an <answer> block or </think>. Answer formats: short (the whole response is the answer) or
reasoning (the last <answer>...</answer> block, closing tag optional; else the text after the last
</think>; else unparseable). Tasks: "" (yes/no per family whose answers are all yes/no, else exact
match), its_directionality (left/right/straight), mcq (options "A) ...", "(A) ...", "A. ..." in the
question; answers "B", "(B)", "B.", "Answer: B", "The answer is B" or the option's text). An
unparseable answer counts as wrong and is reported (unparseable). Rows with `family` / `dataset`
also get per-family / per-dataset metrics.

Writes --out; default: metrics.json beside our results.json, or ./metrics.json (the current folder) for
results skillbank did not write (never into the other engine's folder). An existing metrics.json is
never replaced unless --out names it: the metrics go to metrics.score.json beside it instead (replaced
by the next score), and the output says where (metrics_json). Provenance keys of the metrics.json
beside our results.json (model, generation, ...) are kept. --per-sample FILE also writes one JSON line
per result: id, question, family, dataset, reference (the ground truth), response (the raw text read),
answer and correct, as evaluate's results.json names them: answer is what was scored, the label the
rules read (yes / no, a direction, an option letter) or, for exact match, the answer text extracted
from the response (the <answer> block or the text after </think> when reasoning, the whole response
when short), compared with the reference after normalisation (lower case, end punctuation dropped);
null when unparseable. When more than half the answers are unparseable, a warning says why when the
responses tell (no </think> / <answer> when read as reasoning, a <think> trace read as short).
"""

EXAMPLES = """\
examples:
  skillbank score --results-dir results/evaluate --answer-format reasoning
  skillbank score --results-dir results/robovqa/results.json --task mcq --answer-format reasoning --json
  skillbank score --results-dir cosmos-reason1/results/ --task mcq --out reason1_metrics.json
  skillbank score --results-dir preds.jsonl --field gt=label --field response=prediction
  skillbank score --results-dir results/evaluate --per-sample verdicts.jsonl --out rescored.json
"""

SCORE_FILE = "metrics.score.json"  # where score writes when a metrics.json is already there
KEPT = ("model", "model_path", "annotation_path", "elapsed_s", "samples_per_s", "generation")  # provenance, not metrics


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "score", DESCRIPTION, epilog=EXAMPLES)
    add_results_dir(p)
    add_answer_format(p)
    p.add_argument("--primary", default="accuracy", metavar="NAME", help="metric named in primary_metric (default: accuracy)")
    p.add_argument("--field", action="append", metavar="OURS=THEIRS",
                   help="read field THEIRS as OURS (gt, response, question, video_id, family, dataset); repeat; for a field set not known")
    p.add_argument("--out", metavar="FILE", help="metrics file to write (default: metrics.json beside our results.json, ./metrics.json for "
                   "other engines' results; metrics.score.json there when a metrics.json exists: it is never replaced unless named here)")
    p.add_argument("--per-sample", metavar="FILE", help="also write one JSON line per result: id, question, family, dataset, reference, response (raw), answer (as scored), "
                   "correct (parquet when FILE ends in .parquet)")
    add_json(p, "print the metrics document as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from skillbank.evaluation import engines
    from skillbank.evaluation.metrics import family_lines, metric_value
    from skillbank.evaluation.results import METRICS, beside, score_query, write_json, write_per_sample

    con, source = engines.open_results(args.results_dir, engines.parse_fields(args.field))
    scoring = engines.resolve_scoring(con, source, args.task, args.answer_type)
    task, answer_type = scoring.task, scoring.answer_type
    out, kept = _target(args.out, beside(source.pattern, METRICS) if source.by_skillbank else _outside(source))
    report = score_query(con, source.query(), source.where, task, answer_type)
    report["warnings"] = [*report["warnings"], *_unparseable(con, source, report, answer_type)]
    name, value = metric_value(report, args.primary)
    theirs = engines.their_verdict(con, source)
    per_sample = write_per_sample(con, source.query(), task, answer_type, args.per_sample) if args.per_sample else None
    document = {
        **report,
        "task_type": task,
        "task_from": scoring.task_from,
        "answer_type_from": scoring.answer_from,
        "primary_metric": {"name": name, "value": value},
        "num_samples": report["total"],
        "results_json": source.pattern if source.by_skillbank else source.where,
        "source": {"format": source.reader.name, "layout": source.layout, "files": source.files, "their_verdict": theirs},
        **{k: scoring.previous[k] for k in KEPT if k in scoring.previous},
        "scored_by": "skillbank score",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_json(out, document)
    if args.json:
        print(json.dumps({"ok": True, **document, "metrics_json": out, "kept": kept, "per_sample": args.per_sample}, indent=2))
        return 0
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if not source.by_skillbank:
        read = f"read {source.files:,} file(s) of {source.layout} as {source.reader.name} results"
        print(read + (f" (their own {theirs['field']}: {theirs['correct']}/{theirs['total']})" if theirs else ""))
    print(f"{name} {value:.4f} on {report['total']} results (task {task!r}: {scoring.task_from}; answer format {answer_type}; "
          f"{report['unparseable']} unparseable); wrote {out}" + (f" ({kept} exists: kept; --out {kept} replaces it)" if kept else ""))
    for line in family_lines(report):
        print(f"  {line}")
    if per_sample is not None:
        print(f"wrote {per_sample} per-sample verdicts to {args.per_sample}")
    return 0


def _target(named: str | None, default: str) -> tuple[str, str | None]:
    """(file to write, the existing metrics.json kept instead of replaced, or None). A file --out names is written as asked."""
    from skillbank.evaluation.results import beside, filesystem

    if named:
        return named, None
    fs, inner = filesystem(default)
    if not fs.isfile(inner):
        return default, None
    return beside(default, SCORE_FILE), default


def _unparseable(con: object, source: object, report: dict, answer_type: str) -> list[str]:
    """The diagnosis of a mostly unparseable set (evaluation.unparseable), from counts over all responses."""
    from skillbank.evaluation.results import reply_facts_sql
    from skillbank.evaluation.unparseable import ReplyFacts, THRESHOLD, diagnose

    total, unparseable = int(report.get("total", 0)), int(report.get("unparseable", 0))
    if not total or unparseable <= THRESHOLD * total:
        return []
    rows, no_tags, thinking, empty = con.execute(reply_facts_sql(source.query())).fetchone()  # type: ignore[attr-defined]
    return diagnose(total, unparseable, answer_type, ReplyFacts(rows, no_tags=no_tags, thinking=thinking, empty=empty, what="replies"))


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
