"""Build the SDPA mask of a left-padded batch with plain tensor ops (batched evaluation's hot spot).

transformers 4.57 builds every attention mask that is not skippable (any padding in the batch) by
`torch.vmap` over a Python mask function (`masking_utils.sdpa_mask_recent_torch`): about 3 ms of CPU
time per forward pass for a batch of 32, whatever the model size. Batched generation pays it on
every new token, one-at-a-time generation never (no padding: SDPA's `is_causal` instead), so on the
tiny model it was a third of the batched loop (benchmarks/batched_eval.py), and on a GPU it is host
time the GPU waits for.

`install()` registers, through transformers' own `AttentionMaskInterface` mapping for "sdpa", a
function that gives the same boolean mask for the plain causal + padding case
(`kv <= q` and the 2D padding mask) in a few tensor ops, and hands every other case (sliding
windows, packed sequences, or/and mask overlays, chunked attention) to transformers' function
unchanged. Idempotent; the mask is element-for-element the one transformers builds (tested).
"""

from __future__ import annotations

from typing import Any


def padded_causal_mask(
    batch_size: int,
    cache_position: Any,
    kv_length: int,
    kv_offset: int = 0,
    mask_function: Any = None,
    attention_mask: Any = None,
    local_size: int | None = None,
    allow_is_causal_skip: bool = True,
    **kwargs: Any,
) -> Any:
    """transformers' `sdpa_mask` signature; (batch, 1, q, kv) bool mask, or None where SDPA's is_causal does."""
    from transformers import masking_utils as mu

    if (mask_function is not None and mask_function is not mu.causal_mask_function) or local_size is not None:
        return mu.sdpa_mask(
            batch_size=batch_size, cache_position=cache_position, kv_length=kv_length, kv_offset=kv_offset,
            mask_function=mask_function or mu.causal_mask_function, attention_mask=attention_mask, local_size=local_size,
            allow_is_causal_skip=allow_is_causal_skip, **kwargs,
        )
    import torch

    padding = mu.prepare_padding_mask(attention_mask, kv_length, kv_offset)
    if allow_is_causal_skip and mu._ignore_causal_mask_sdpa(padding, cache_position.shape[0], kv_length, kv_offset, local_size):
        return None
    kv = torch.arange(kv_length, device=cache_position.device) + kv_offset
    causal = kv[None, :] <= cache_position[:, None]  # (q, kv)
    mask = causal[None, None].expand(batch_size, 1, -1, -1)
    if padding is not None:
        mask = mask & padding[:, None, None, :].to(torch.bool)
    return mask.contiguous()


def install() -> bool:
    """Use padded_causal_mask for "sdpa" models; True when it was installed now."""
    from transformers import masking_utils as mu

    if mu.ALL_MASK_ATTENTION_FUNCTIONS["sdpa"] is padded_causal_mask or mu.sdpa_mask is not mu.sdpa_mask_recent_torch:
        return False  # installed already, or this torch gets transformers' vmap-free version anyway
    mu.ALL_MASK_ATTENTION_FUNCTIONS["sdpa"] = padded_causal_mask
    return True
