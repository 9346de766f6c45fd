"""`skillbank compare A B`: two evaluations of the same items, with paired statistics (no torch)."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_json, command_parser

DESCRIPTION = """\
Is model A really better than model B on the same items? A and B are folders (or files) with
evaluation results: evaluate's results_dir (results.json), an `evaluate --run` folder (its best step),
or any results `skillbank score` reads (other engines' files, field sets recognised as score does).
Each side is scored with the answer rules; task and answer format come from the metrics.json beside
our results.json, else are detected as score does (a `choices` field or options in the questions: mcq).

Items are joined on (video_id, question, turn; turn 0 where absent). A shared item whose reference answer differs, or an item
that appears twice on one side, is an error (exit 2) naming the item: the two are not the same test.
Items only in one set are counted and named (only_in_a / only_in_b), not compared.

On the paired items, overall and per family (per dataset when rows carry no family):
  n, a_correct, b_correct, a_accuracy, b_accuracy, a_ci95, b_ci95 (Wilson 95%),
  a_only (A right, B wrong), b_only, diff (accuracy A - B), diff_ci95 (Newcombe 1998 paired
  interval, method 10), diff_ci95_exact (the exact conditional interval, consistent with the
  test), p_value (exact McNemar, two-sided, full precision in --json), p_value_one_sided (H1: A
  better), n_for_power_0_8 (pairs needed to detect the observed difference at 80% power, two-sided
  0.05, Connor 1987), disagreement (a sentence when Newcombe's interval and the exact test disagree);
  each family also p_adjusted (Holm across the families).
training_overlap: each side's overlap with its model's training data (metrics.json's
training_overlap, or computed from the recipe it names; "not checked" with the reason otherwise);
when overlapping items are paired, `clean` repeats the comparison without them, overall and per
family (clean.families, Holm across them).

Prints the markdown table (or with --json one JSON document); --out FILE.md also writes the table.
Nothing is written anywhere else.
"""

EXAMPLES = """\
examples:
  skillbank compare results/eval_trained results/eval_base
  skillbank compare runs/a/evaluate runs/b/evaluate --json
  skillbank compare eval_ft/results.json eval_base/results.json --out comparison.md
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "compare", DESCRIPTION, epilog=EXAMPLES)
    p.add_argument("a", metavar="A", help="results of model A (a results_dir, results.json, or any results score reads)")
    p.add_argument("b", metavar="B", help="results of model B, on the same items")
    p.add_argument("--out", metavar="FILE.md", help="also write the markdown table to this file")
    add_json(p, "print one JSON document instead of the table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank import atomic
    from skillbank.comparison.compare import compare_dirs, to_markdown

    doc = compare_dirs(args.a, args.b)
    text = to_markdown(doc)
    if args.out:
        atomic.write_text(args.out, text)
    if args.json:
        print(json.dumps({"ok": True, **doc, "markdown": args.out}, indent=2))
        return 0
    for warning in doc["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(text, end="")
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
