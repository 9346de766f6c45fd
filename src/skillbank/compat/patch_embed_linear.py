"""Qwen-VL's video patch embedding as one matrix product (the local backend on a CPU).

The vision towers of Qwen2.5-VL and Qwen3-VL embed each flattened patch (channels x temporal_patch x
patch x patch values) with an nn.Conv3d whose kernel equals its stride: one output per patch, i.e.
x @ W.T with W the kernel flattened in the same order. On a CPU, PyTorch runs it as an mkldnn 3-D
convolution over thousands of one-patch "images": measured on 2 cores for the demo's 512 patches a
rank, 80-110 ms forward + backward against 20 ms for the same product as F.linear, about a tenth of a
demo training step. `install()` swaps the forward of both patch-embedding classes for the linear form
(same weights, same state dict, same result to float rounding); idempotent.
"""

from __future__ import annotations

MARK = "_skillbank_linear_patch_embed"


def _linear_forward(self, hidden_states):
    import torch.nn.functional as F

    weight = self.proj.weight
    flat = hidden_states.reshape(-1, weight[0].numel()).to(dtype=weight.dtype)
    return F.linear(flat, weight.reshape(weight.shape[0], -1), self.proj.bias).view(-1, self.embed_dim)


def classes() -> list[type]:
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionPatchEmbed
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionPatchEmbed

    return [Qwen2_5_VisionPatchEmbed, Qwen3VLVisionPatchEmbed]


def install() -> bool:
    """Use the linear forward in this process; True when it was installed now."""
    todo = [cls for cls in classes() if not getattr(cls, MARK, False)]
    for cls in todo:
        cls.forward = _linear_forward
        setattr(cls, MARK, True)
    return bool(todo)
