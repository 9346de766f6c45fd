"""`skillbank gaps`: DEFT gap analysis, results.json -> a parquet of the failures (no torch)."""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_answer_format, add_json, add_results_dir, command_parser

DESCRIPTION = """\
Find the evaluation's results.json under --results-dir (a folder or an fsspec URL such as s3://...),
score every row with the evaluation's answer rules (the same as metrics.json and `skillbank score`:
--answer-format reasoning reads the last <answer> block, else the text after </think>; yes/no,
directions and multiple choice read the label an answer starts with; else exact match after
normalisation), and write a parquet of the rows scored wrong, with columns video_id, media_path,
question, ground_truth, response (raw), answer (as parsed; null when unparseable), family and
error_type: FP / FN in a family whose answers are all yes/no ("yes" positive; an unparseable answer
is FN when the truth is yes, FP when it is no), else mismatch, and turn (the answer's index in a
multi-turn record; null for results without it). Unparseable answers are failures,
never dropped. NAME.summary.json beside it counts failures by error type, by family (and dataset)
and unparseable answers. --task / --answer-format default to those recorded in the metrics.json
beside results.json, else "" and short. --annotations joins each failing id to its video, under
--media-root (default: the annotations' folder). results.parquet (written by evaluate beside
results.json) is read instead of results.json when its stamp matches (same results.json size and
mtime, not older, same row count); its video column then stands in for --annotations when they are
the stamped file. The summary says what was read: results_read, media_from, and
results_parquet_ignored (why the parquet was not trusted). The public flags --gaps-parquet,
--kpi-ann-path and --kpi-media-path are accepted as aliases.
"""

EXAMPLES = """\
examples:
  skillbank gaps --results-dir results/evaluate --out gaps/round1.parquet \\
      --annotations /data/val/annotations.json --media-root /data/val
  skillbank gaps --results-dir results/evaluate --out gaps.parquet --answer-format reasoning --task mcq --json
  python scripts/analyze_gaps.py --results-dir s3://bucket/eval --gaps-parquet gaps.parquet \\
      --kpi-ann-path s3://bucket/val/annotations.json --kpi-media-path s3://bucket/val
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "gaps", DESCRIPTION, epilog=EXAMPLES)
    add_arguments(p)
    p.set_defaults(run=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_results_dir(p)
    p.add_argument("--out", "--gaps-parquet", dest="out", required=True, metavar="FILE.parquet", help="failures parquet to write")
    p.add_argument("--annotations", "--kpi-ann-path", dest="annotations", metavar="FILE", help="LLaVA annotations the evaluation read")
    p.add_argument("--media-root", "--kpi-media-path", dest="media_root", metavar="DIR", help="folder the records' video paths are relative to")
    add_answer_format(p)
    p.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    add_json(p, "print the summary as one JSON document")


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.gaps.analyze import analyze_gaps, summary_path

    if args.media_root and not args.annotations:
        raise InputError("--media-root needs --annotations", where="--media-root", fix="pass --annotations FILE too")
    summary = analyze_gaps(args.results_dir, args.out, annotations=args.annotations, media_root=args.media_root,
                           task_type=args.task, answer_type=args.answer_type, threads=args.threads)
    if args.json:
        print(json.dumps({"ok": True, **summary, "summary_json": summary_path(args.out)}, indent=2))
        return 0
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items())
    print(f"{summary['failures']} of {summary['total']} failed ({counts}; {summary['unparseable']} unparseable); "
          f"wrote {args.out} and {summary_path(args.out)}")
    return 0
