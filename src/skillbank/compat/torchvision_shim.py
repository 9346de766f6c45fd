"""Let the registry's CUDA-built torchvision 0.28 import on a CPU-only torch.

torchvision's compiled ops library fails to load without CUDA, and its Python side then trips over
`operator torchvision::nms does not exist`. We declare the operator schemas (no kernels) before
torchvision is first imported, so `torchvision.transforms.v2` (what the Qwen-VL video processors
need) works. The setup step copies this file into site-packages with a `.pth` that calls
`install()`: it only adds a meta-path hook, so Python start-up stays free of torch.
"""

from __future__ import annotations

import sys

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, bool aligned) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "box_iou_rotated(Tensor boxes1, Tensor boxes2) -> Tensor",
)

_library = None  # keeps the torch.library.Library alive for the life of the process


def define_ops() -> None:
    """Declare torchvision's operator schemas when torch has no CUDA and they are not there yet."""
    global _library
    import torch

    if _library is not None or torch.cuda.is_available():
        return
    try:
        torch.ops.torchvision.nms  # noqa: B018 - the ops library loaded after all
        return
    except (AttributeError, RuntimeError):
        pass
    _library = torch.library.Library("torchvision", "DEF")
    for schema in SCHEMAS:
        _library.define(schema)


class _Hook:
    """A meta-path finder (duck-typed: importing importlib.abc would cost every Python start ~40 ms)."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 - MetaPathFinder protocol
        if name == "torchvision":
            sys.meta_path.remove(self)
            try:
                define_ops()
            except Exception:  # noqa: BLE001 - never break an import over the shim
                pass
        return None


def install() -> None:
    if not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
