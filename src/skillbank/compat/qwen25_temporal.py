"""Keep Qwen2.5-VL's video frame order in transformers 4.57 (Cosmos-Reason1 in the local backend and evaluation).

transformers 4.57's `Qwen2_5_VLModel.get_rope_index` converts each video's seconds per temporal
patch (temporal_patch_size / sampled fps) to the integer dtype of its position range before scaling
it: at 4 fps (0.5 s, Cosmos-Reason1's recommended setting) every temporal patch gets time position
0, so the model cannot tell frame order. Upstream fixed it by keeping the step floating point and
converting the scaled coordinates to integers afterwards (huggingface/transformers#48669, 5.x).

`install()` does the same for the 4.57 code without copying it: the modeling module's `torch` is
replaced by a view of torch whose `as_tensor` keeps floating data floating when asked for an
integer dtype (the function's one `as_tensor` call is that conversion); everything else is torch
itself. It is applied only when the installed source still has the truncating conversion, and is
idempotent. cosmos-rl's own Qwen2.5-VL does not truncate and is not touched.
"""

from __future__ import annotations

import types

BUGGY_CONVERSION = "second_per_grid_t, dtype=range_tensor.dtype"


class _FloatSecondsTorch(types.ModuleType):
    """torch, except that as_tensor(float data, dtype=<integer dtype>) stays floating point."""

    def __init__(self, torch_module: types.ModuleType) -> None:
        super().__init__(torch_module.__name__)
        self._torch = torch_module

    def __getattr__(self, name: str):
        value = getattr(self._torch, name)
        setattr(self, name, value)  # looked up once: later reads are plain attribute reads
        return value

    def as_tensor(self, data, dtype=None, device=None):
        tensor = self._torch.as_tensor(data, device=device)
        if dtype is not None and tensor.is_floating_point() and not dtype.is_floating_point:
            return tensor
        return tensor if dtype is None else tensor.to(dtype)


def needs_fix() -> bool:
    import inspect

    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as modeling

    if isinstance(modeling.torch, _FloatSecondsTorch):
        return False
    return BUGGY_CONVERSION in inspect.getsource(modeling.Qwen2_5_VLModel.get_rope_index)


def install() -> bool:
    """Apply the fix when this transformers needs it; True when it was applied now."""
    if not needs_fix():
        return False
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as modeling

    modeling.torch = _FloatSecondsTorch(modeling.torch)
    return True
