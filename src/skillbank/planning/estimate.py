"""Per-GPU memory and step time of a training run, from the architecture and the tokens per sample.

Memory follows what cosmos-rl's FSDP2 holds (policy/model/*/parallelize.py, policy.config
master_dtype / param_dtype / fsdp_reduce_dtype): master weights in fp32 sharded over the replica's
dp_shard_size x tp x pp GPUs; gradients in fp32 and AdamW's two fp32 moments for the trained
parameters, sharded alike; the gathered param_dtype copies FSDP keeps while computing (the root
unit: embeddings, lm_head, mergers, for the whole forward; the current and the prefetched block);
activations saved for backward per sample of a mini batch; the logits (vocab x tokens: the
param_dtype logits, their fp32 upcast, log-softmax and gradient: 16 bytes per vocab entry and token),
or with policy.enable_liger_fused_cross_entropy liger-kernel's fused loss, which never holds them:
the gradient of the hidden states (tokens x H) and of lm_head (vocab x H) in param_dtype, and one chunk
of next_pow2(tokens / ceil(vocab / H)) tokens' logits and their gradient (liger's FusedLinearCrossEntropy).

Activations per decoder layer and token are the tensors autograd saves (counted from the Qwen
layers' code and checked by benchmarks/plan_memory.py): two RMSNorms (fp32 input + normalized +
output: (4 + 2b) H bytes each, b the compute dtype's bytes), attention (v, rotated q and k, the SDPA
output and its reshaped copy: b (3q + 2kv)), Qwen3's q/k norms ((4 + b)(q + kv)) and the SwiGLU MLP
(4 b I). With gradient checkpointing a layer keeps only its input (b H) and one layer is recomputed at
a time (after the logits are freed). Gradients are counted in full: with gradient accumulation
(train_batch_per_replica > mini_batch) they are alive at every micro batch's peak. The vision tower counts alike over its patches (merge_size^2 patches per vision token).
Step time is FLOPs over the GPUs' dense peak at a stated MFU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from skillbank.runs.disk import ADAM_BYTES, DTYPE_BYTES, MASTER_BYTES  # noqa: F401 - one place: what a checkpoint and the memory estimate both count

GIB = 1024**3
GRAD_BYTES = 4  # gradients live on the fp32 master parameters (fsdp_reduce_dtype float32)
LOGIT_BYTES = 16  # per vocab entry and token: logits, fp32 upcast, log-softmax, gradient
RESERVE = 0.10  # of a GPU's memory kept for the CUDA context, NCCL buffers and allocator fragmentation
DEFAULT_MFU = 0.30
MFU_SOURCE = (
    "0.30, a planning default: nanotron's public H100 benchmark logs (huggingface.co/nanotron/old_bench, Llama 1B on 8 GPUs) "
    "record 230-300 model TFLOPS per GPU, 23-30% of the 989 dense bf16 peak; video VLM batches with long, uneven sequences "
    "usually reach less. Time a few steps of your own run (tokens/s) and pass --mfu"
)


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gib: float  # what nvidia-smi reports
    bf16_tflops: float  # dense peak
    hbm_gibps: float  # memory bandwidth (what bounds a decode step of the rollout engine)
    source: str


GPUS: dict[str, Gpu] = {
    "h100-80gb": Gpu("h100-80gb", 79.6, 989.0, 3120.0, "NVIDIA H100 SXM datasheet: 989 dense bf16 TFLOPS, 80 GB HBM3 (81,559 MiB usable), 3.35 TB/s"),
    "a100-80gb": Gpu("a100-80gb", 80.0, 312.0, 1898.0, "NVIDIA A100 80GB SXM datasheet: 312 dense bf16 TFLOPS, 80 GB HBM2e, 2.04 TB/s"),
    "h200": Gpu("h200", 140.4, 989.0, 4470.0, "NVIDIA H200 SXM datasheet: 989 dense bf16 TFLOPS, 141 GB HBM3e, 4.8 TB/s"),
}
GPU_ALIASES = {"h100": "h100-80gb", "a100": "a100-80gb", "h200-141gb": "h200"}  # the names users type for the kinds above


def gpu_kind(name: str) -> str:
    """A --gpu value as a key of GPUS: case and the aliases forgiven (`h100` is the 80 GB H100); anything else unchanged."""
    low = name.strip().lower()
    return GPU_ALIASES.get(low, low)


@dataclass(frozen=True)
class Arch:
    """The sizes of the text model and vision tower that memory and FLOPs depend on."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    qk_norm: bool  # Qwen3: RMSNorm on q and k per head
    vision_hidden: int
    vision_intermediate: int
    vision_depth: int
    vision_swiglu: bool  # Qwen2.5-VL's vision MLP is SwiGLU; Qwen3-VL's is fc1-GELU-fc2
    merge: int  # spatial_merge_size: merge^2 patches per vision token

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> "Arch":
        text = {**data, **(data.get("text_config") or {})}
        vision = data.get("vision_config") or {}
        family = str(data.get("model_type", ""))
        hidden, heads = int(text["hidden_size"]), int(text["num_attention_heads"])
        return cls(
            hidden=hidden,
            intermediate=int(text["intermediate_size"]),
            layers=int(text["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(text.get("num_key_value_heads") or heads),
            head_dim=int(text.get("head_dim") or hidden // heads),
            vocab=int(text.get("vocab_size") or data.get("vocab_size")),
            qk_norm=family.startswith("qwen3"),
            vision_hidden=int(vision.get("hidden_size", 0)),
            vision_intermediate=int(vision.get("intermediate_size", 0)),
            vision_depth=int(vision.get("depth", 0)),
            vision_swiglu=not family.startswith("qwen3"),
            merge=int(vision.get("spatial_merge_size", 2)),
        )


def layer_bytes(arch: Arch, b: int) -> float:
    """Bytes one decoder layer saves for backward per token (see the module docstring)."""
    h, q, kv = arch.hidden, arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    out = 2 * (4 + 2 * b) * h + b * (3 * q + 2 * kv) + 4 * b * arch.intermediate
    return out + ((4 + b) * (q + kv) if arch.qk_norm else 0)


def vision_block_bytes(arch: Arch, b: int) -> float:
    """Bytes one vision block saves per patch (full attention over its heads; the MLP by family)."""
    h = arch.vision_hidden
    mlp = 4 * b * arch.vision_intermediate if arch.vision_swiglu else 2 * b * arch.vision_intermediate
    return 2 * (4 + 2 * b) * h + b * 5 * h + mlp


@dataclass(frozen=True)
class Tokens:
    per_sample: float  # text + vision tokens of one sample
    vision: float  # of which vision tokens


def activation_bytes(arch: Arch, tokens: Tokens, b: int, checkpointing: bool) -> float:
    """Activations of one sample held at the peak, the start of backward. With checkpointing that is
    the layers' inputs; the one layer recomputed at a time comes after the logits' memory is freed,
    so it adds only what it holds beyond the logits (`checkpoint_extra`)."""
    text_layer, patches = layer_bytes(arch, b), tokens.vision * arch.merge**2
    vision_block = vision_block_bytes(arch, b) if arch.vision_depth else 0.0
    outside = tokens.per_sample * (b + (4 + 2 * b)) * arch.hidden  # embeddings, final norm
    if checkpointing:
        text = tokens.per_sample * arch.layers * b * arch.hidden
        vision = patches * arch.vision_depth * b * arch.vision_hidden
        return text + vision + outside
    return tokens.per_sample * arch.layers * text_layer + patches * arch.vision_depth * vision_block + outside


def checkpoint_extra(arch: Arch, tokens: Tokens, b: int, freed: float | None = None) -> float:
    """Bytes the recomputed layer (or vision block) holds per sample: it peaks after the loss's memory
    (`freed`: the logits, per sample, unless given) is freed."""
    vision_block = vision_block_bytes(arch, b) if arch.vision_depth else 0.0
    one = max(tokens.per_sample * layer_bytes(arch, b), tokens.vision * arch.merge**2 * vision_block)
    return max(0.0, one - (logits_bytes(arch, tokens) if freed is None else freed))


def logits_bytes(arch: Arch, tokens: Tokens) -> float:
    return tokens.per_sample * arch.vocab * LOGIT_BYTES


def fused_loss_bytes(arch: Arch, rows: float, b: int) -> float:
    """liger-kernel's FusedLinearCrossEntropy over `rows` tokens (a mini batch on one rank): the gradients of
    the hidden states and of lm_head in param_dtype, one chunk of logits and its gradient, fp32 losses."""
    inc = -(-arch.vocab // arch.hidden)
    chunk = min(rows, 2 ** math.ceil(math.log2(max(1.0, rows / inc))))
    return rows * arch.hidden * b + arch.vocab * arch.hidden * b + 2 * chunk * arch.vocab * b + 4 * rows


@dataclass(frozen=True)
class Memory:
    parts: dict[str, float]  # bytes per GPU, by part

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def gib(self) -> dict[str, float]:
        return {k: round(v / GIB, 2) for k, v in self.parts.items()}


def memory(arch: Arch, *, total: int, trainable: int, adapters: int, largest_unit: int, root: int, shard: int,
           b: int, tokens: Tokens, mini_batch: int, checkpointing: bool, sequence_split: int = 1, fused_loss: bool = False) -> Memory:
    """Per-GPU bytes of one rank of a replica sharded over `shard` GPUs; `sequence_split` (tp x cp)
    GPUs share one sample's activations and logits; `fused_loss`: liger's fused lm_head + cross-entropy."""
    logits = fused_loss_bytes(arch, mini_batch * tokens.per_sample, b) if fused_loss else mini_batch * logits_bytes(arch, tokens) / sequence_split
    return Memory({
        "weights": (total + adapters) * MASTER_BYTES / shard,
        "gathered_weights": (root + 2 * largest_unit) * b,  # FSDP2 all-gathers even on one GPU
        "gradients": trainable * GRAD_BYTES / shard,
        "optimizer": trainable * ADAM_BYTES / shard,
        "activations": mini_batch * (activation_bytes(arch, tokens, b, checkpointing)
                                     + (checkpoint_extra(arch, tokens, b, logits / mini_batch if fused_loss else None) if checkpointing else 0.0)) / sequence_split,
        "logits": logits,
    })


def flops_per_sample(arch: Arch, params: int, tokens: Tokens, *, lora: bool, checkpointing: bool) -> float:
    """Training FLOPs of one sample: 6 x params x tokens (4 x with LoRA: no weight gradients of the
    frozen base) plus causal attention (6 x layers x tokens^2 x q width); recomputation adds a forward."""
    per_param = 4 if lora else 6
    attention = 6 * arch.layers * tokens.per_sample**2 * arch.heads * arch.head_dim
    dense = per_param * params * tokens.per_sample
    return dense + attention + (forward_flops(arch, params, tokens) if checkpointing else 0.0)


def forward_flops(arch: Arch, params: float, tokens: Tokens) -> float:
    """One forward pass of a sample (validation, a reference model, a rollout's prefill): 2 x params x tokens + causal attention."""
    return 2 * params * tokens.per_sample + 2 * arch.layers * tokens.per_sample**2 * arch.heads * arch.head_dim


def step_seconds(flops_per_rank_step: float, gpu: Gpu, mfu: float) -> float:
    return flops_per_rank_step / (gpu.bf16_tflops * 1e12 * mfu)
