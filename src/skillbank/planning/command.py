"""`skillbank plan`: GPUs, time, memory per GPU and disk of a train spec, before a job is sized.

Imports only argparse and json here; torch / transformers (the meta-device count) load inside `run`.
"""

from __future__ import annotations

import argparse
import json

DEFAULT_SKILL = "tao-finetune-cosmos-reason"
HELP = "size a train spec: parameters, memory per GPU (each part), step and total time, disk, layouts"
DESCRIPTION = """\
How many GPUs, how long, and does it fit? For a train spec, from three counted figures:
  - parameters: the model's config.json (a local folder, the local Hugging Face cache, or the copy
    the bank ships of nvidia/Cosmos-Reason2-8B, Cosmos-Reason2-2B and Cosmos-Reason1-7B: no network)
    built on the meta device; with policy.lora the adapters peft adds are the trained parameters;
  - tokens per sample: preflight's data scan (the stats.tokens_per_sample `preflight --json` shows);
    memory at the longest sample, time at the mean. Records without clip lengths: --decode-sample K
    measures K clips, else every sample is taken to fill the spec's vision budget (said under assumptions);
  - steps: records per rank, global batch and steps as cosmos-rl counts them.

Memory per GPU, each part shown (GiB): weights (fp32 master, sharded over dp_shard_size x tp x pp),
gathered_weights (param_dtype copies FSDP gathers: embeddings/lm_head and two blocks), gradients
(fp32, sharded), optimizer (AdamW's two fp32 moments, sharded), activations (mini_batch samples,
with or without policy.model_gradient_checkpointing: both are shown), logits (vocab x tokens,
16 bytes each: logits, fp32 upcast, log-softmax, gradient). "fits" leaves 10% of the GPU free.
Step time = FLOPs (6 x params x tokens, 4 x with LoRA, + attention) per GPU / (peak bf16 FLOPs x MFU).
A table of layouts (1, 2, 4 nodes and --nodes; one FSDP replica per node) gives memory, steps,
hours and GPU-hours, and a recommendation: the fastest layout that fits.

--json keys: params, trainable_params, lora_params, tokens_per_sample, memory_per_gpu_gib,
memory_breakdown_gib, activations_gib, fits, step_time_s, total_time_h, total_steps, checkpoint_gib,
disk_gib, disk, steps (the run's arithmetic as preflight states it: records per rank, global batch,
steps per epoch, checkpoints), layouts, recommendation, assumptions. Nothing is written.
"""


def _decode_count(text: str) -> int:
    from skillbank.preflight.decode import parse_count

    return parse_count(text)


def register(subparsers: argparse._SubParsersAction) -> None:
    from skillbank.planning.estimate import DEFAULT_MFU, GPUS

    parser = subparsers.add_parser("plan", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", required=True, metavar="FILE", help="the train spec (YAML, JSON or TOML)")
    parser.add_argument("--skill", default=DEFAULT_SKILL, help=f"model skill whose train spec it is (default {DEFAULT_SKILL})")
    parser.add_argument("--nodes", type=int, metavar="N", help="nodes of the main plan (default: policy.parallelism.dp_replicate_size)")
    parser.add_argument("--gpus-per-node", type=int, metavar="G",
                        help="GPUs per node (default: dp_shard_size x tp x cp x pp of the spec); dp_shard_size becomes G / (tp x cp x pp)")
    parser.add_argument("--gpu", default="h100-80gb", metavar="KIND", help=f"GPU kind: {', '.join(GPUS)} (default h100-80gb)")
    parser.add_argument("--mfu", type=float, default=DEFAULT_MFU, metavar="X",
                        help=f"model FLOPs utilisation, a fraction (default {DEFAULT_MFU}: see assumptions for its source)")
    parser.add_argument("--trials", type=int, default=1, metavar="N",
                        help="an AutoML study's trials (its --max-trials): each trial keeps every epoch's checkpoint, disk = trials x those (default 1: one run)")
    parser.add_argument("--decode-sample", type=_decode_count, default=0, metavar="K|all",
                        help="decode K sampled clips (or all) to measure their lengths when the records state none (preflight's flag; default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON document (the keys above)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.planning.plan import Inputs, build_plan, plan_text
    from skillbank.specification.io import load_spec
    from skillbank.specification.registry import spec_model

    for name, value in (("--nodes", args.nodes), ("--gpus-per-node", args.gpus_per_node), ("--trials", args.trials)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1 (got {value})", where=name, fix=f"pass a positive {name}")
    spec = load_spec(args.spec, spec_model(args.skill, "train"))
    plan = build_plan(Inputs(spec, args.spec, args.skill, args.nodes, args.gpus_per_node, args.gpu, args.mfu, args.trials, args.decode_sample))
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        print(plan_text(plan))
    return 0
