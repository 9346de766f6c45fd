"""`skillbank spec`: build a validated spec from the skill's template (or edit an existing spec file),
a dataset root and overrides; for train, state the run's plan."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from skillbank.commands.flags import action_names, add_assignments, add_json, add_skill, command_parser, DEFAULT_SKILL

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

rl: the answer format (custom.answer_type), system prompt, vision settings (fps or nframes, pixels)
and task type you did not set come from the start model's skillbank_recipe.json (what SFT trained
with; user > recipe > template), and a short-answer start (or a prompt that asks for no
<think>/<answer>) drops the format reward from the template's rewards. stderr lists what came from
the recipe and warns where a value you set differs from it ("recipe": {path, sources, warnings}
with --json); without a recipe the template stays, with a note.

Plan here, run there: --path-map LOCAL=REMOTE (repeatable) writes every path key the spec names under
LOCAL as REMOTE (relative paths are made absolute first), while the dataset root and the plan's record
count are read at LOCAL here; --dataset-root may be given as LOCAL or REMOTE, the folder must exist
at LOCAL. Paths under no LOCAL are written as given, with a note. The spec records its map under
paths.map: every later command that reads it where a LOCAL folder exists (preflight, plan, train
--dry-run, rl, submit, evaluate, spec --from) reads the data at LOCAL without the flag; job folders
and TOMLs rendered for the node name REMOTE only, without the map.

Batches fitted to the data (train, rl): a batch you did not set (by --set, a shorthand, or in the
--from file) is lowered to fit when the records are counted: the template's value is the ceiling.
When it gives fewer than 4 optimizer steps per epoch (the threshold of the "barely trains" warning),
train.train_batch_per_replica becomes the largest multiple of mini_batch giving at least 4
(mini_batch comes down when even one mini batch gives fewer); only when no batch gives 4 (fewer than
4 records per rank), the largest batch that trains, and the warning stays. validation.batch_size
becomes the largest giving one validation batch per rank. rl's batch follows the same rule in
policy steps, as a multiple of rollout.n_generation and dp_shard_size x mini_batch. Each change
prints as "fitted: KEY OLD -> NEW: why" with the rule and the steps per epoch it gives (under
"fitted" with --json: {key, from (the ceiling), to, why, given, kept}). spec --from a spec fitted earlier
fits those keys again from their ceilings: OLD is the file's value, and a value that comes out the same
prints "kept: KEY VALUE (fitted earlier; ceiling C)" (kept: true, given: the file's value). A value
you set is never changed: a plan that cannot run (zero optimizer steps; validation on with zero batches
per rank; rl: zero policy steps) exits 2 and writes nothing, naming the key and the fix; one that
barely trains keeps your value and warns.

What you set stays yours (train): every key set with --set or a shorthand is recorded in the spec's
user_set (spec --from keeps the list and adds to it); `skillbank automl` leaves those keys out of its
search at your values (--search KEY searches one anyway) and its dry run lists them as fixed.

The global batch is train_batch_per_replica x dp_shard_size x dp_replicate_size: a spec --from FILE that
changes it (fewer GPUs per node, another dp size, a re-fitted batch) or the optimizer steps per epoch at
the records counted prints "warning: changed from the --from spec: global batch OLD -> NEW ..." with the
train.train_batch_per_replica that keeps OLD on the new ranks (gradient accumulation over the same
mini_batch: the memory of one pass is unchanged); with --json: batch_change {global_batch,
train_batch_per_replica, data_parallel_ranks, steps_per_epoch: {from, to}, records, keep, line} (null when
nothing changed), the line in notes too.
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
  skillbank spec --action evaluate --dataset-root /data/qa --annotations collision_test.json -o eval.toml   # another file in DIR
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
    p = command_parser(sub, "spec", DESCRIPTION, epilog=EXAMPLES, formatter_class=_HelpFormatter)
    add_skill(p, f"model skill (default {DEFAULT_SKILL})", default=DEFAULT_SKILL)
    p.add_argument("--action", help=f"{action_names()} (with --from: inferred from the file when left out)")
    p.add_argument("--from", dest="from_file", metavar="FILE", help="edit this spec (YAML, JSON or TOML) instead of starting from the template; it is not modified unless -o names it. "
                   "A cosmos-rl SFT config (the TOML cosmos-rl ran with, or a checkpoint's cosmos_config) becomes a train spec: keys it leaves "
                   "out keep cosmos-rl's own defaults (what that run used), and every place the skill's template differs is listed")
    p.add_argument("--from-format", choices=("auto", "skillbank", "cosmos-rl"), default="auto",
                   help="how to read --from: auto (default: cosmos-rl when the file has keys only cosmos-rl knows, is named cosmos_config, "
                   "or is a TOML with [train] and no results_dir), skillbank (a skill spec), cosmos-rl")
    add_assignments(p, "dotted key or shorthand override (repeatable)")
    p.add_argument("--dataset-root", metavar="DIR", help="folder with annotations.json (or train/ and val/ subfolders)")
    p.add_argument("--annotations", metavar="FILE", help="the annotation file instead of DIR/annotations.json: a path, or a file name inside "
                   "--dataset-root DIR (clips relative to DIR, else to the file's folder)")
    from skillbank.commands.flags import add_path_map

    add_path_map(p)
    from skillbank.commands.flags import add_described

    add_described(p, "the real dataset, described (train): batches are fitted to --records instead of the records counted here")
    p.add_argument("-o", "--output", metavar="FILE", help="write the spec here (atomically; .toml TOML, .json JSON, else YAML) instead of stdout")
    add_json(p, "print one JSON document {ok, skill, action, from, output, applied, fitted, notes, plan, batch_change, spec; rl: recipe}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.specification.build import build_spec, infer_action
    from skillbank.specification.io import LoadedSpec, dump_yaml, write_spec
    from skillbank.specification.pathmap import PathMap

    base, action, converted, loaded = None, args.action, None, None
    if args.from_file:
        loaded = LoadedSpec.read(args.from_file)  # read once: the spec to edit and the path map it records
        base = loaded.raw()
        converted = _from_cosmos(args, base)
        if converted is not None:
            base, action = converted.data, "train"
        action = action or infer_action(args.skill, base, where=args.from_file)
    elif not action:
        raise InputError("no action given", where="--action", fix="pass --action train|evaluate|inference|quantize|export, or --from FILE to edit a spec")
    from skillbank.commands.flags import check_described
    from skillbank.runs import fitting

    check_described(args)
    paths = loaded.recorded_map().with_flags(args.path_map) if loaded else PathMap.parse(args.path_map)
    root = paths.to_local(args.dataset_root) if args.dataset_root else None
    annotations = paths.to_local(args.annotations) if args.annotations else None
    before = _as_given(args.skill, action, base) if action == "train" else None  # the --from spec, its batches as written
    given, (base, ceilings) = base, _unfit(base)  # given: the --from file as read, what each fit's output compares with
    built = build_spec(args.skill, action, args.assignments, dataset_root=root, base=base, source=args.from_file, annotations=annotations)
    built.explicit -= set(ceilings) - set(built.applied)  # fitted by an earlier `spec`, not set by you: fitted again
    filled = _from_recipe(built, action, paths)
    node_spec, notes = _for_the_node(built, paths, source=args.from_file)  # built.spec: this machine's view
    local, fitted, plan, plan_notes = _fit(built.spec, action, built.explicit, args)  # refuses (InputError) before anything is written
    fitted = fitting.against_given(fitted, given)  # a value the file already held: "kept", not "ceiling -> value"
    spec = fitting.apply_fits(node_spec, fitted) if paths else local
    if action == "train" and plan is not None:
        counted = f"described: --records {args.records}" if args.records else local.custom.train_dataset.annotation_path
        if paths and not args.records:  # the written spec names REMOTE only: the copy here is named by the node's path
            counted = f"this machine's copy (--path-map) of {paths.to_remote(counted)}"
        spec = _with_block(spec, fitted, plan, counted, ceilings)
        fitted += fitting.back_to_ceiling(ceilings, given, local, fitted, built.applied)  # said, not recorded: at the ceiling now
        if fitted:
            plan_notes.append(f"fitted to {plan['train_records']:,} train records counted at {counted}" + (
                " (this machine's copy under --path-map: the job's first step re-fits them to the node's files; --records N fits the real data now)"
                if paths and not args.records else "") + "; the spec records them under `fitted`")
    data = spec.model_dump(mode="json")
    if args.output:
        write_spec(args.output, spec)
    notes = (converted.notes if converted else []) + notes + (filled.notes if filled else []) + plan_notes
    ignored = spec.train.ckpt.ignored_save_freq() if action == "train" else None  # preflight's spec.checkpoints warning
    if ignored:
        notes.append(f"warning: {ignored} (fix: set train.ckpt.save_freq_in_epoch=0 to save by steps, or save_freq=null)")
    change = fitting.batch_change(before, local, plan["train_records"] if plan else None) if before is not None else None
    if change:
        notes.append(f"warning: {change.line()}")
    if args.json:
        doc = {"ok": True, "skill": args.skill, "action": action, "from": args.from_file, "output": args.output,
               "from_format": ("cosmos-rl" if converted else "skillbank") if args.from_file else None,
               "cosmos_rl_defaults_kept": converted.defaults_kept if converted else [],
               "applied": built.applied, "fitted": [f.to_dict() for f in fitted], "notes": notes, "plan": plan,
               "batch_change": change.to_dict() if change else None, "spec": data}
        if filled:
            doc["recipe"] = filled.to_dict()
        print(json.dumps(doc, indent=2))
        return 0
    for warning in filled.warnings if filled else []:
        print(f"warning: {warning}", file=sys.stderr)
    if filled and filled.recipe_path:
        taken = [k for k, source in filled.sources.items() if source == "recipe"]
        print(f"from the start model's recipe ({filled.recipe_path}): {', '.join(taken) or 'nothing (you set every setting)'}", file=sys.stderr)
    for fit in fitted:
        print(fit.said(), file=sys.stderr)
    for note in notes:
        print(note if note.startswith("warning: ") else f"note: {note}", file=sys.stderr)
    if plan and action == "train":
        from skillbank.runs.steps import plan_lines

        print("\n".join(plan_lines(plan)), file=sys.stderr)
    elif plan:
        print(f"plan: {plan['prompts']:,} prompts -> {plan['samples_per_epoch']:,} rollout samples per epoch, {plan['samples_per_step']} per policy step "
              f"(train_batch_per_replica): {plan['steps_per_epoch']:,} policy step(s) per epoch, each sample up to {plan['max_response_length']:,} tokens "
              f"(rollout.max_response_length)", file=sys.stderr)
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(dump_yaml(data))
    return 0


def _from_cosmos(args: argparse.Namespace, base: dict[str, Any]) -> Any:
    """A cosmos-rl config given to --from, as a train spec dict (skillbank.specification.cosmos_config); None for a skill spec."""
    from skillbank.errors import InputError
    from skillbank.specification.build import load_template
    from skillbank.specification.cosmos_config import from_cosmos, is_cosmos_config
    from skillbank.specification.registry import spec_model

    if not is_cosmos_config(base, args.from_file, args.from_format):
        return None
    if args.action not in (None, "train"):
        raise InputError(f"{args.from_file} is a cosmos-rl SFT config: it becomes a train spec, not {args.action}", where="--action",
                         fix="drop --action (or pass --action train), or --from-format skillbank if the file is a skill spec")
    return from_cosmos(spec_model(args.skill, "train"), base, load_template(args.skill, "train"), where=args.from_file)


def _from_recipe(built: Any, action: str, paths: Any) -> Any:
    """rl: the settings the user did not set from the start model's recipe (skillbank.training.rl_recipe),
    read where this machine sees the start model; built.spec is replaced. None for other actions."""
    if action != "rl":
        return None
    from skillbank.training.rl_recipe import fill_from_recipe

    start = built.spec.policy.model_name_or_path
    filled = fill_from_recipe(built.spec, built.explicit, start_here=paths.to_local(start) if paths and start else None)
    built.spec = filled.spec
    return filled


def _for_the_node(built: Any, paths: Any, *, source: str | None) -> tuple[Any, list[str]]:
    """The spec to write: with a path map, every path as the node sees it (built.spec stays this
    machine's view, for the plan); each LOCAL must exist here or hold a path the spec names."""
    if not paths:
        return built.spec, list(built.notes)
    from skillbank.specification.validation import validate

    model = type(built.spec)
    local = paths.local(built.spec.model_dump(mode="json"), model)
    paths.check_used(local, model)
    built.spec = validate(model, local, source=source or "spec")
    remote, notes = paths.remote(local, model)
    if "paths" in model.model_fields:  # the spec records its map: later commands read it at LOCAL without the flag
        remote["paths"] = {"map": paths.items()}
    return validate(model, remote, source=source or "spec"), [*built.notes, *notes]


def _as_given(skill: str, action: str, data: dict[str, Any] | None) -> Any:
    """The --from file as its own spec (its global batch is what the derived spec is compared with); None without
    --from, or when the file does not validate by itself (the --set of this call may be its fix)."""
    if data is None:
        return None
    from pydantic import ValidationError

    from skillbank.specification.registry import spec_model

    try:
        return spec_model(skill, action).model_validate(data)
    except ValidationError:
        return None


def _unfit(base: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, int]]:
    """`--from` a spec that records fitted values: each back to its ceiling (they are fitted again, not kept as if set)."""
    block = (base or {}).get("fitted") or {}
    ceilings = dict(block.get("ceilings") or {})
    if not ceilings:
        return base, {}
    import copy

    from skillbank.specification.overrides import set_dotted

    base = copy.deepcopy(base)
    for key, ceiling in ceilings.items():
        set_dotted(base, key, ceiling)
    base.pop("fitted", None)
    return base, ceilings


def _with_block(spec: Any, fits: list[Any], plan: dict[str, Any], counted: str, ceilings: dict[str, int]) -> Any:
    """The spec with its `fitted` block: the keys fitted, their ceilings, and the records they were fitted to."""
    from skillbank.runs.fitting import fitted_block

    data = spec.model_dump(mode="json")
    data["fitted"] = fitted_block(fits, plan["train_records"], counted, {k: v for k, v in ceilings.items() if k in {f.key for f in fits}})
    return type(spec).model_validate(data)


def _fit(spec: Any, action: str, explicit: set[str], args: argparse.Namespace) -> tuple[Any, list[Any], dict[str, Any] | None, list[str]]:
    """Batches the user did not set fitted to the data (skillbank.runs.steps), then the plan; a plan
    that cannot run is an InputError naming the fix, raised before anything is written.
    Returns (spec, fits, plan, notes)."""
    if action in ("train", "rl"):
        _check_model(spec)
    if action == "train":
        return _fit_train(spec, explicit, args.records, args.val_records)
    if action == "rl":
        return _fit_rl(spec, explicit)
    return spec, [], None, []


def _check_model(spec: Any) -> None:
    """The model as preflight and plan judge it, refused with their words: a hub id the bank cannot count
    (models.params.unknown_model: `skillbank models add`), tp_size / cp_size that do not divide its heads."""
    from skillbank.errors import InputError
    from skillbank.models.params import find_config, lookup
    from skillbank.training.cosmos_rl.family import parallel_check

    value = spec.policy.model_name_or_path.strip()
    if not value:
        return
    lookup(value)
    config = find_config(value)
    par = spec.policy.parallelism
    problem = parallel_check(value, config.data, par.tp_size, getattr(par, "cp_size", 1)) if config is not None else None
    if problem:
        raise InputError(problem[0], where=problem[2], fix=problem[1])


def _refuse(problems: list[Any], explicit: set[str]) -> None:
    from skillbank.errors import InputError

    yours = [p.where for p in problems if p.where in explicit]
    kept = f" (you set {', '.join(yours)}: kept as given, never changed)" if yours else ""
    raise InputError("the plan cannot run, nothing written: " + "; ".join(p.message for p in problems) + kept,
                     where=problems[0].where, fix="; ".join(p.fix for p in problems))


def _fit_train(spec: Any, explicit: set[str], records: int | None = None, val: int | None = None) -> tuple[Any, list[Any], dict[str, Any] | None, list[str]]:
    """The train plan from the annotation files' record counts (a note says why it was skipped), or from --records (the
    real data described), the batches fitted, and a note when the run barely trains (preflight reports the same as a warning)."""
    from skillbank.errors import InputError
    from skillbank.runs import fitting, steps
    from skillbank.runs.disk import run_disk

    if records is not None:
        count, val_records = steps.train_count(spec, records), val
    elif not spec.custom.train_dataset.annotation_path:
        return spec, [], None, ["plan skipped: custom.train_dataset.annotation_path is empty (set it, or --dataset-root DIR, to see the step count)"]
    else:
        try:
            count, val_records = steps.count_data(spec)
        except InputError as exc:
            return spec, [], None, [f"plan skipped: {exc.message} ({exc.where})"]
    fits = fitting.fit_train_batches(spec, count, val_records, fixed=explicit)
    spec = fitting.apply_fits(spec, fits)
    errors = steps.plan_errors(spec, count, val_records)
    if errors:
        _refuse(errors, explicit)
    problem = steps.steps_problem(spec, count)
    notes = [f"{problem.severity}: {problem.message} (fix: {problem.fix})"] if problem else []
    disk = run_disk(spec, plan=steps.step_plan(spec, count.train))  # as preflight sizes it; None: a path only the node has
    return spec, fits, steps.run_plan(spec, count, val_records=val_records, disk=disk), notes


def _fit_rl(spec: Any, explicit: set[str]) -> tuple[Any, list[Any], dict[str, Any] | None, list[str]]:
    """The rl batch (samples per policy step) fitted to the prompts, and rollout.max_response_length to
    their reference answers (skillbank.training.rl_length), each unless set; zero policy steps refused."""
    from skillbank.errors import InputError
    from skillbank.runs.steps import BATCH_KEY, no_step
    from skillbank.runs import fitting, steps
    from skillbank.training import rl_length

    path = spec.custom.train_dataset.annotation_path
    if not path:
        return spec, [], None, ["batch check skipped: custom.train_dataset.annotation_path is empty"]
    try:
        answers = rl_length.read_answers(path)  # one pass: the prompts and their longest answers
    except InputError as exc:
        return spec, [], None, [f"batch check skipped: {exc.message} ({exc.where})"]
    prompts = answers.records
    fits = fitting.fit_rl_batch(spec, prompts, fixed=explicit)
    spec = fitting.apply_fits(spec, fits)
    problem = no_step(spec, prompts)
    if problem:
        _refuse([steps.StepsProblem("error", problem[0], problem[1], BATCH_KEY)], explicit)
    notes, length = [], rl_length.response_length(spec, answers)
    current = spec.rollout.max_response_length
    if rl_length.KEY in explicit:
        if current < length.answer_tokens + 1:
            notes.append(f"{rl_length.KEY} {current} (yours, kept) is shorter than the longest reference answer "
                         f"({length.answer_tokens} tokens) and its end: those samples are cut and score 0; {length.value} would fit ({length.why()})")
    elif length.value != current:
        fit = fitting.BatchFit(rl_length.KEY, current, length.value, length.why())
        fits.append(fit)
        spec = fitting.apply_fits(spec, [fit])
    else:
        notes.append(f"{rl_length.KEY} {current}: {length.why()}")
    batch = spec.train.train_batch_per_replica
    plan = {"prompts": prompts, "samples_per_epoch": prompts * spec.rollout.n_generation, "samples_per_step": batch,
            "steps_per_epoch": prompts * spec.rollout.n_generation // batch, "max_response_length": spec.rollout.max_response_length,
            "longest_answer_tokens": length.answer_tokens}
    return spec, fits, plan, notes
