"""How many tokens a sample's prompt takes, to catch samples longer than policy.model_max_length.

cosmos-rl truncates a sample to model_max_length; cutting vision tokens breaks their alignment
with the vision embeddings ("vision_embeds ... must be equal to n_tokens") and the retries of one
such sample can kill the run. The estimate follows qwen_vl_utils (what the packers call):

- frames: `skillbank.data.video.num_sampled_frames` (fps: duration * fps within [4, 768];
  nframes: fixed, and more than the clip has raises in qwen_vl_utils);
- pixels per frame: at most max(min(768 tokens, total_pixels / frames * 2), 1.05 * 128 tokens) of
  pixels, capped by max_pixels; at least 128 tokens of pixels (small frames are upscaled);
- one token per (patch * 2)**2 pixels (patch 16 for Qwen3-VL / Cosmos-Reason2, 14 for
  Qwen2.5-VL / Cosmos-Reason1), over temporal patches of 2 frames;
- text: about one token per 3 characters (conservative for English), plus the chat template.

A clip's length comes from the record (`duration` seconds, or `num_frames` / `frames` with
`video_fps`), from its container headers (preflight.probing: a sample by default, every clip for
`skillbank plan`) or from decoding it (--decode-sample). Frame size comes from `width` / `height`
(or the headers); otherwise the pixel budget is the upper bound and 128 tokens per temporal
patch the lower bound: past the lower bound is an error, past only the upper one a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from skillbank.data.chat import CHARS_PER_TOKEN
from skillbank.data.video import (
    FPS_MAX_FRAMES,
    FPS_MIN_FRAMES,
    FRAME_FACTOR,
    default_total_pixels,
    frame_pixel_budget,
    num_sampled_frames,
)

VIDEO_MIN_TOKENS = 128
VIDEO_MAX_TOKENS = 768
TEMPLATE_TOKENS = 32  # role markers, vision start/end, padding of the chat template
TYPICAL_TEXT_TOKENS = 256
NOMINAL_FPS = 30.0


@dataclass(frozen=True)
class Clip:
    total_frames: int
    video_fps: float
    width: int | None = None
    height: int | None = None

    @property
    def duration(self) -> float:
        return self.total_frames / self.video_fps


@dataclass(frozen=True)
class Estimate:
    frames: int
    vision_low: int
    vision_high: int
    text: int

    @property
    def low(self) -> int:
        return self.vision_low + self.text

    @property
    def high(self) -> int:
        return self.vision_high + self.text


@dataclass(frozen=True)
class VisionBudget:
    model_max_length: int
    patch_size: int
    fps: float | None
    nframes: int | None
    total_pixels: int
    max_pixels: int | None = None
    system_prompt: str = ""

    @classmethod
    def from_train_spec(cls, spec: Any, patch_size: int) -> "VisionBudget":
        vision, length = spec.custom.vision, spec.policy.model_max_length
        total = vision.total_pixels if vision.total_pixels is not None else default_total_pixels(length, (patch_size * 2) ** 2)
        return cls(length, patch_size, vision.fps, vision.nframes, total, vision.max_pixels, spec.custom.system_prompt)

    @property
    def pixels_per_token(self) -> int:
        return (self.patch_size * 2) ** 2

    def frame_pixels(self, frames: int) -> tuple[int, int]:
        """(lowest, highest) pixels per frame for a clip sampled to `frames` frames."""
        ppt = self.pixels_per_token
        min_pixels = VIDEO_MIN_TOKENS * ppt
        high = frame_pixel_budget(
            frames, total_pixels=self.total_pixels, min_pixels=min_pixels, frame_max_pixels=VIDEO_MAX_TOKENS * ppt, max_pixels=self.max_pixels
        )
        return min(min_pixels, high), high

    def text_tokens(self, chars: int) -> int:
        return math.ceil((chars + len(self.system_prompt)) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS

    def fill_tokens(self, text_chars: int) -> int:
        """Tokens of a sample whose clip fills the whole pixel budget (a clip that cannot be read), capped by model_max_length."""
        return min(self.model_max_length, self.total_pixels // self.pixels_per_token + self.text_tokens(text_chars))

    def estimate(self, clip: Clip, text_chars: int) -> Estimate:
        """Raises ValueError when qwen_vl_utils cannot sample the clip (nframes > its frames)."""
        frames = num_sampled_frames(clip.total_frames, clip.video_fps, fps=self.fps, nframes=self.nframes)
        low_px, high_px = self.frame_pixels(frames)
        if clip.width and clip.height:
            low_px = high_px = min(high_px, max(clip.width * clip.height, low_px))
        groups = math.ceil(frames / FRAME_FACTOR)
        ppt = self.pixels_per_token
        return Estimate(frames, groups * int(low_px // ppt), groups * math.ceil(high_px / ppt), self.text_tokens(text_chars))

    def longest_safe_clip(self) -> float | None:
        """Seconds of clip beyond which a typical sample may not fit (fps mode); None: any length fits."""
        if self.fps is None:
            return None
        text = TYPICAL_TEXT_TOKENS + self.text_tokens(0)
        for frames in range(FPS_MIN_FRAMES, FPS_MAX_FRAMES + 1, FRAME_FACTOR):
            _, high = self.frame_pixels(frames)
            if frames // FRAME_FACTOR * math.ceil(high / self.pixels_per_token) + text > self.model_max_length:
                return frames / self.fps
        return None

    def fixed_frames_overflow(self) -> Estimate | None:
        """With nframes every clip gets the same frames: the estimate when even the lowest overflows."""
        if self.nframes is None:
            return None
        frames = self.nframes + self.nframes % FRAME_FACTOR
        low, high = self.frame_pixels(frames)
        ppt, groups = self.pixels_per_token, frames // FRAME_FACTOR
        est = Estimate(frames, groups * int(low // ppt), groups * math.ceil(high / ppt), self.text_tokens(0))
        return est if est.low > self.model_max_length else None


@dataclass
class TokenTally:
    """Tokens per sample over the records whose clip length is known: what preflight reports
    (stats.tokens_per_sample), `skillbank data stats` shows and `skillbank plan` sizes memory and time with.

    Each sample counts its upper estimate (exact when the record states width / height, or the clip's
    container headers were read (`probed`), or it was decoded); a clip that could not be read counts the
    spec's whole vision budget (`budget`). `bound` says which: "budget" when any sample fell back to the
    budget, "upper" when a record states a length but no frame size, "probed" when the headers of some
    clips were read (the rest exact), "exact" when every record states it all.
    """

    samples: int = 0
    total: int = 0
    max: int = 0
    min: int = 0
    exact: int = 0
    longest_clip_s: float = 0.0
    probed: int = 0  # samples whose clip length and size came from the container headers (data.probe)
    budget: int = 0  # samples whose clip could not be read: the spec's vision budget stands in

    def add(self, est: Estimate, clip: Clip | None = None, *, probed: bool = False) -> None:
        self._count(est.high, exact=est.low == est.high)
        self.probed += probed
        if clip is not None:
            self.longest_clip_s = max(self.longest_clip_s, clip.duration)

    def add_budget(self, tokens: int) -> None:
        """A sample whose clip could not be read: it counts the vision budget's tokens."""
        self._count(tokens, exact=False)
        self.budget += 1

    def _count(self, tokens: int, *, exact: bool) -> None:
        self.min = tokens if not self.samples else min(self.min, tokens)
        self.samples += 1
        self.total += tokens
        self.max = max(self.max, tokens)
        self.exact += exact

    def merge(self, other: "TokenTally") -> "TokenTally":
        if not other.samples:
            return self
        if not self.samples:
            return other
        return TokenTally(
            self.samples + other.samples,
            self.total + other.total,
            max(self.max, other.max),
            min(self.min, other.min),
            self.exact + other.exact,
            max(self.longest_clip_s, other.longest_clip_s),
            self.probed + other.probed,
            self.budget + other.budget,
        )

    @property
    def mean(self) -> float:
        return self.total / self.samples if self.samples else 0.0

    @property
    def bound(self) -> str:
        if self.budget:
            return "budget"
        if self.exact < self.samples:
            return "upper"
        return "probed" if self.probed else "exact"

    def to_dict(self) -> dict[str, Any] | None:
        """None when no sample's length was known (no duration / num_frames and nothing probed or decoded)."""
        if not self.samples:
            return None
        return {
            "samples": self.samples,
            "mean": round(self.mean, 1),
            "min": self.min,
            "max": self.max,
            "bound": self.bound,
            "probed": self.probed,
            "budget": self.budget,
            "longest_clip_s": round(self.longest_clip_s, 3),
        }


def clip_from_record(record: dict[str, Any]) -> Clip | None:
    """The clip's length (and frame size) from the record's metadata, when it has any."""
    fps = record.get("video_fps")
    fps_ok = type(fps) in (int, float) and 0 < fps < math.inf
    if not fps_ok:
        fps = NOMINAL_FPS  # a bad video_fps has its own finding; a stated duration still counts
    frames = record.get("num_frames")
    if frames is None:  # absent or null: a record may state `frames` instead
        frames = record.get("frames")
    if type(frames) is not int or frames <= 0 or not fps_ok:
        duration = record.get("duration")
        if type(duration) not in (int, float) or not 0 < duration < math.inf:
            return None
        frames = max(1, round(duration * fps))
    width, height = record.get("width"), record.get("height")
    size_ok = type(width) is int and type(height) is int and width > 0 and height > 0
    return Clip(frames, float(fps), width if size_ok else None, height if size_ok else None)


def text_chars(record: dict[str, Any]) -> int:
    conv = record.get("conversations")
    if not isinstance(conv, list):
        return 0
    return sum(len(t["value"]) for t in conv if isinstance(t, dict) and isinstance(t.get("value"), str))
