"""Video decoding and frame sampling, done here with PyAV.

torchvision 0.28 has no io.read_video and transformers 4.57's fetch_videos falls back to it, so a
path inside apply_chat_template fails; we decode ourselves and hand the processor frames plus
metadata. Frame sampling follows qwen_vl_utils (what cosmos-rl's packers use), so both backends
see the same frames for the same fps / nframes setting.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import TypedDict

FRAME_FACTOR = 2  # frames come in temporal patches of 2
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768
PIXEL_BUDGET_SHARE = 0.9  # of the context the video may fill by default; the rest is prompt and answer
MIN_PIXELS_SLACK = 1.05  # qwen_vl_utils keeps a frame's pixel cap at least this times min_pixels


class DecodeError(ValueError):
    """A video PyAV cannot read (broken file, no video stream, no frames): the caller names the record."""


class VideoMeta(TypedDict):
    fps: float
    total_num_frames: int
    duration: float


def decode_video(path: str | os.PathLike[str], pick: Callable[[int, float], Sequence[int]] | None = None):
    """Decode every frame: (uint8 tensor [T, 3, H, W], {fps, total_num_frames, duration}).

    pick(total_num_frames, fps) -> frame indices: only those frames are converted to RGB and returned,
    in that order (the YUV -> RGB conversion is most of decoding's time when few frames are sampled).
    """
    import av
    import numpy as np
    import torch

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise DecodeError(f"cannot decode video {path}: it has no video stream")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            decoded = list(container.decode(stream))
            fps = float(rate) if rate else 0.0
            indices = range(len(decoded)) if pick is None else pick(len(decoded), fps) if decoded else []
            rgb = av.video.reformatter.VideoReformatter()  # one for the clip: a new one per frame costs more than the conversion
            frames = [rgb.reformat(decoded[i], format="rgb24").to_ndarray() for i in indices]
    except (OSError, av.error.FFmpegError) as exc:
        raise DecodeError(f"cannot decode video {path}: {exc}") from exc
    if not decoded:
        raise DecodeError(f"video {path} has no frames")
    video = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).contiguous()
    total = len(decoded)
    duration = total / fps if fps > 0 else 0.0
    return video, VideoMeta(fps=fps, total_num_frames=total, duration=duration)


def _round(n: float, factor: int) -> int:
    return round(n / factor) * factor


def num_sampled_frames(total: int, video_fps: float, *, fps: float | None = None, nframes: int | None = None) -> int:
    """qwen_vl_utils.smart_nframes: how many frames the model sees."""
    if (fps is None) == (nframes is None):
        raise ValueError("set exactly one of fps and nframes (qwen_vl_utils: 'Only accept either fps or nframes')")
    if nframes is not None:
        n = _round(nframes, FRAME_FACTOR)
    else:
        lo = math.ceil(FPS_MIN_FRAMES / FRAME_FACTOR) * FRAME_FACTOR
        hi = math.floor(min(FPS_MAX_FRAMES, total) / FRAME_FACTOR) * FRAME_FACTOR
        n = total / video_fps * fps if video_fps > 0 else total
        n = min(max(n, lo), hi, total)
        n = math.floor(n / FRAME_FACTOR) * FRAME_FACTOR
    if not FRAME_FACTOR <= n <= total:
        raise ValueError(f"cannot sample {n} frames from a {total}-frame video (need {FRAME_FACTOR}..{total})")
    return n


def sample_indices(total: int, video_fps: float, *, fps: float | None = None, nframes: int | None = None) -> list[int]:
    """Evenly spaced frame indices from first to last, as qwen_vl_utils' readers pick them."""
    n = num_sampled_frames(total, video_fps, fps=fps, nframes=nframes)
    if n == 1:
        return [0]
    return [round(i * (total - 1) / (n - 1)) for i in range(n)]


def default_total_pixels(model_max_length: int, pixels_per_token: int) -> int:
    """custom.vision.total_pixels when the spec leaves it null: 90% of the context in pixels.
    pixels_per_token is (patch_size * merge_size)**2: 784 for Qwen2.5-VL, 1024 for Qwen3-VL."""
    return int(model_max_length * pixels_per_token * PIXEL_BUDGET_SHARE)


def frame_pixel_budget(
    frames: int, *, total_pixels: int | None, min_pixels: int, frame_max_pixels: int, max_pixels: int | None = None
) -> float:
    """The most pixels one frame may have (qwen_vl_utils.fetch_video): the clip's total_pixels shared
    over its frames, within [min_pixels * 1.05, frame_max_pixels], then capped by max_pixels."""
    budget: float = frame_max_pixels
    if total_pixels is not None:
        budget = max(min(frame_max_pixels, total_pixels / frames * FRAME_FACTOR), int(min_pixels * MIN_PIXELS_SLACK))
    if max_pixels is not None:
        budget = min(budget, max_pixels)
    return budget
