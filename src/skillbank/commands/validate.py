"""`skillbank validate`: every skill folder, frontmatter, link, manifest and generated file."""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_json, command_parser

DESCRIPTION = (
    "Check every skill of the bank: Agent Skills frontmatter, that every relative path named in a "
    "SKILL.md or reference exists, references one level deep, manifests and skill_info.yaml against the spec "
    "models, config.json and plugin manifests against the folders, skills/README.md (the index) naming every skill, and generated files fresh (the cosmos-rl defaults and parameter-count snapshots in child processes, "
    "where cosmos_rl / torch are importable; elsewhere they are listed as not checked). Exit 2 on any problem."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "validate", DESCRIPTION, raw=False)
    add_json(p, "print one JSON document {ok, checks: {name: [problems]}, not_checked: [...]}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.validate.checks import CHECKS, not_checked

    results = {name: check() for name, check in CHECKS.items()}
    unchecked = not_checked()
    ok = not any(results.values())
    if args.json:
        print(json.dumps({"ok": ok, "checks": results, "not_checked": unchecked}, indent=2))
    else:
        for name, found in results.items():
            print(f"{'ok  ' if not found else 'FAIL'} {name}")
            for problem in found:
                print(f"     {problem}")
        for line in unchecked:
            print(f"note {line}")
    return 0 if ok else 2
