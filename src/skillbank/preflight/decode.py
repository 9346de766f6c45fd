"""--decode-sample K: decode K random videos with PyAV, as training will, and measure them.

A file that exists can still be truncated, in a codec the decoder lacks, or hold no video stream;
the run would meet it hours in. Decoding also gives the clip's real length and frame size, which
the vision-budget check then uses for these samples. PyAV is imported only here.
"""

from __future__ import annotations

from typing import Any

from skillbank.preflight.report import Findings
from skillbank.preflight.vision import Clip

FPS_TOLERANCE = 0.05


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


def decode_sample(sample: list[tuple[int, dict[str, Any], str]], file: str, findings: Findings) -> list[tuple[int, dict[str, Any], Clip]]:
    """Decode each sampled video; report the failures; return the clips that decoded."""
    clips = []
    for index, record, path in sample:
        where = f"{file}#{index}"
        label = f"record {index} (id {record.get('id')!r})"
        try:
            clip = probe(path)
        except ValueError as exc:
            findings.error(
                "env.decode",
                f"{label}: cannot decode {path}: {exc}",
                "re-encode the file (e.g. ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4) or drop the record",
                where,
                group=file,
            )
            continue
        stated = record.get("video_fps")
        if type(stated) in (int, float) and stated > 0 and abs(stated - clip.video_fps) > FPS_TOLERANCE * clip.video_fps:
            findings.warning(
                "env.decode",
                f"{label}: video_fps is {stated} but the file plays at {clip.video_fps:.3f} fps",
                "set video_fps to the file's frame rate",
                where,
                group=file,
            )
        clips.append((index, record, clip))
    return clips
