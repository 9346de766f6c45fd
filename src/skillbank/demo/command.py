"""`skillbank demo`: train, evaluate and gap-analyse the embedded default, offline, on this machine."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = """\
The main job on the embedded default, offline: build (or reuse from the cache) a tiny Qwen-VL and a
synthetic video QA dataset (yes/no colour questions, left/right/straight direction, colour names),
build the spec through the skill's template, run preflight, route with automl_policy off, evaluate
the untrained model, train with the local FSDP2 backend, evaluate the trained model on the held-out
clips, run DEFT gap analysis, and print a before/after table with every artefact's path.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from skillbank.assets.tiny_model import FAMILIES
    from skillbank.demo.recipe import DemoRecipe

    d = DemoRecipe()
    p = sub.add_parser("demo", help="the main job on the embedded default: train, evaluate before/after, gap analysis",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="results/demo", metavar="DIR", help="where the run, evaluations and gaps go (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="a minute-scale smoke run (tiny data, few steps): the flow, not the accuracy")
    p.add_argument("--steps", type=int, help=f"training steps (default: {d.steps})")
    p.add_argument("--ranks", type=int, help=f"local FSDP2 ranks (default: {d.ranks})")
    p.add_argument("--records", type=int, help=f"training clips (default: {d.records})")
    p.add_argument("--seed", type=int, help=f"seed of data, model and training (default: {d.seed})")
    p.add_argument("--family", choices=FAMILIES, help=f"tiny model family (default: {d.family})")
    p.add_argument("--json", action="store_true", help="print one JSON document {families, artifacts, wall_s, ...}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from skillbank.demo.recipe import DemoRecipe
    from skillbank.demo.run import run_demo, table

    recipe = DemoRecipe.quick() if args.quick else DemoRecipe()
    chosen = {k: getattr(args, k) for k in ("steps", "ranks", "records", "seed", "family") if getattr(args, k) is not None}
    recipe = replace(recipe, **chosen)
    stream = sys.stderr if args.json else sys.stdout
    result = run_demo(recipe, Path(args.out).resolve(), log=lambda line: print(line, file=stream, flush=True),
                      progress=not args.json, rank_stdout=sys.stderr if args.json else None)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print()
        print(table(result))
    return 0
