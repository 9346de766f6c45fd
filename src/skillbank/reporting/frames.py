"""A strip of frames from a clip: what a person looks at to see why an answer was wrong.

PyAV decodes; only the picked frames are converted to RGB, scaled down by swscale on the way
(`VideoFrame.reformat`), so a strip of a long 1080p clip costs the decode of its frames, not their
conversion. No torch: data.video's decoder returns tensors for the processor, a strip needs a few
small numpy arrays. An unreadable clip is an InputError naming the file.
"""

from __future__ import annotations

import io
import os

from skillbank.errors import InputError

FRAMES = 6  # frames per strip, evenly spaced over the clip
HEIGHT = 96  # strip height in pixels (smaller clips keep their own height)
GAP = 2  # grey pixels between frames

FIX = "check the clip (ffprobe FILE) or point --media-dir at the folder the clips are in; --no-frames leaves the strips out"


def _picks(total: int, n: int) -> list[int]:
    """n indices spread evenly over total frames (each segment's middle frame)."""
    if total <= n:
        return list(range(total))
    return sorted({min(total - 1, int((i + 0.5) * total / n)) for i in range(n)})


def strip_png(path: str | os.PathLike[str], *, frames: int = FRAMES, height: int = HEIGHT, where: str = "") -> bytes:
    """The PNG of `frames` frames of the clip side by side, `height` pixels high."""
    import av
    import numpy as np
    from PIL import Image

    picked = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise InputError(f"clip has no video stream: {path}", where=where or str(path), fix=FIX)
            stream = container.streams.video[0]
            total = stream.frames or 0
            if total <= 0:  # no frame count in the header: count by decoding once
                total = sum(1 for _ in container.decode(stream))
                container.seek(0)
            wanted = set(_picks(total, frames))
            last = max(wanted) if wanted else -1
            for index, frame in enumerate(container.decode(stream)):
                if index in wanted:
                    h = min(height, frame.height)
                    w = max(1, round(frame.width * h / frame.height))
                    picked.append(frame.reformat(width=w, height=h, format="rgb24").to_ndarray())
                if index >= last:
                    break
    except InputError:
        raise
    except (OSError, av.error.FFmpegError) as exc:
        raise InputError(f"cannot read the clip {path}: {exc}", where=where or str(path), fix=FIX) from None
    if not picked:
        raise InputError(f"the clip has no frames: {path}", where=where or str(path), fix=FIX)
    h = max(f.shape[0] for f in picked)
    gap = np.full((h, GAP, 3), 160, dtype=np.uint8)
    row = [part for f in picked for part in (np.pad(f, ((0, h - f.shape[0]), (0, 0), (0, 0))), gap)][:-1]
    buf = io.BytesIO()
    Image.fromarray(np.concatenate(row, axis=1)).save(buf, format="PNG", optimize=False)
    return buf.getvalue()
