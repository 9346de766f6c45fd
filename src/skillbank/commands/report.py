"""`skillbank report --run RUN [--eval DIR ...] [--base DIR] --out DIR`: a training run and its evaluations
on one page, with pictures."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_json, command_parser
from skillbank.reporting.build import MAX_STRIPS

DESCRIPTION = """\
One page of evidence about a training run and its evaluations: DIR/report.html (one file that opens
offline, every picture embedded as a PNG) and DIR/report.md with the PNG files beside it. It reads what
the run and `skillbank evaluate` wrote and recomputes none of it. Nothing is written outside --out, and
nothing at all when an input is bad (exit 2 names the file and the fix).

At the top, a summary: what improved and whether it is significant (exact McNemar, Holm across
families), with the caveats (training overlap, small groups, the evaluated set being the run's own
validation split). Sections without data are left out and listed once at the end with what they need.

sections, and the inputs each needs:
  Training and validation loss   --run: metrics.jsonl (both backends write it) or, for a cosmos-rl run
                                 launched without skillbank, its logs (step, loss, validation loss, lr)
  Accuracy per family            --eval: metrics.json (accuracy, correct / total, ci95 per family; a
                                 family without ci95 gets the Wilson interval of correct / total);
                                 --base DIR (the model before training) adds the before column
  Confusion matrices per family  --eval: results.json (reference vs the answer read, per family)
  Failures                       --eval: every failing item by id; a strip of frames of the first
                                 --max-failures (each family in turn) from its clip (PyAV), found
                                 through metrics.json's annotation_path and media_dir, or --media-dir
  Recipe and training overlap    --run: its newest export's skillbank_recipe.json (else its spec), or
                                 the evaluated model's recipe; metrics.json training_overlap per
                                 evaluation ("not recorded" when the key is absent)
  Comparison                     --base and --eval (each --eval against the base), or two --eval
                                 folders: the table of `skillbank compare A B`

An --eval / --base folder is a results_dir of `skillbank evaluate` (results.json + metrics.json), or an
`evaluate --run` folder (its best step). --run is a run folder (<output_dir>/<timestamp>) or its
output_dir (the newest run).
"""

EXAMPLES = """\
examples:
  skillbank report --run results/train --eval results/eval_trained --base results/eval_base --out report/
  skillbank report --eval results/eval_a --eval results/eval_b --out compare_report/ --json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "report", DESCRIPTION, epilog=EXAMPLES)
    p.add_argument("--run", dest="run_dir", metavar="RUN", help="training run folder (<output_dir>/<timestamp>) or its output_dir")
    p.add_argument("--eval", action="append", default=[], metavar="DIR", dest="evals",
                   help="evaluation folder (results.json + metrics.json); repeat: two add the comparison")
    p.add_argument("--base", metavar="DIR", help="evaluation of the model before training: the before column of accuracy per family")
    p.add_argument("--out", required=True, metavar="DIR", help="where report.html, report.md and the PNGs go")
    p.add_argument("--media-dir", metavar="DIR", help="folder the evaluated clips' video paths are relative to (default: metrics.json's media_dir)")
    p.add_argument("--annotations", metavar="FILE", help="the evaluated annotations.json, for the failures' frames when metrics.json names none "
                                                      "(an evaluation `skillbank score` wrote); default: metrics.json's annotation_path")
    p.add_argument("--max-failures", type=int, default=MAX_STRIPS, metavar="N",
                   help=f"failures per evaluation shown with frames (default {MAX_STRIPS}; all are listed)")
    p.add_argument("--no-frames", action="store_true", help="list the failures without frames (no clip is read)")
    p.add_argument("--title", metavar="TEXT", help="the page's title and heading (default: Training and evaluation report)")
    add_json(p, "print one JSON document {ok, title, summary, html, markdown, images, sections: {key: {title, shown, needs, why, images}}, comparison, "
                   "accuracy: {eval: {family: {accuracy, ci95, correct, total, ci95_from}}}, failures: {eval: count}, wall_s}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillbank.reporting.build import Request, build

    req = Request(out=Path(args.out), run=args.run_dir, evals=tuple(args.evals), base=args.base, media_dir=args.media_dir,
                  annotations=args.annotations, max_strips=args.max_failures, frames=not args.no_frames, progress=not args.json, title=args.title)
    doc = build(req)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    for s in doc["sections"].values():
        print(f"{s['title']:34s} " + ("shown" if s["shown"] else f"{s.get('why') or 'not shown'} (needs {s['needs']})"))
    for label, families in doc["accuracy"].items():
        print(f"accuracy of {label} (95% interval, correct/total): " + "; ".join(
            f"{f} {100 * m['accuracy']:.1f}% [{100 * m['ci95'][0]:.1f}, {100 * m['ci95'][1]:.1f}] {m['correct']}/{m['total']}"
            for f, m in families.items()))
    for label, n in doc["failures"].items():
        print(f"failures of {label}: {n} (every id in the report)")
    print(f"wrote {doc['html']} (pictures embedded) and {doc['markdown']} ({len(doc['images'])} PNG files beside it) in {doc['wall_s']} s",
          file=sys.stdout)
    return 0
