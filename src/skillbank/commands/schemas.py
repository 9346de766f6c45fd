"""`skillbank schemas generate [--check]`: regenerate (or verify) every generated file of the bank."""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_json, command_parser


def register(sub: argparse._SubParsersAction) -> None:
    schemas = command_parser(sub, "schemas", raw=False)
    verbs = schemas.add_subparsers(dest="verb", metavar="VERB", required=True)
    gen = verbs.add_parser(
        "generate",
        help="write schemas/<action>.schema.json, manifest.json, spec templates, automl_support.json, parameter tables, "
        "the cosmos-rl defaults and parameter-count snapshots",
        description="Regenerate every generated file of the bank: from the spec models in src/skillbank/specification/, "
        "the action schemas, manifests, spec templates, automl_support.json and parameter tables; and two snapshots that need "
        "a heavy library, each computed in a child process: src/skillbank/specification/cosmos_rl_defaults.json (cosmos-rl's "
        "defaults for `spec --from`; needs cosmos_rl) and src/skillbank/models/configs/counts.json (the bundled configs' "
        "meta-device parameter counts; needs torch and transformers). Where a snapshot's libraries are not importable it is "
        "reported as not checked (nothing fails). A snapshot found fresh is remembered in the skillbank cache "
        "($SKILLBANK_CACHE) with a digest of its inputs (library versions and files, our sources), so a repeated check "
        "starts no child (a cold check spends about 15 s of CPU in them). With --check, write nothing and exit 2 naming each stale file (CI runs this); "
        "exit 1 when a snapshot's generator failed.",
    )
    gen.add_argument("--check", action="store_true", help="verify only; exit 2 if anything is stale")
    add_json(gen, "print one JSON document: ok, check, files, stale|written, not_checked, failed")
    gen.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.generate import snapshots
    from skillbank.generate.bank import all_outputs, stale, write
    from skillbank.paths import bank_root

    outputs = all_outputs()
    root = bank_root()
    changed = stale(outputs) if args.check else write(outputs)
    shots = snapshots.run(write=not args.check)
    names = [p.relative_to(root).as_posix() for p in changed] + [snapshots.shown(s.snapshot.path) for s in shots if s.state in ("stale", "written")]
    unchecked = [{"file": snapshots.shown(s.snapshot.path), "why": s.why} for s in shots if s.state == "not_checked"]
    failed = [{"file": snapshots.shown(s.snapshot.path), "why": s.why} for s in shots if s.state == "failed"]
    total = len(outputs) + len(shots)
    if args.json:
        print(json.dumps({"ok": not ((args.check and names) or failed), "check": args.check, "files": total,
                          "stale" if args.check else "written": names, "not_checked": unchecked, "failed": failed}))
    else:
        for name in names:
            print(f"stale: {name} (run `skillbank schemas generate`)" if args.check else f"wrote {name}")
        for item in unchecked:
            print(f"not checked: {item['file']} ({item['why']})")
        for item in failed:
            print(f"failed: {item['file']} ({item['why']})")
        fresh = total - len(names) - len(unchecked) - len(failed)
        tail = f", {len(unchecked)} not checked" if unchecked else ""
        if args.check:
            print(f"{fresh}/{total} generated files are fresh{tail}")
        else:
            print(f"{len(names)} written, {fresh} already fresh{tail}")
    if failed:
        return 1
    return 2 if args.check and names else 0
