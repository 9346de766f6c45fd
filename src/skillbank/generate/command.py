"""`skillbank schemas generate [--check]`: regenerate (or verify) every generated file of the bank."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    schemas = sub.add_parser("schemas", help="generate or check action schemas, manifests, templates (maintainers)")
    verbs = schemas.add_subparsers(dest="verb", metavar="VERB", required=True)
    gen = verbs.add_parser(
        "generate",
        help="write schemas/<action>.schema.json, manifest.json, spec templates, automl_support.json, parameter tables",
        description="Regenerate every generated file of the bank from the spec models in src/skillbank/specification/. "
        "With --check, write nothing and exit 2 naming each stale file (CI runs this).",
    )
    gen.add_argument("--check", action="store_true", help="verify only; exit 2 if anything is stale")
    gen.add_argument("--json", action="store_true", help="print one JSON document")
    gen.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.generate.bank import all_outputs, stale, write
    from skillbank.paths import bank_root

    outputs = all_outputs()
    root = bank_root()
    changed = stale(outputs) if args.check else write(outputs)
    names = [p.relative_to(root).as_posix() for p in changed]
    if args.json:
        print(json.dumps({"ok": not (args.check and names), "check": args.check, "files": len(outputs), "stale" if args.check else "written": names}))
    elif args.check:
        for name in names:
            print(f"stale: {name} (run `skillbank schemas generate`)")
        print(f"{len(outputs) - len(names)}/{len(outputs)} generated files are fresh")
    else:
        for name in names:
            print(f"wrote {name}")
        print(f"{len(names)} written, {len(outputs) - len(names)} already fresh")
    return 2 if args.check and names else 0
