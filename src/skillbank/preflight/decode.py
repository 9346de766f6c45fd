"""--decode-sample K|all: decode K random videos (or every one) with PyAV, as training will, and measure them.

A file that exists can still be truncated, in a codec the decoder lacks, or hold no video stream;
the run would meet it hours in. Decoding also gives the clip's real length and frame size, which
the vision-budget check then uses for these clips, and the summary says what was measured: clip
lengths and how many frames the spec's fps / nframes samples from them (qwen_vl_utils' rule).
Clips decode on a few threads (PyAV releases the GIL). PyAV is imported only here.
"""

from __future__ import annotations

import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillbank.preflight.report import Findings
from skillbank.preflight.vision import Clip

FPS_TOLERANCE = 0.05
ALL = -1  # --decode-sample all


def probe(path: str) -> Clip:
    """Decode every frame of the first video stream; raises ValueError when that fails."""
    import av

    try:
        with av.open(path) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            frames, width, height = 0, 0, 0
            for frame in container.decode(stream):
                frames += 1
                width, height = frame.width, frame.height
    except (OSError, av.error.FFmpegError) as exc:
        raise ValueError(str(exc)) from None
    if frames == 0:
        raise ValueError("no frames decoded")
    fps = float(rate) if rate else 0.0
    if fps <= 0:
        raise ValueError("the stream has no frame rate")
    return Clip(frames, fps, width, height)


@dataclass
class DecodeSummary:
    """What the decode measured, for the report's stats and its text line."""

    requested: str  # "all" or the count asked for
    clips: int = 0
    failed: int = 0
    durations: list[float] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)
    sampling: str = ""  # "fps 2" / "nframes 8": what the frame counts were computed for

    def merge(self, other: "DecodeSummary") -> "DecodeSummary":
        """Both datasets' measurements as one (--decode-sample all over train and val)."""
        return DecodeSummary(
            self.requested, self.clips + other.clips, self.failed + other.failed,
            self.durations + other.durations, self.sampled + other.sampled, self.sampling or other.sampling,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "clips": self.clips,
            "decoded": self.clips - self.failed,
            "failed": self.failed,
            "duration_s": spread(self.durations, 3),
            "frames_sampled": spread(self.sampled, 1),
            "sampling": self.sampling or None,
            "summary": self.line(),
        }

    def line(self) -> str:
        """One line a person reads: what was decoded and measured."""
        if not self.clips:
            return f"decode: no video to decode (--decode-sample {self.requested})"
        text = f"decode: {self.clips - self.failed:,} of {self.clips:,} clip(s) decoded"
        if self.failed:
            text += f" ({self.failed:,} failed)"
        d = spread(self.durations, 2)
        if d:
            text += f"; length {d['min']:g}-{d['max']:g} s (median {d['median']:g})"
        s = spread(self.sampled, 1)
        if s and self.sampling:
            text += f"; {s['min']:g}-{s['max']:g} frames sampled at {self.sampling} (median {s['median']:g})"
        return text


def spread(values: list[float] | list[int], digits: int) -> dict[str, float] | None:
    """min / median / max, rounded (None for no values): how decode and `data stats` describe lengths."""
    if not values:
        return None
    return {"min": round(min(values), digits), "median": round(statistics.median(values), digits), "max": round(max(values), digits)}


def _workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def decode_sample(
    sample: list[tuple[int, dict[str, Any], str]],
    file: str,
    findings: Findings,
    *,
    fps: float | None = None,
    nframes: int | None = None,
    requested: int = 0,
    progress: bool | None = None,
) -> tuple[list[tuple[int, dict[str, Any], Clip]], DecodeSummary]:
    """Decode each sampled video; report the failures; return the clips that decoded and a summary.

    fps / nframes: the vision setting the frame counts are computed for (None for both: not computed).
    """
    from tqdm import tqdm

    from skillbank.data.video import num_sampled_frames

    summary = DecodeSummary("all" if requested == ALL else str(requested), clips=len(sample))
    if (fps is None) != (nframes is None):
        summary.sampling = f"fps {fps:g}" if fps is not None else f"nframes {nframes}"

    def one(item: tuple[int, dict[str, Any], str]) -> tuple[Clip | None, str]:
        try:
            return probe(item[2]), ""
        except ValueError as exc:
            return None, str(exc)

    clips = []
    show = (sys.stderr.isatty() and len(sample) > 50) if progress is None else progress
    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        results = tqdm(pool.map(one, sample), total=len(sample), desc="decoding clips", unit="clip", file=sys.stderr, disable=not show)
        for (index, record, path), (clip, error) in zip(sample, results):
            where = f"{file}#{index}"
            label = f"record {index} (id {record.get('id')!r})"
            if clip is None:
                summary.failed += 1
                findings.error(
                    "media.decode",
                    f"{label}: cannot decode {path}: {error}",
                    "re-encode the file (e.g. ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4) or drop the record",
                    where,
                    group=file,
                )
                continue
            summary.durations.append(clip.duration)
            if summary.sampling:
                try:
                    summary.sampled.append(num_sampled_frames(clip.total_frames, clip.video_fps, fps=fps, nframes=nframes))
                except ValueError:
                    pass  # nframes above the clip's frames: the vision-budget check reports it
            stated = record.get("video_fps")
            if type(stated) in (int, float) and stated > 0 and abs(stated - clip.video_fps) > FPS_TOLERANCE * clip.video_fps:
                findings.warning(
                    "media.decode",
                    f"{label}: video_fps is {stated} but the file plays at {clip.video_fps:.3f} fps",
                    "set video_fps to the file's frame rate: `skillbank data fix ANNOTATIONS --out FILE` writes a copy with every record's video_fps and duration read from its container",
                    where,
                    group=file,
                )
            clips.append((index, record, clip))
    return clips, summary
