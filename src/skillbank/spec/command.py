"""`skillbank spec`: build a validated spec from the skill's template (or edit an existing spec file),
a dataset root and overrides; for train, state the run's plan."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

DEFAULT_SKILL = "tao-finetune-cosmos-reason"
SHORTHANDS = "@@shorthands@@"  # replaced by the skill's shorthand table when --help is printed

DESCRIPTION = """\
Build a spec: load references/spec_template_<action>.yaml (or, with --from FILE, an existing spec of
any action: YAML, JSON or TOML; every value it holds is kept), map --dataset-root onto the action's
dataset keys (skill_info.yaml data_sources), apply each --set KEY=VALUE at its dotted leaf (values
coerced to the field's type; lists as JSON or comma-separated; null clears), validate every rule,
and write it. With --from and no --action, the action is the one whose spec has every key the file
names. Setting one of fps / nframes (num_frames in evaluate and inference) clears the other: a spec
holds exactly one.

Output: -o FILE writes atomically in the format of FILE's extension (.toml TOML, which `skillbank
evaluate --config` reads; .json JSON; anything else YAML); without -o the YAML goes to stdout.
TOML has no null: null keys are left out, which reads back as the same spec.

For train, the plan goes to stderr (under "plan" with --json): train records after the validation
split, records per data-parallel rank (cosmos-rl pads every rank to ceil(records / ranks)), the
global batch (train_batch_per_replica is per data-parallel rank), optimizer steps per epoch
(floor(records per rank / train_batch_per_replica): the incomplete batch is dropped) and in all,
checkpoints kept and their disk. It needs custom.train_dataset.annotation_path to exist (records are
counted, streamed); otherwise a note says it was skipped. `skillbank preflight` checks the rest.

Plan here, run there: --path-map LOCAL=REMOTE (repeatable) writes every path key the spec names under
LOCAL as REMOTE (relative paths are made absolute first), while the dataset root and the plan's record
count are read at LOCAL here; --dataset-root may be given as LOCAL or REMOTE, the folder must exist
at LOCAL. Paths under no LOCAL are written as given, with a note.
"""

EXAMPLES = """\
shorthand keys (--set SHORT=VALUE), per action:
@@shorthands@@

examples:
  skillbank spec --action train --dataset-root /data/qa --set learning_rate=2e-5 --set dp_shard_size=4 -o train.yaml
  skillbank spec --action train --set policy.lora.enable=true --set policy.lora.r=32 \\
      --set custom.val_dataset.annotation_path=/data/val/annotations.json
  skillbank spec --from train.yaml --set epochs=2 --set nframes=8 -o train2.yaml     # edit: every other value kept
  skillbank spec --action evaluate --dataset-root /data/qa/val --set num_gpus=0 --set model=DIR -o eval.toml
  skillbank spec --from eval.toml --set fps=4 -o eval.toml                             # TOML in, TOML out
  skillbank spec --from sft.toml --set model_max_length=40960 -o train.yaml           # a cosmos-rl TOML: its defaults kept
  skillbank spec --from out/20250601120000/checkpoints/step_400/policy/cosmos_config -o resume.yaml   # a run's own config
  skillbank spec --action train --dataset-root /home/me/qa --path-map /home/me=/lustre/me -o train.yaml   # for the cluster
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills in the shorthand table only when help is printed (reading skill_info.yaml costs time)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if SHORTHANDS in text:
            text = text.replace(SHORTHANDS, _shorthand_table(DEFAULT_SKILL))
        return super()._fill_text(text, width, indent)


def _shorthand_table(skill: str) -> str:
    from skillbank.errors import InputError
    from skillbank.skillinfo import skill_info

    try:
        table = skill_info(skill).get("spec_shorthand_keys") or {}
    except InputError as exc:
        return f"  (cannot read them: {exc.message})"
    import textwrap

    lines = []
    for action, keys in table.items():
        pairs = ", ".join(f"{short}={key}" if short != key else short for short, key in (keys or {}).items())
        lines.append(textwrap.fill(pairs, width=100, initial_indent=f"  {action}: ", subsequent_indent="      ", break_on_hyphens=False))
    return "\n".join(lines) + f"\n  (from {skill}'s references/skill_info.yaml)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "spec",
        help="build or edit (--from) a validated spec: template, dataset root and KEY=VALUE overrides; train states the plan",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--skill", default=DEFAULT_SKILL, help=f"model skill (default {DEFAULT_SKILL})")
    p.add_argument("--action", help="train, evaluate, inference, quantize or export (with --from: inferred from the file when left out)")
    p.add_argument("--from", dest="from_file", metavar="FILE", help="edit this spec (YAML, JSON or TOML) instead of starting from the template; it is not modified unless -o names it. "
                   "A cosmos-rl SFT config (the TOML cosmos-rl ran with, or a checkpoint's cosmos_config) becomes a train spec: keys it leaves "
                   "out keep cosmos-rl's own defaults (what that run used), and every place the skill's template differs is listed")
    p.add_argument("--from-format", choices=("auto", "skillbank", "cosmos-rl"), default="auto",
                   help="how to read --from: auto (default: cosmos-rl when the file has keys only cosmos-rl knows, is named cosmos_config, "
                   "or is a TOML with [train] and no results_dir), skillbank (a skill spec), cosmos-rl")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE", help="dotted key or shorthand override (repeatable)")
    p.add_argument("--dataset-root", metavar="DIR", help="folder with annotations.json (or train/ and val/ subfolders)")
    from skillbank.spec.pathmap import add_argument as add_path_map

    add_path_map(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write the spec here (atomically; .toml TOML, .json JSON, else YAML) instead of stdout")
    p.add_argument("--json", action="store_true", help="print one JSON document {ok, skill, action, from, output, applied, notes, plan, spec}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.spec.build import build_spec, infer_action
    from skillbank.spec.io import dump_yaml, read_spec_file, write_spec

    base, action, converted = None, args.action, None
    if args.from_file:
        base = read_spec_file(args.from_file)
        converted = _from_cosmos(args, base)
        if converted is not None:
            base, action = converted.data, "train"
        action = action or infer_action(args.skill, base, where=args.from_file)
    elif not action:
        raise InputError("no action given", where="--action", fix="pass --action train|evaluate|inference|quantize|export, or --from FILE to edit a spec")
    from skillbank.spec.pathmap import from_args

    paths = from_args(args)
    root = paths.to_local(args.dataset_root) if args.dataset_root else None
    built = build_spec(args.skill, action, args.assignments, dataset_root=root, base=base, source=args.from_file)
    spec, notes = _for_the_node(built, paths, source=args.from_file)
    data = spec.model_dump(mode="json")
    if args.output:
        write_spec(args.output, spec)
    plan, plan_note = _plan(built.spec) if action == "train" else (None, None)
    notes = (converted.notes if converted else []) + notes + ([plan_note] if plan_note else [])
    if args.json:
        doc = {"ok": True, "skill": args.skill, "action": action, "from": args.from_file, "output": args.output,
               "from_format": ("cosmos-rl" if converted else "skillbank") if args.from_file else None,
               "cosmos_rl_defaults_kept": converted.defaults_kept if converted else [],
               "applied": built.applied, "notes": notes, "plan": plan, "spec": data}
        print(json.dumps(doc, indent=2))
        return 0
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if plan:
        from skillbank.training.steps import plan_lines

        print("\n".join(plan_lines(plan)), file=sys.stderr)
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(dump_yaml(data))
    return 0


def _from_cosmos(args: argparse.Namespace, base: dict[str, Any]) -> Any:
    """A cosmos-rl config given to --from, as a train spec dict (skillbank.spec.cosmos_config); None for a skill spec."""
    from skillbank.errors import InputError
    from skillbank.spec.build import load_template
    from skillbank.spec.cosmos_config import from_cosmos, is_cosmos_config
    from skillbank.spec.registry import spec_model

    if not is_cosmos_config(base, args.from_file, args.from_format):
        return None
    if args.action not in (None, "train"):
        raise InputError(f"{args.from_file} is a cosmos-rl SFT config: it becomes a train spec, not {args.action}", where="--action",
                         fix="drop --action (or pass --action train), or --from-format skillbank if the file is a skill spec")
    return from_cosmos(spec_model(args.skill, "train"), base, load_template(args.skill, "train"), where=args.from_file)


def _for_the_node(built: Any, paths: Any, *, source: str | None) -> tuple[Any, list[str]]:
    """The spec to write: with a path map, every path as the node sees it (built.spec stays this
    machine's view, for the plan); each LOCAL must exist here or hold a path the spec names."""
    if not paths:
        return built.spec, list(built.notes)
    from skillbank.spec.validation import validate

    model = type(built.spec)
    local = paths.local(built.spec.model_dump(mode="json"), model)
    paths.check_used(local, model)
    built.spec = validate(model, local, source=source or "spec")
    remote, notes = paths.remote(local, model)
    return validate(model, remote, source=source or "spec"), [*built.notes, *notes]


def _plan(spec: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The train plan from the annotation file's record count, and a note: why it was skipped, or
    that it trains zero steps / barely trains (preflight reports the same as an error / warning)."""
    from skillbank.errors import InputError
    from skillbank.preflight import env_checks
    from skillbank.training import steps

    if not spec.custom.train_dataset.annotation_path:
        return None, "plan skipped: custom.train_dataset.annotation_path is empty (set it, or --dataset-root DIR, to see the step count)"
    try:
        count = steps.read_train_count(spec)
    except InputError as exc:
        return None, f"plan skipped: {exc.message} ({exc.where})"
    val_records = None
    val = spec.custom.val_dataset
    if spec.validation.enable and val is not None and val.annotation_path:
        try:
            val_records = steps.count_records(val.annotation_path)
        except InputError:
            pass  # preflight reports the file; the plan just shows no validation line
    params, how = env_checks.model_params(env_checks.resolve("policy.model_name_or_path", spec.policy.model_name_or_path))
    problem = steps.steps_problem(spec, count)
    note = f"{problem.severity}: {problem.message} (fix: {problem.fix})" if problem else None
    return steps.run_plan(spec, count, val_records=val_records, params=params, params_from=how), note
