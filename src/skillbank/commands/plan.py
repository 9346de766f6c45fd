"""`skillbank plan`: GPUs, time, memory per GPU and disk of a train (or rl) spec, or of a described dataset, before a job is sized.

Imports only argparse and json here; torch / transformers (the meta-device count) and PyAV (the clips' headers) load inside `run`.
"""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import (add_assignments, add_backend, add_gpus_per_node, add_json, add_keep_argument, add_metric_argument,
                                      add_nodes, add_skill, add_space_arguments, add_spec, command_parser, DEFAULT_SKILL, parse_count)

DESCRIPTION = """\
How many GPUs, how long, and does it fit? For a train spec, from three counted figures:
  - parameters: the model's config.json (a local folder, the local Hugging Face cache, or the copy
    the model table ships, no network: `skillbank models list`)
{models}
    built on the meta device; with policy.lora the adapters peft adds are the trained parameters.
    Another hub id is refused (exit 2): `skillbank models add` it once;
  - tokens per sample, from the data by default: records that state duration / num_frames and width /
    height count them; for every other record the clip's container headers are read (PyAV, no decode,
    worker processes, a progress bar on a terminal, cached by path, size and mtime under SKILLBANK_CACHE:
    a second plan reads nothing). A clip that cannot be read counts the spec's whole vision budget
    (tokens_per_sample.budget counts them; bound: exact | probed | upper | budget). Memory at the longest
    sample, time at the mean. --decode-sample K also decodes K clips (exact frame counts and failures).
    Or describe the data instead: --records N --clip-seconds S [--resolution WxH] (no files needed;
    without --spec the skill's train template is planned, --set model=... picks the model);
  - steps: records per rank, global batch and steps as cosmos-rl counts them.

Memory per GPU, each part shown (GiB): weights (fp32 master, sharded over dp_shard_size x tp x pp),
gathered_weights (param_dtype copies FSDP gathers: embeddings/lm_head and two blocks), gradients
(fp32, sharded), optimizer (AdamW's two fp32 moments, sharded), activations (mini_batch samples,
with or without policy.model_gradient_checkpointing: both are shown), logits (vocab x tokens,
16 bytes each: logits, fp32 upcast, log-softmax, gradient; with policy.enable_liger_fused_cross_entropy
liger's fused loss holds only a chunk). "fits" leaves 10% of the GPU free. When it does not fit,
fits_with lists KEY=VALUE settings (gradient checkpointing, the mini_batch that fits, the fused loss,
LoRA), each planned again and verified to fit, with its memory: apply one with
`skillbank spec --from SPEC --set KEY=VALUE -o SPEC2`.

Time (hours): time_breakdown_h = compute (steps x step time: FLOPs at --mfu, + the gradient all-reduce
between nodes at --internode-gibps) + startup (--launch-minutes, the weights downloaded from the Hub at
--download-gibps and read at --read-gibps) + checkpoint (saves x size / --write-gibps per node) +
validation (forward passes over the validation records); total_time_h is their sum. slurm_time: the
total + 25% + 15 min, rounded up to 15 min: `skillbank submit --platform slurm` uses it when --time is
not given. A table of layouts (1, 2, 4 nodes and --nodes; one FSDP replica per node) at the spec's
global batch (the per-rank batch scales down as GPUs grow; --per-gpu-batch fixed keeps it instead),
and a recommendation: the fastest layout that fits at that batch (a row that changes the batch is
named as such), on the nodes --nodes (or the spec) states when it fits there. tp_size and cp_size must
divide the heads cosmos-rl shards (the model table's `skillbank models list`): a spec whose do not is
refused, with the sizes that do.

rl specs (GRPO): the policy's GPUs (FSDP memory as for SFT at the longest prompt + max_response_length),
the rollout GPUs (vLLM: bf16 weights / tp + the KV cache of the sequences in flight + an overhead,
within rollout.gpu_memory_utilization), and the step time of both.

--time-limit H (the partition's limit, hours): the time_limit block: attempts at the plan's time (and with
the work 25% longer), the save cadence in optimizer steps (sqrt(save seconds x an attempt's working seconds);
set with train.ckpt.save_freq_in_epoch=0 and train.ckpt.save_freq=N), the work a stop loses, and the --time per
attempt; each attempt is signalled 300 s before its limit (--signal=B:USR1@300) and resumes from its last checkpoint.

--trials N [--workers W] (an AutoML study, the space of `skillbank automl` with the same --param / --range /
--choices): study_time_h (ceil(N / W) x a trial's training + each epoch's evaluation), disk_gib_per_worker (a
worker's running trial's every epoch + the best one kept, --keep best; its share with --keep all) and
disk_gib_at_most (the study on one file system), at the search's largest checkpoint: the AutoML dry run's figures.
Every disk figure (spec, preflight, plan, AutoML) comes from one function and one parameter count.

A spec written with --path-map names the node's paths: its recorded map (paths.map) or --path-map
LOCAL=REMOTE reads the data at LOCAL. --set KEY=VALUE changes the spec for this plan only.

--json keys: action, params, trainable_params, lora_params, tokens_per_sample, train_records,
memory_per_gpu_gib, memory_breakdown_gib, activations_gib, fits, fits_with, per_gpu_batch, global_batch,
train_batch_per_replica, mini_batch, total_steps, step_time_s, time_breakdown_h, total_time_h, slurm_time,
checkpoint_gib, disk_gib, disk, steps (the run's arithmetic as preflight states it), layouts,
recommendation, assumptions, units; time_limit (--time-limit); study, study_time_h, disk_gib_per_worker,
disk_gib_at_most (--trials) (rl: policy, rollout, step_time_s {rollout, policy, total}, prompts).
Nothing is written.
"""

EXAMPLES = """\
examples:
  skillbank plan --spec train.yaml                                    # the data's clips probed, the spec's layout on H100 80GB
  skillbank plan --spec train.yaml --nodes 2 --gpu h200 --json
  skillbank plan --records 50000 --clip-seconds 10 --resolution 1280x720 --set fps=4   # a described dataset, the template
  skillbank plan --spec train.yaml --set mini_batch=1 --set policy.enable_liger_fused_cross_entropy=true
  skillbank plan --spec train.yaml --time-limit 24                    # a 24-hour partition: attempts, save_freq, --time per attempt
  skillbank plan --spec train.yaml --trials 12 --workers 3 --param train.optm_lr   # an AutoML study: time and disk, as automl --dry-run
  skillbank plan --spec rl.yaml                                       # GRPO: policy and rollout GPUs
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from skillbank.planning.estimate import DEFAULT_MFU, GPUS, gpu_kind
    from skillbank.planning.timing import Rates
    from skillbank.commands.flags import add_path_map
    from skillbank.training.backends import BACKEND_HELP, DEFAULT_BACKEND

    from skillbank.generate.models import help_lines

    rates = Rates()
    parser = command_parser(subparsers, "plan", DESCRIPTION.replace("{models}", help_lines()), epilog=EXAMPLES)
    add_spec(parser, "the train or rl spec (YAML, JSON or TOML); without it, --records describes the data and the skill's train template is planned", metavar="FILE")
    add_skill(parser, f"model skill whose spec it is (default {DEFAULT_SKILL})", default=DEFAULT_SKILL)
    parser.add_argument("--action", choices=("train", "rl"), help="the spec's action (default: read from the file; train without --spec)")
    add_assignments(parser, "dotted key or shorthand override for this plan only (repeatable; as `skillbank spec --set`)")
    add_path_map(parser)
    add_nodes(parser, "nodes of the main plan (default: policy.parallelism.dp_replicate_size)", metavar="N")
    add_gpus_per_node(parser, "GPUs per node (default: dp_shard_size x tp x cp x pp of the spec); dp_shard_size becomes G / (tp x cp x pp)", metavar="G")
    parser.add_argument("--gpu", default="h100-80gb", metavar="KIND", type=gpu_kind,
                        help=f"GPU kind: {', '.join(GPUS)} (default h100-80gb; h100 and a100 mean their 80 GB kinds)")
    parser.add_argument("--mfu", type=float, default=DEFAULT_MFU, metavar="X",
                        help=f"model FLOPs utilisation, a fraction (default {DEFAULT_MFU}: see assumptions for its source)")
    parser.add_argument("--per-gpu-batch", choices=("scaled", "fixed"), default="scaled",
                        help="layouts: scaled (default) holds the spec's global batch, the per-rank batch scaling down as GPUs grow; fixed keeps train_batch_per_replica per rank")
    parser.add_argument("--time-limit", type=float, metavar="H", dest="time_limit",
                        help="the job's time limit in hours (the partition's): the time_limit block: attempts, the save cadence (save_freq steps) "
                             "that bounds the work lost per stop, that loss, and the --time per attempt")
    study = parser.add_argument_group("an AutoML study planned as a whole (--trials N > 1; the same figures as `skillbank automl --dry-run`)")
    study.add_argument("--trials", type=int, default=1, metavar="N",
                       help="the study's trials (its --max-trials): study_time_h (train + each epoch's evaluation, over --workers), "
                            "disk_gib_per_worker, disk_gib_at_most (default 1: one run)")
    study.add_argument("--workers", type=int, default=1, metavar="W", help="trials at once (workers each running one, or automl --workers W on one machine; default 1)")
    add_keep_argument(study)
    add_space_arguments(study)
    add_metric_argument(study)
    add_backend(parser, f"the run's (or the trials') {BACKEND_HELP}: what a checkpoint holds (LoRA on the local backend: no frozen base)",
                default=DEFAULT_BACKEND)
    parser.add_argument("--decode-sample", type=parse_count, default=0, metavar="K|all",
                        help="also decode K sampled clips (or all) for exact frame counts (preflight's flag; default 0: the headers are read, nothing decoded)")
    from skillbank.commands.flags import add_described

    add_described(parser, "a described dataset (no files)")
    timing = parser.add_argument_group("time assumptions (GiB/s, minutes)")
    timing.add_argument("--download-gibps", type=float, default=rates.download_gibps, metavar="X", help=f"Hub download per node (default {rates.download_gibps:g})")
    timing.add_argument("--read-gibps", type=float, default=rates.read_gibps, metavar="X", help=f"reading the weights per node (default {rates.read_gibps:g})")
    timing.add_argument("--write-gibps", type=float, default=rates.write_gibps, metavar="X", help=f"checkpoint writes per node (default {rates.write_gibps:g})")
    timing.add_argument("--internode-gibps", type=float, default=rates.internode_gibps, metavar="X",
                        help=f"between nodes, per GPU (default {rates.internode_gibps:g}: one 400 Gb/s InfiniBand link per GPU)")
    timing.add_argument("--launch-minutes", type=float, default=rates.launch_min, metavar="M", help=f"processes, redis, NCCL, building the model (default {rates.launch_min:g})")
    add_json(parser, "print one JSON document (the keys above)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.planning.inputs import Inputs
    from skillbank.planning.plan import build_plan
    from skillbank.planning.text import plan_text
    from skillbank.planning.timing import Rates

    _check_counts(args)
    spec, action = load(args)
    rates = Rates(args.download_gibps, args.read_gibps, args.write_gibps, args.internode_gibps, args.launch_minutes)
    study, evaluates = study_of(args, spec) if args.trials > 1 and action == "train" else (None, True)
    plan = build_plan(Inputs(spec, args.skill, action, args.nodes, args.gpus_per_node, args.gpu, args.mfu, args.trials, args.decode_sample,
                             described(args), args.per_gpu_batch, rates, bool(spec.custom.train_dataset.annotation_path),
                             backend=args.backend, time_limit_h=args.time_limit, study=study, evaluates=evaluates))
    print(json.dumps(plan, indent=2) if args.json else plan_text(plan))
    return 0


def study_of(args: argparse.Namespace, spec) -> tuple:
    """The study's shape (runs.disk.StudyShape) over the space `skillbank automl` would search with the same flags
    (the schema's automl_default_parameters, or --param / --range / --choices; less the spec's user_set, plus --search), and whether its trials evaluate each export."""
    from skillbank.automl.space import build_space, load_schema
    from skillbank.automl.trials import LOSS_METRICS
    from skillbank.runs.disk import DEFAULT_KEEP, study_shape
    from skillbank.skillinfo import schema_path

    space = build_space(load_schema(schema_path(args.skill, "train")), spec.model_dump(mode="json"), params=args.param,
                        ranges=dict(args.range), choices=dict(args.choices), search=args.search)
    shape = study_shape(args.trials, spec.train.epoch, space.params, workers=args.workers, per_worker=1, keep=args.keep or DEFAULT_KEEP)
    return shape, args.metric not in LOSS_METRICS


def _check_counts(args: argparse.Namespace) -> None:
    from skillbank.commands.flags import check_described
    from skillbank.errors import InputError

    for name, value in (("--nodes", args.nodes), ("--gpus-per-node", args.gpus_per_node), ("--trials", args.trials), ("--records", args.records),
                        ("--workers", args.workers)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1 (got {value})", where=name, fix=f"pass a positive {name}")
    if not args.spec and args.records is None:
        raise InputError("nothing to plan: no --spec and no described dataset", where="--spec",
                         fix="pass --spec FILE, or describe the data: --records N --clip-seconds S [--resolution WxH]")
    check_described(args)


def described(args: argparse.Namespace):
    from skillbank.commands.flags import described as described_data

    return described_data(args)


def load(args: argparse.Namespace):
    """(the spec as this machine reads it, with --set applied; its action): the file (its recorded map or
    --path-map moving the node's paths to LOCAL), or the skill's template for a described dataset."""
    from skillbank.errors import InputError
    from skillbank.specification.build import build_spec, infer_action
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.registry import spec_model

    data, action = None, args.action or "train"
    if args.spec:
        loaded = LoadedSpec.read(args.spec)  # read once: the spec and the path map it records
        data = loaded.raw()
        action = args.action or infer_action(args.skill, data, where=args.spec)
        paths = loaded.recorded_map().with_flags(args.path_map)
        if paths:
            model = spec_model(args.skill, action)
            data = paths.local(data, model)
            paths.check_used(data, model)
    if action not in ("train", "rl"):
        raise InputError(f"plan sizes train and rl specs, not {action}", where="--spec", fix="pass a train or rl spec (`skillbank spec --action train -o train.yaml`)")
    built = build_spec(args.skill, action, args.assignments, base=data, source=args.spec)
    return built.spec, action
