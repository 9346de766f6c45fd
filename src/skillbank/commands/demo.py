"""`skillbank demo`: train, evaluate and gap-analyse the embedded default, offline, on this machine."""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_json, command_parser

DESCRIPTION = """\
The main job on the embedded default, offline: build (or reuse from the cache) a tiny Qwen-VL and a
synthetic video QA dataset (yes/no colour questions, left/right/straight direction, colour names),
build the spec through the skill's template, run preflight, route with automl_policy off, evaluate
the untrained model, train with the local FSDP2 backend, evaluate the trained model on the held-out
clips, run DEFT gap analysis, and print a before/after table with every artefact's path.
"""


def deft_description(r) -> str:
    return f"""
--deft runs the DEFT loop instead (skills/applications/tao-run-deft/references/demo.md). Round 0
trains {r.round0_steps} steps on a base set that under-represents {r.weak}: {r.base_per_family} train clips of each
other family, {r.base_weak} of it. Proxy: {r.proxy_per_family} other train clips per family. Pool: the rest of the train
clips, every family, {r.weak} thinned to {r.pool_weak_share:.0%} of it. Frozen benchmark: every held-out clip.
Two DEFT runs start from the round-0 model: mined selection (nearest pool records of the proxy
failures) and the random control, {r.rounds} rounds of {r.per_round} records and {r.steps} steps each; the control runs
2r-1 rounds when mining reached the target at round r. Prints {r.weak}'s benchmark accuracy
per round for both and the verdict (records added to reach {r.target}; gain since round 0). Writes
<out>/deft_demo.md, deft_demo.json, round0/, mined/ and random/ (each a DEFT run: state.json,
report.html; a rerun in the same --out replaces them).
"""


def register(sub: argparse._SubParsersAction) -> None:
    from skillbank.assets.tiny_model import FAMILIES
    from skillbank.demo.deft import DeftDemoRecipe
    from skillbank.demo.recipe import DemoRecipe

    d, dd = DemoRecipe(), DeftDemoRecipe()
    p = command_parser(sub, "demo", DESCRIPTION + deft_description(dd))
    p.add_argument("--out", metavar="DIR", help="where the run, evaluations and gaps go (default: results/demo; with --deft results/demo-deft)")
    p.add_argument("--quick", action="store_true", help="a minute-scale smoke run (tiny data, few steps): the flow, not the accuracy")
    p.add_argument("--steps", type=int, help=f"training steps (default: {d.steps}; the learning rate {d.lr:g} decays to zero by "
                   f"{d.decay} over them: fewer steps is a shorter schedule, not an early stop)")
    p.add_argument("--ranks", type=int, help=f"local FSDP2 ranks (default: {d.ranks})")
    p.add_argument("--records", type=int, help=f"training clips (default: {d.records})")
    p.add_argument("--seed", type=int, help=f"seed of data, model and training (default: {d.seed})")
    p.add_argument("--family", choices=FAMILIES, help=f"tiny model family (default: {d.family})")
    add_json(p, "print one JSON document {families, artifacts, timings, wall_s, cpu_s (with the training ranks), load_average, short_of_expected (the families under the 95%% every family reached with the default recipe on every seed measured), ...}; "
                   "with --deft {arms: {mined, random}: rounds (records added, benchmark per family), comparison, report}")
    g = p.add_argument_group("--deft: the DEFT loop, mined selection against random (default --out results/demo-deft)")
    g.add_argument("--deft", action="store_true", help=f"run the DEFT demo (--steps then means each round's training steps, default {dd.steps}; "
                   f"round 0 trains {dd.round0_steps}; --ranks default {dd.ranks}; --records default {dd.records})")
    g.add_argument("--rounds", type=int, help=f"DEFT rounds per arm (default: {dd.rounds})")
    g.add_argument("--per-round", type=int, help=f"records added per round (default: {dd.per_round})")
    g.add_argument("--target", type=float, help=f"directionality benchmark accuracy to reach (default: {dd.target})")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    if args.deft:
        return run_deft(args)
    deft_only = [f"--{k.replace('_', '-')}" for k in ("rounds", "per_round", "target") if getattr(args, k) is not None]
    if deft_only:
        from skillbank.errors import InputError

        raise InputError(f"{', '.join(deft_only)} only apply with --deft", where=deft_only[0], fix="add --deft, or drop them")
    from skillbank.demo.recipe import DemoRecipe
    from skillbank.demo.run import run_demo, table

    recipe = DemoRecipe.quick() if args.quick else DemoRecipe()
    chosen = {k: getattr(args, k) for k in ("steps", "ranks", "records", "seed", "family") if getattr(args, k) is not None}
    recipe = replace(recipe, **chosen)
    stream = sys.stderr if args.json else sys.stdout
    result = run_demo(recipe, Path(args.out or "results/demo").resolve(), log=lambda line: print(line, file=stream, flush=True),
                      progress=not args.json, rank_stdout=sys.stderr if args.json else None)
    return _show(result, table, as_json=args.json)


def run_deft(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from skillbank.demo.deft import DeftDemoRecipe, run_deft_demo, table
    from skillbank.errors import InputError

    recipe = DeftDemoRecipe.quick() if args.quick else DeftDemoRecipe()
    chosen = {k: getattr(args, k) for k in ("steps", "ranks", "records", "seed", "family", "rounds", "per_round", "target")
              if getattr(args, k) is not None}
    for key in ("steps", "ranks", "rounds", "per_round"):
        if chosen.get(key, 1) < 1:
            raise InputError(f"--{key.replace('_', '-')} must be at least 1", where=f"--{key.replace('_', '-')}", fix="pass a positive number")
    if not 0.0 < chosen.get("target", 0.5) <= 1.0:
        raise InputError("--target is an accuracy in (0, 1]", where="--target", fix="e.g. --target 0.8")
    recipe = replace(recipe, **chosen)
    stream = sys.stderr if args.json else sys.stdout
    result = run_deft_demo(recipe, Path(args.out or "results/demo-deft").resolve(), log=lambda line: print(line, file=stream, flush=True),
                           rank_stdout=sys.stderr if args.json else None)
    return _show(result, table, as_json=args.json)


def _show(result: dict, table, *, as_json: bool) -> int:
    """One JSON document under --json, else the before/after table after the progress lines."""
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print()
        print(table(result))
    return 0
