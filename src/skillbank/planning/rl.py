"""`skillbank plan` of an rl (GRPO) spec: the policy's GPUs and the rollout engines' GPUs, and the step time of both.

Policy (policy.parallelism: tp_size x dp_shard_size GPUs): FSDP memory as for SFT (planning.estimate)
at a sequence of the longest prompt + rollout.max_response_length, train.train_policy.mini_batch samples
at a time, plus the reference model's param_dtype weights (sharded) when train.train_policy.kl_beta > 0.

Rollout (rollout.num_gpus GPUs, vLLM engines of rollout.parallelism.tp_size GPUs each), per GPU: the
weights in bf16 / tp, the KV cache of the sequences in flight (layers x 2 x kv_heads x head_dim x 2 bytes
x tokens, / tp; rollout.batch_size prompts x n_generation samples, each prompt + max_response_length
tokens) and a stated overhead (activations, CUDA graphs, the vision encoder); it fits when that is within
rollout.gpu_memory_utilization of the GPU (vLLM preallocates that share).

Step time of one policy step (train_batch_per_replica samples): rollout = the prompts' prefill (FLOPs at
the MFU) + max_response_length decode steps per wave of sequences, each bound by reading the weights and
the KV cache from memory (HBM bandwidth x a stated efficiency); every sample taken to generate the whole
max_response_length (an upper bound). Policy = a training pass over the samples (+ the reference model's
forward with kl_beta). The two are added (cosmos-rl can overlap them: an upper bound).
"""

from __future__ import annotations

import math
from typing import Any

from skillbank.planning import estimate as est
from skillbank.planning import timing
from skillbank.models.params import ParamCount
from skillbank.runs.steps import gib, gib_text

ROLLOUT_OVERHEAD_GIB = 4.0  # per rollout GPU: vLLM's activation peak, CUDA graphs, the vision encoder
DECODE_EFFICIENCY = 0.6  # of the HBM bandwidth a decode step reaches
KV_BYTES = 2  # bf16 KV cache


def _tokens(n: float) -> est.Tokens:
    from skillbank.planning.layouts import tokens_of

    return tokens_of(n)


def policy_memory(spec: Any, arch: est.Arch, count: ParamCount, sequence: float) -> est.Memory:
    par = spec.policy.parallelism
    b = est.DTYPE_BYTES[spec.train.param_dtype]
    mem = est.memory(arch, total=count.total, trainable=count.trainable, adapters=0, largest_unit=count.largest_unit, root=count.root,
                     shard=par.dp_shard_size * par.tp_size, b=b, tokens=_tokens(sequence), mini_batch=spec.train.train_policy.mini_batch,
                     checkpointing=spec.policy.model_gradient_checkpointing, sequence_split=par.tp_size)
    if spec.train.train_policy.kl_beta > 0:
        mem.parts["reference_weights"] = count.total * b / (par.dp_shard_size * par.tp_size)
    return mem


def rollout_memory(spec: Any, arch: est.Arch, count: ParamCount, prompt: float) -> tuple[est.Memory, float]:
    """(per rollout GPU, KV bytes per sequence per GPU)."""
    r = spec.rollout
    tp = r.parallelism.tp_size
    per_sequence = arch.layers * 2 * arch.kv_heads * arch.head_dim * KV_BYTES * (prompt + r.max_response_length) / tp
    in_flight = r.batch_size * r.n_generation
    return est.Memory({"weights": count.total * 2 / tp, "kv_cache": per_sequence * in_flight, "overhead": ROLLOUT_OVERHEAD_GIB * est.GIB}), per_sequence


def step_seconds(spec: Any, arch: est.Arch, count: ParamCount, prompt: float, mean_prompt: float, gpu: est.Gpu, mfu: float) -> dict[str, float]:
    """Rollout and policy seconds of one policy step (see the module docstring)."""
    r, samples = spec.rollout, spec.train.train_batch_per_replica
    tp, replicas = r.parallelism.tp_size, r.replicas
    peak = gpu.bf16_tflops * 1e12 * mfu
    prefill = samples * est.forward_flops(arch, count.total, _tokens(mean_prompt)) / (r.num_gpus * peak)
    concurrent = r.batch_size * r.n_generation
    waves = math.ceil(samples / replicas / concurrent)
    kv_mean = arch.layers * 2 * arch.kv_heads * arch.head_dim * KV_BYTES * (mean_prompt + r.max_response_length / 2) * min(concurrent, samples / replicas) / tp
    decode_step = (count.total * 2 / tp + kv_mean) / (gpu.hbm_gibps * est.GIB * DECODE_EFFICIENCY)
    rollout = prefill + waves * r.max_response_length * decode_step
    sequence = mean_prompt + r.max_response_length
    train = est.flops_per_sample(arch, count.total, _tokens(sequence), lora=False, checkpointing=spec.policy.model_gradient_checkpointing)
    reference = est.forward_flops(arch, count.total, _tokens(sequence)) if spec.train.train_policy.kl_beta > 0 else 0.0
    policy = samples * (train + reference) / (spec.policy_gpus * peak)
    return {"rollout": round(rollout, 2), "policy": round(policy, 2), "total": round(rollout + policy, 2)}


def total_steps(spec: Any, prompts: int | None) -> int | None:
    if not prompts:
        return None
    per_epoch = prompts * spec.rollout.n_generation // spec.train.train_batch_per_replica
    total = per_epoch * spec.train.epoch
    return min(total, spec.train.max_num_steps) if spec.train.max_num_steps else total


def disk(spec: Any, count: ParamCount, steps_total: int | None) -> dict[str, Any]:
    """The checkpoints an rl run keeps: every save_freq policy steps and the last, max_keep of them (fp32 state + Adam + bf16 export)."""
    c = spec.train.ckpt
    if not c.enable_checkpoint:
        return {"checkpoint_gib": 0.0, "disk_gib": 0.0, "kept": 0, "saved": 0, "detail": "checkpoints off (train.ckpt.enable_checkpoint false)"}
    saved = -(-steps_total // c.save_freq) if steps_total else max(1, c.max_keep)
    kept = saved if c.max_keep < 1 else min(saved, c.max_keep)
    state = count.total * (est.MASTER_BYTES + est.ADAM_BYTES)
    one = state + (count.total * 2 if c.export_safetensors else 0)
    return {"checkpoint_gib": gib(one), "disk_gib": gib(one * kept), "kept": kept, "saved": saved, "state_bytes": state,
            "export_bytes": one - state, "detail": f"fp32 weights + Adam moments + the bf16 export: ~{gib_text(one)} a checkpoint, every "
            f"{c.save_freq} policy steps and the last, {kept} kept (max_keep {c.max_keep})"}


def build_rl_plan(inputs: Any) -> dict[str, Any]:
    from skillbank.models.params import count_on_meta
    from skillbank.planning.inputs import check_inputs, model_config, token_figures

    gpu = check_inputs(inputs)
    spec = inputs.spec
    config = model_config(spec)
    count = count_on_meta(config)
    arch = est.Arch.from_config(config.data)
    figures = token_figures(inputs, config)
    prompt_max, prompt_mean = figures.tokens["memory_at"], figures.tokens["time_at"]
    sequence = prompt_max + spec.rollout.max_response_length
    policy = policy_memory(spec, arch, count, sequence)
    rollout, per_sequence = rollout_memory(spec, arch, count, prompt_max)
    room = gpu.memory_gib * spec.rollout.gpu_memory_utilization
    kv_room = room * est.GIB - rollout.parts["weights"] - rollout.parts["overhead"]
    times = step_seconds(spec, arch, count, prompt_max, prompt_mean, gpu, inputs.mfu)
    prompts = figures.records.train if figures.records else None
    steps_total = total_steps(spec, prompts)
    kept = disk(spec, count, steps_total)
    shape = timing.RunShape(params=float(count.total), trainable=float(count.trainable), hub_model=_hub(spec), nodes=1, gpus=spec.gpus,
                            total_steps=steps_total, step_s=times["total"], saves=kept.get("saved", 0), state_bytes=kept.get("state_bytes", 0.0),
                            export_bytes=kept.get("export_bytes", 0.0), validations=0, val_records=0, val_flops_per_sample=0.0)
    breakdown = timing.breakdown(shape, gpu, inputs.mfu, inputs.rates)
    total_h = breakdown["total"] if breakdown else None
    policy_fits = policy.total / est.GIB <= gpu.memory_gib * (1 - est.RESERVE)
    rollout_fits = rollout.total / est.GIB <= room
    return {
        "action": "rl",
        "model": spec.policy.model_name_or_path,
        "gpu": gpu.name,
        "params": count.total,
        "trainable_params": count.trainable,
        "tokens_per_sample": {**figures.tokens, "prompt_max": prompt_max, "sequence_max": sequence, "max_response_length": spec.rollout.max_response_length},
        "prompts": prompts,
        "gpus": spec.gpus,
        "policy": {"gpus": spec.policy_gpus, "memory_per_gpu_gib": round(policy.total / est.GIB, 2), "memory_breakdown_gib": policy.gib(), "fits": policy_fits},
        "rollout": {"gpus": spec.rollout.num_gpus, "engines": spec.rollout.replicas, "tp_size": spec.rollout.parallelism.tp_size,
                    "memory_per_gpu_gib": round(rollout.total / est.GIB, 2), "memory_breakdown_gib": rollout.gib(), "fits": rollout_fits,
                    "room_gib": round(room, 2), "sequences_in_flight": spec.rollout.batch_size * spec.rollout.n_generation,
                    "most_sequences_that_fit": max(0, int(kv_room // per_sequence))},
        "fits": policy_fits and rollout_fits,
        "step_time_s": times,
        "total_steps": steps_total,
        "time_breakdown_h": breakdown,
        "total_time_h": total_h,
        "slurm_time": timing.slurm_time(total_h),
        "checkpoint_gib": kept["checkpoint_gib"],
        "disk_gib": kept["disk_gib"],
        "disk": {k: v for k, v in kept.items() if not k.endswith("_bytes")},
        "assumptions": figures.assumptions + [
            f"GPU {gpu.name}: {gpu.source}; the policy fits in {gpu.memory_gib * (1 - est.RESERVE):.1f} GiB ({est.RESERVE:.0%} reserve), a rollout GPU in "
            f"rollout.gpu_memory_utilization {spec.rollout.gpu_memory_utilization:g} x {gpu.memory_gib:g} = {room:.1f} GiB (vLLM preallocates that share)",
            f"policy: FSDP as for SFT over {spec.policy_gpus} GPU(s) at {sequence:,} tokens (the longest prompt {prompt_max:,} + rollout.max_response_length "
            f"{spec.rollout.max_response_length:,}), mini_batch {spec.train.train_policy.mini_batch}"
            + (f"; the reference model's {spec.train.param_dtype} weights (kl_beta {spec.train.train_policy.kl_beta:g})" if spec.train.train_policy.kl_beta > 0 else ""),
            f"rollout: bf16 weights / tp {spec.rollout.parallelism.tp_size}, KV cache {KV_BYTES} bytes x 2 x {arch.layers} layers x {arch.kv_heads} kv heads x "
            f"{arch.head_dim} for rollout.batch_size {spec.rollout.batch_size} x n_generation {spec.rollout.n_generation} sequences in flight, "
            f"+ {ROLLOUT_OVERHEAD_GIB:g} GiB overhead per GPU (activations, CUDA graphs, vision encoder)",
            f"step time: rollout = prefill at MFU {inputs.mfu:g} + max_response_length decode steps per wave, each reading the weights and KV cache at "
            f"{DECODE_EFFICIENCY:.0%} of {gpu.hbm_gibps:,.0f} GiB/s (every sample generating the whole length: an upper bound); policy = training FLOPs at "
            f"MFU {inputs.mfu:g}; rollout and policy added (cosmos-rl may overlap them: an upper bound)",
            inputs.rates.said(),
        ],
        "units": "GiB (1024^3 bytes) for memory and disk, hours for time, seconds for steps",
    }


def _hub(spec: Any) -> bool:
    from skillbank import modelref

    return modelref.parse(spec.policy.model_name_or_path).kind == "hub"


def rl_time(spec: Any, arch: est.Arch, count: ParamCount, tokens: dict[str, Any], stats: dict[str, Any], gpu: est.Gpu) -> float | None:
    """Hours of an rl run from preflight's stats (the Slurm --time suggestion of `skillbank submit`)."""
    prompts = (stats.get("rl_plan") or {}).get("prompts") or (stats.get("records") or {}).get("train")
    steps_total = total_steps(spec, prompts)
    times = step_seconds(spec, arch, count, tokens["memory_at"], tokens["time_at"], gpu, est.DEFAULT_MFU)
    kept = disk(spec, count, steps_total)
    shape = timing.RunShape(float(count.total), float(count.trainable), _hub(spec), 1, spec.gpus, steps_total, times["total"], kept.get("saved", 0),
                            kept.get("state_bytes", 0.0), kept.get("export_bytes", 0.0), 0, 0, 0.0)
    out = timing.breakdown(shape, gpu, est.DEFAULT_MFU, timing.Rates())
    return out["total"] if out else None
