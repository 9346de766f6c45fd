"""`skillbank models list | add`: the model table every command reads (skillbank.models.table), shown and grown.

list reads the entries (light). add validates a config offline (transformers builds it on the meta device: torch
loads inside `run_add`), writes the entry, the config and its count, and regenerates what reads the table with
`skillbank schemas generate`'s code path (commands.schemas.regenerate).
"""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_json, command_parser

DESCRIPTION = """\
The models the bank knows: one entry each in src/skillbank/models/entries/ (id, family, gated and the
credentials a download needs, a description, where its config came from) beside its public config.json in
models/configs/ and its meta-device parameter count in models/configs/counts.json. plan, spec, preflight and
the AutoML dry run count parameters from it, preflight checks gating, credentials, the family and tp_size
against its heads, `skillbank route` recognises its names in a request, `data stats` its vision numbers, and
the supported-models tables of SKILL.md and references/plan.md and `plan --help` are generated from it.
A hub id in none of them (and not a local folder with config.json) is refused by spec, preflight, plan and
the AutoML dry run alike: add it here, once.
"""

ADD_DESCRIPTION = """\
Add a model to the table, offline, with one command: from its config.json (--config PATH) or a downloaded
model folder (--snapshot DIR, e.g. the Hugging Face cache's models--ORG--NAME/snapshots/REV, whose revision
goes into the entry's source URL). Checked first, nothing written on a failure: the id is an owner/name Hub
id not in the table; the config states the sizes the counts read and a vision_config; attention heads divide
by KV heads, the hidden size by the heads (unless head_dim is stated), the vision hidden size by its heads;
the family (--family, default the config's model_type) is one cosmos-rl trains; transformers builds the
architecture on the meta device (no weights). Then written: models/configs/ORG--NAME.json (the config as
given), models/entries/ORG--NAME.yaml, its counts.json row, and every generated file that reads the table
(`skillbank schemas generate`: SKILL.md and references/plan.md tables). Prints the files it wrote.
"""

EXAMPLES = """\
examples:
  skillbank models list
  skillbank models add --config ~/Downloads/config.json --id Qwen/Qwen2.5-VL-32B-Instruct --description "Qwen2.5-VL 32B"
  skillbank models add --snapshot ~/.cache/huggingface/hub/models--Org--Name/snapshots/REV --id Org/Name --gated
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "models", DESCRIPTION, epilog=EXAMPLES)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="the model table: id, family, parameters, gating, heads, tp sizes, vision patch, source",
                               description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_json(listing, "print one JSON document {models: [{id, family, gated, credentials, description, config, entry, source, aliases, params, "
                      "vision, heads, tp_sizes}]}")
    listing.set_defaults(run=run_list)
    add = verbs.add_parser("add", help="add a model from its config.json or a snapshot folder (offline; regenerates what reads the table)",
                           description=ADD_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("--id", required=True, dest="model_id", metavar="ORG/NAME", help="the model's Hugging Face id")
    add.add_argument("--config", metavar="PATH", help="its config.json")
    add.add_argument("--snapshot", metavar="DIR", help="a downloaded model folder holding config.json")
    add.add_argument("--family", help="the family cosmos-rl trains it as (default: the config's model_type)")
    add.add_argument("--gated", action="store_true", help="the Hub gates it: a download needs HF_TOKEN (preflight checks it)")
    add.add_argument("--description", metavar="TEXT", help="one line for the tables (default: its name and family)")
    add.add_argument("--alias", action="append", default=[], metavar="NAME",
                     help="another short name a request may use (the name and the name without -Instruct are recognised anyway)")
    add.add_argument("--source-url", metavar="URL", help="where the config was published (default: its Hub URL)")
    add_json(add, "print one JSON document {ok, model, written, generated}")
    add.set_defaults(run=run_add)


def rows() -> list[dict]:
    from skillbank.models import table
    from skillbank.training.cosmos_rl.family import FAMILIES, tp_sizes

    return [{**e.to_dict(), "tp_sizes": tp_sizes(e.heads, FAMILIES[e.family]) if e.family in FAMILIES else []} for e in table.all_entries()]


def run_list(args: argparse.Namespace) -> int:
    models = rows()
    if args.json:
        print(json.dumps({"models": models}, indent=2))
        return 0
    print(f"{'model':<30} {'family':<11} {'params':>7} {'download':<16} {'heads a/kv/v':<13} {'tp_size':<10} {'patch':<6} source")
    for m in models:
        params = f"{m['params'] / 1e9:.2f}B" if m["params"] else "-"
        download = ("gated: " + ",".join(m["credentials"])) if m["gated"] else "public"
        h = m["heads"]
        patch = f"{m['vision']['patch_size']}x{m['vision']['spatial_merge_size']}" if m["vision"] else "-"
        print(f"{m['id']:<30} {m['family']:<11} {params:>7} {download:<16} {h['attention']}/{h['kv']}/{h['vision']:<8} "
              f"{','.join(map(str, m['tp_sizes'])):<10} {patch:<6} {m['source']['url']} ({m['source'].get('date', '')})")
    print(f"{len(models)} model(s); add one with `skillbank models add --config PATH --id ORG/NAME` (entries: src/skillbank/models/entries/)")
    return 0


def run_add(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.models import add, params, table
    from skillbank.paths import bank_root
    from skillbank.training.cosmos_rl.family import FAMILIES

    add.check_id(args.model_id)
    data, text, source = add.read_config(args.config, args.snapshot, args.model_id, args.source_url)
    flag = "--config" if args.config else "--snapshot"
    problems = add.config_problems(data)
    if problems:
        raise InputError(f"{source.file}: " + "; ".join(problems), where=flag, fix="pass the model's config.json as published (a Qwen-VL vision-language model)")
    family = args.family or str(data.get("model_type", ""))
    if family not in FAMILIES:
        raise InputError(f"family {family!r} is not one cosmos-rl's backend trains", where="--family" if args.family else flag,
                         fix=f"one of: {', '.join(FAMILIES)} (training.cosmos_rl.family; a new family needs its data packer there first)")
    if family != data.get("model_type"):
        raise InputError(f"--family {family} but {source.file} has model_type {data.get('model_type')!r}", where="--family",
                         fix=f"drop --family, or pass --family {data.get('model_type')}")
    config = params.ModelConfig(data, source.file, str(source.file))
    try:
        row = params.count_row(config)  # torch / transformers: the architecture builds, no weights (counts.json's row, its leaf modules too)
    except Exception as exc:  # noqa: BLE001 - whatever transformers raises, the config is what is wrong
        raise InputError(f"transformers cannot build {source.file} on the meta device: {type(exc).__name__}: {exc}", where=flag,
                         fix="pass a config.json of a model the installed transformers knows (AutoModelForImageTextToText)") from None
    name = args.model_id.split("/", 1)[1]
    entry = add.entry_text(args.model_id, family, args.gated, args.description or f"{name} ({family})", source, args.alias)
    written = add.write(args.model_id, entry, text, row)
    from skillbank.commands.schemas import regenerate

    doc = regenerate(check=False, computed={"plan_param_counts": params.counts_text()})  # torch is loaded: count here, no child
    root = bank_root()
    names = list(dict.fromkeys([_shown(p, root) for p in written] + doc["written"]))
    out = {"ok": not doc["failed"], "model": table.get(args.model_id).to_dict(), "written": names, "generated": doc}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"added {args.model_id}: {family}, {row['total'] / 1e9:.2f}B parameters, {'gated (HF_TOKEN)' if args.gated else 'public'}")
        for name in names:
            print(f"wrote {name}")
        for item in doc["failed"]:
            print(f"failed: {item['file']} ({item['why']})")
    return 0 if out["ok"] else 1


def _shown(path, root) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)
