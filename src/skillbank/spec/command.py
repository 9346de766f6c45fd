"""`skillbank spec`: build a validated spec from the skill's template, a dataset root and overrides."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = """\
Build a spec: load references/spec_template_<action>.yaml, map --dataset-root onto the action's
dataset keys (skill_info.yaml data_sources), apply each --set KEY=VALUE at its dotted leaf (values
coerced to the field's type; lists as JSON or comma-separated; null clears), validate every rule,
and write nested YAML. Shorthand keys from skill_info.yaml work too (batch_size, learning_rate,
dp_shard_size, mini_batch, fps, ...). Setting custom.vision.nframes clears fps, and vice versa.
"""

EXAMPLES = """\
examples:
  skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root /data/qa \\
      --set learning_rate=2e-5 --set dp_shard_size=4 -o train.yaml
  skillbank spec --skill tao-finetune-cosmos-reason --action train --set policy.lora.enable=true \\
      --set policy.lora.r=32 --set custom.val_dataset.annotation_path=/data/val/annotations.json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "spec",
        help="build a validated spec from the template, a dataset root and KEY=VALUE overrides",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--skill", required=True, help="model skill, e.g. tao-finetune-cosmos-reason")
    p.add_argument("--action", required=True, help="train, evaluate, inference, quantize or export")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE", help="dotted override (repeatable)")
    p.add_argument("--dataset-root", metavar="DIR", help="folder with annotations.json (or train/ and val/ subfolders)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the spec here (atomically) instead of stdout")
    p.add_argument("--json", action="store_true", help="print one JSON document {ok, spec, output, applied, notes}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.spec.build import build_spec
    from skillbank.spec.io import dump_yaml, write_spec

    built = build_spec(args.skill, args.action, args.assignments, dataset_root=args.dataset_root)
    data = built.spec.model_dump(mode="json")
    if args.output:
        write_spec(args.output, data)
    if args.json:
        print(json.dumps({"ok": True, "skill": args.skill, "action": args.action, "output": args.output, "applied": built.applied, "notes": built.notes, "spec": data}, indent=2))
        return 0
    for note in built.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(dump_yaml(data))
    return 0
