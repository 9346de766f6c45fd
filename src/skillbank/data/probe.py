"""A clip's frame rate, length and size from its container's headers (PyAV, no frame decoded).

What `skillbank data import` writes on every record and `skillbank data fix` corrects: `video_fps`,
`duration`, `num_frames`, `width`, `height` (the optional fields preflight's token budget reads).
Decoding every frame (preflight's --decode-sample) proves a file plays; reading the headers is
enough to describe it and costs a few milliseconds. PyAV is imported only here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass


@dataclass(frozen=True)
class ClipInfo:
    video_fps: float
    duration: float  # seconds
    num_frames: int
    width: int
    height: int

    def fields(self) -> dict[str, float | int]:
        """The record fields, as preflight reads them (spelled out: asdict costs 10x, per clip)."""
        return {"video_fps": self.video_fps, "duration": self.duration, "num_frames": self.num_frames, "width": self.width, "height": self.height}


def probe_header(path: str | os.PathLike[str]) -> ClipInfo:
    """The first video stream's rate, length and size; raises ValueError naming what is wrong.

    Frames: the container's count when it states one, else duration x rate (rounded).
    Duration: the stream's, else the container's, else frames / rate.
    """
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            fps = float(rate) if rate else 0.0
            if fps <= 0:
                raise ValueError("the video stream has no frame rate")
            width, height = stream.codec_context.width, stream.codec_context.height
            duration = 0.0
            if stream.duration and stream.time_base:
                duration = float(stream.duration * stream.time_base)
            elif container.duration:
                duration = container.duration / 1_000_000  # av.time_base: microseconds
            frames = int(stream.frames or 0)
    except (OSError, av.error.FFmpegError) as exc:
        raise ValueError(str(exc).strip() or type(exc).__name__) from None
    if frames <= 0:
        frames = round(duration * fps)
    if duration <= 0 and frames > 0:
        duration = frames / fps
    if frames <= 0 or duration <= 0:
        raise ValueError("the container states neither a length nor a frame count")
    if not width or not height:
        raise ValueError("the video stream has no frame size")
    return ClipInfo(round(fps, 6), round(duration, 6), frames, int(width), int(height))


def _one(path: str) -> ClipInfo | str:
    try:
        return probe_header(path)
    except ValueError as exc:
        return str(exc)


def _chunk(paths: list[str]) -> list[ClipInfo | str]:
    return [_one(p) for p in paths]


CHUNK = 32  # clips per pool task: a future per clip costs about a tenth of a probe


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _executor(workers: int | None) -> Executor:
    """Worker processes (forked: nothing to import again): reading a container's headers is mostly
    Python-side work in PyAV that holds the GIL, so threads would probe on one core."""
    import multiprocessing

    from skillbank.procs import die_with_parent

    return ProcessPoolExecutor(max_workers=workers or default_workers(), mp_context=multiprocessing.get_context("fork"),
                               initializer=die_with_parent, initargs=(os.getpid(),))  # a SIGKILLed import leaves no worker behind


def probe_many(paths: Iterable[str], *, workers: int | None = None, progress: bool | None = None, total: int | None = None) -> Iterator[ClipInfo | str]:
    """probe_header over many files in order, on worker processes; a failure yields its reason (a str).
    The paths go to the pool in chunks, so the pool's bookkeeping stays small beside the probing."""
    from tqdm import tqdm

    paths = list(paths)
    show = (sys.stderr.isatty() and len(paths) > 50) if progress is None else progress
    workers = workers or default_workers()
    size = max(1, min(CHUNK, len(paths) // (4 * workers) or 1))  # small sets still spread over every worker
    chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
    with _executor(workers) as pool, tqdm(total=total or len(paths), desc="probing clips", unit="clip", file=sys.stderr, disable=not show) as bar:
        for results in pool.map(_chunk, chunks):
            bar.update(len(results))
            yield from results


class ProbePool:
    """Probes clips while the caller is still finding them: `add` each path as it turns up (a path
    added twice is probed once), `results` waits for the rest. `skillbank data import` reads labels
    and tables in the main thread while the pool probes the clips already named, so the import costs
    about the probing alone."""

    def __init__(self, *, workers: int | None = None, progress: bool | None = None, chunk: int = CHUNK // 2) -> None:
        self._pool = _executor(workers)
        self._chunk, self._progress = chunk, progress
        self._pending: list[str] = []
        self._submitted: list[tuple[list[str], Future[list[ClipInfo | str]]]] = []
        self._seen: set[str] = set()

    def add(self, path: str) -> None:
        if path in self._seen:
            return
        self._seen.add(path)
        self._pending.append(path)
        if len(self._pending) >= self._chunk:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._submitted.append((self._pending, self._pool.submit(_chunk, self._pending)))
            self._pending = []

    def results(self) -> dict[str, ClipInfo | str]:
        """{path: ClipInfo or why it failed} for every path added, with a progress bar on a terminal."""
        from tqdm import tqdm

        self._flush()
        show = (sys.stderr.isatty() and len(self._seen) > 50) if self._progress is None else self._progress
        out: dict[str, ClipInfo | str] = {}
        with tqdm(total=len(self._seen), desc="probing clips", unit="clip", file=sys.stderr, disable=not show) as bar:
            for paths, future in self._submitted:
                out.update(zip(paths, future.result()))
                bar.update(len(paths))
        return out

    def __enter__(self) -> ProbePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


# ---- cached: a second plan pays nothing for clips it has seen ------------------------------------

INLINE = 16  # up to this many clips are probed in this process
CACHE_KIND = "probe"  # skillbank.filecache table: {"video_fps", "duration", "num_frames", "width", "height"} or {"error": why}


@dataclass(frozen=True)
class CachedProbe:
    """What `probe_cached` found: each path's header (or why it could not be read) and where it came from."""

    results: dict[str, ClipInfo | str]
    cached: int  # read from the file cache
    probed: int  # opened with PyAV now

    @property
    def failed(self) -> int:
        return sum(1 for v in self.results.values() if isinstance(v, str))


def _from_cache(value: dict) -> ClipInfo | str:
    if "error" in value:
        return str(value["error"])
    return ClipInfo(float(value["video_fps"]), float(value["duration"]), int(value["num_frames"]), int(value["width"]), int(value["height"]))


def probe_cached(paths: Iterable[str], *, workers: int | None = None, progress: bool | None = None) -> CachedProbe:
    """probe_header of each distinct path, read from skillbank.filecache (keyed by path, size and mtime)
    when it was probed before, else on worker processes (probe_many) and recorded. A file that does not
    exist is not cached (its reason is returned); a file PyAV cannot read is, with its reason."""
    from skillbank.filecache import FileCache

    distinct = list(dict.fromkeys(paths))
    with FileCache(CACHE_KIND) as cache:
        hits = cache.get_many(distinct)
        results: dict[str, ClipInfo | str] = {p: _from_cache(v) for p, v in hits.items()}
        missing = [p for p in distinct if p not in results]
        if missing:
            inline = len(missing) <= INLINE  # a few headers cost less than starting worker processes
            found = [_one(p) for p in missing] if inline else probe_many(missing, workers=workers, progress=progress)
            fresh = dict(zip(missing, found))
            cache.put_many({p: v.fields() if isinstance(v, ClipInfo) else {"error": v} for p, v in fresh.items()})
            results.update(fresh)
    return CachedProbe(results, len(hits), len(missing))
