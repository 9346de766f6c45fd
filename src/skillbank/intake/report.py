"""What DIR/import.json says about the clips: frame-rate and duration histograms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from skillbank.data.probe import ClipInfo

DURATION_BINS = (1, 2, 5, 10, 30, 60, 120, 300)  # seconds: upper edges; the last bin is open


def fps_histogram(clips: Iterable[ClipInfo]) -> dict[str, int]:
    """{frame rate: clips}, rates rounded to 0.01 (29.97 stays 29.97), lowest first."""
    counts = Counter(round(c.video_fps, 2) for c in clips)
    return {f"{fps:g}": n for fps, n in sorted(counts.items())}


def _bin(seconds: float) -> str:
    low = 0
    for edge in DURATION_BINS:
        if seconds < edge:
            return f"{low}-{edge} s"
        low = edge
    return f">={low} s"


def duration_histogram(clips: Iterable[ClipInfo]) -> dict[str, int]:
    """{"2-5 s": clips, ...} in bin order, empty bins left out."""
    counts = Counter(_bin(c.duration) for c in clips)
    order = [_bin(e - 1e-9) for e in DURATION_BINS] + [_bin(DURATION_BINS[-1])]
    return {name: counts[name] for name in order if counts[name]}
