"""What DIR/import.json and `data stats` say about the clips: frame-rate and duration histograms, and the clip lengths
both state (`lengths`, `lengths_text`): one length per clip, the frames / fps the records carry (preflight's
vision.Clip, what sampling reads), so the import and the stats of its files print the same figures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from skillbank.data.probe import ClipInfo
from skillbank.preflight.decode import spread
from skillbank.preflight.vision import Clip

# Seconds: the upper edge of each bin, included ("1-2 s" holds 1 < d <= 2: a clip of exactly 2.0 s is a
# "1-2 s" clip, one of 2.5 s a "2-5 s" clip); above the last edge one open bin (">300 s").
DURATION_BINS = (1, 2, 5, 10, 30, 60, 120, 300)
ROUND_S = 0.01  # container durations are binned to 0.01 s: 60 frames at 29.97 fps (2.002 s) count as 2 s


def fps_histogram(clips: Iterable[ClipInfo]) -> dict[str, int]:
    """{frame rate: clips}, rates rounded to 0.01 (29.97 stays 29.97), lowest first."""
    counts = Counter(round(c.video_fps, 2) for c in clips)
    return {f"{fps:g}": n for fps, n in sorted(counts.items())}


def duration_bin(seconds: float) -> str:
    """The bin label of a clip length: "0-1 s", "1-2 s", ..., ">300 s" (each bin holds its upper edge)."""
    seconds = round(seconds / ROUND_S) * ROUND_S
    low = 0
    for edge in DURATION_BINS:
        if seconds <= edge:
            return f"{low}-{edge} s"
        low = edge
    return f">{low} s"


def duration_histogram(clips: Iterable[ClipInfo]) -> dict[str, int]:
    """{"1-2 s": clips, ...} in bin order, empty bins left out."""
    counts = Counter(duration_bin(c.duration) for c in clips)
    order = [duration_bin(edge) for edge in DURATION_BINS] + [duration_bin(DURATION_BINS[-1] + 1)]
    return {name: counts[name] for name in order if counts[name]}


def lengths(clips: Iterable[Clip]) -> dict[str, Any]:
    """{clips, duration_s: min/median/max (None without clips), total_duration_s} of one length per clip (frames / fps)."""
    seconds = [c.duration for c in clips]
    return {"clips": len(seconds), "duration_s": spread(seconds, 3), "total_duration_s": round(sum(seconds), 3)}


def lengths_text(doc: dict[str, Any]) -> str:
    """`lengths` in words, to one decimal: "1.6-2.0 s, median 1.9 over 12 clip(s), 23 s in all" (the import and
    `data stats` print this line)."""
    d, total = doc["duration_s"], doc["total_duration_s"]
    span = f"{total:,.0f} s" if total < 3600 else f"{total / 3600:,.1f} h"
    return f"{d['min']:.1f}-{d['max']:.1f} s, median {d['median']:.1f} over {doc['clips']:,} clip(s), {span} in all"
