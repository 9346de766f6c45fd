"""`skillbank data fix`: a corrected copy of an annotations file, each clip's metadata read from its container.

Preflight's annotations.video_fps (missing or not a number) and media.decode (video_fps disagrees with
the file) findings name this as their fix. Per video record: `video_fps` and `duration` are written
when missing, not a positive number, or more than 5% off the container's (decode.FPS_TOLERANCE, the
tolerance preflight warns past); `num_frames`, `width` and `height` are added where missing (a record
that states `frames` keeps it instead of gaining num_frames). Every other key stays as it was, records
keep their order, image records and records without a usable video path are copied untouched.
The input is never written: the copy goes to --out, atomically, and --out may not be the input.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.data.media import media_root
from skillbank.data.records import load_records
from skillbank.errors import InputError
from skillbank.preflight.decode import FPS_TOLERANCE

CORRECTED = ("video_fps", "duration")  # written when missing or wrong
ADDED = ("num_frames", "width", "height")  # written only where missing
FIELDS = CORRECTED + ADDED
FIRST = 5  # record indices listed per field
SHOWN = 10  # unreadable clips named in an error


@dataclass
class FieldChange:
    added: int = 0
    corrected: int = 0
    first: list[int] = field(default_factory=list)

    def note(self, index: int, was_missing: bool) -> None:
        if was_missing:
            self.added += 1
        else:
            self.corrected += 1
        if len(self.first) < FIRST:
            self.first.append(index)


@dataclass
class FixReport:
    annotations: str
    out: str
    media_root: str
    records: int = 0
    videos: int = 0
    clips_probed: int = 0
    changed_records: int = 0
    fields: dict[str, FieldChange] = field(default_factory=lambda: {name: FieldChange() for name in FIELDS})
    skipped: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "annotations": self.annotations,
            "out": self.out,
            "media_root": self.media_root,
            "records": self.records,
            "written": self.records - len(self.skipped),
            "videos": self.videos,
            "clips_probed": self.clips_probed,
            "changed_records": self.changed_records,
            "fields": {k: {"added": v.added, "corrected": v.corrected, "first_records": v.first} for k, v in self.fields.items()},
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
        }

    def lines(self) -> list[str]:
        text = [f"{self.changed_records:,} of {self.records:,} records changed ({self.videos:,} video records, {self.clips_probed:,} clips probed); wrote {self.out}"]
        for name, change in self.fields.items():
            if change.added or change.corrected:
                text.append(f"  {name}: {change.added:,} added, {change.corrected:,} corrected (records {', '.join(map(str, change.first))}{', ...' if change.added + change.corrected > len(change.first) else ''})")
        for item in self.skipped[:SHOWN]:
            text.append(f"  skipped record {item['record']} (id {item['id']!r}): {item['video']}: {item['reason']}")
        if len(self.skipped) > SHOWN:
            text.append(f"  ... {len(self.skipped) - SHOWN:,} more skipped (--json lists them all)")
        return text


def _number(value: Any) -> bool:
    return type(value) in (int, float) and 0 < value < math.inf


def _off(stated: Any, measured: float) -> bool:
    """Missing, not a positive number, or more than FPS_TOLERANCE away from the measurement."""
    return not _number(stated) or abs(stated - measured) > FPS_TOLERANCE * measured


def _video(record: Any) -> str | None:
    """The record's video path (the first of a list), None for image records and unusable values."""
    if not isinstance(record, dict):
        return None
    video = record.get("video")
    if isinstance(video, list):
        video = video[0] if video else None
    return video if isinstance(video, str) and video else None


def read_annotations(annotations: str) -> list[Any]:
    """The records of ANNOTATIONS (load_records' shape checks), with a fix that names the argument."""
    if not Path(annotations).is_file():
        raise InputError(f"annotation file not found: {annotations}", where="ANNOTATIONS", fix="pass the path of a LLaVA annotations file (a JSON array of records)")
    return load_records(annotations)


def check_out(annotations: str, out: str) -> None:
    """--out must name another file than the input (the input is never written)."""
    a, o = Path(annotations), Path(out)
    if os.path.realpath(a) == os.path.realpath(o) or (o.exists() and a.exists() and os.path.samefile(a, o)):
        raise InputError(f"--out {out} is the input file", where="--out", fix="write the corrected copy to another file, e.g. --out annotations.fixed.json")
    if o.is_dir():
        raise InputError(f"--out {out} is a folder", where="--out", fix="name the file to write, e.g. --out annotations.fixed.json")


def fix_records(records: list[Any], root: str, *, skip_bad: bool = False, progress: bool | None = None, where: str = "") -> tuple[list[Any], FixReport]:
    """The corrected records and what changed; unreadable clips raise InputError (or, with skip_bad,
    leave their records out of the copy and are listed in report.skipped)."""
    from skillbank.data.probe import probe_many

    report = FixReport(where, "", root, records=len(records))
    paths = {i: _video(r) for i, r in enumerate(records)}
    paths = {i: os.path.normpath(os.path.join(root, p)) for i, p in paths.items() if p is not None}
    report.videos = len(paths)
    distinct = list(dict.fromkeys(paths.values()))
    report.clips_probed = len(distinct)
    infos = dict(zip(distinct, probe_many(distinct, progress=progress)))
    bad = [(i, p, infos[p]) for i, p in paths.items() if isinstance(infos[p], str)]
    if bad and not skip_bad:
        named = "; ".join(f"record {i} (id {records[i].get('id')!r}): {p}: {why}" for i, p, why in bad[:SHOWN])
        more = f"; and {len(bad) - SHOWN:,} more" if len(bad) > SHOWN else ""
        raise InputError(
            f"{len(bad):,} clip(s) cannot be read: {named}{more}",
            where=f"{where}#{bad[0][0]}",
            fix="check the media root (--media-root, default: the annotations' folder) and the files; re-encode broken ones "
            "(ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4), or pass --skip-bad to leave their records out of the copy",
        )
    skipped = {i for i, _, _ in bad}
    report.skipped = [{"record": i, "id": records[i].get("id"), "video": p, "reason": why} for i, p, why in bad]
    out = []
    for index, record in enumerate(records):
        if index in skipped:
            continue
        path = paths.get(index)
        if path is None:
            out.append(record)
            continue
        fixed = _fix_one(record, infos[path].fields(), index, report)  # type: ignore[union-attr]
        out.append(fixed)
    return out, report


def _fix_one(record: dict[str, Any], measured: dict[str, Any], index: int, report: FixReport) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for name in CORRECTED:
        if _off(record.get(name), measured[name]):
            changes[name] = measured[name]
    for name in ADDED:
        if name not in record and not (name == "num_frames" and "frames" in record):
            changes[name] = measured[name]
    if not changes:
        return record
    report.changed_records += 1
    for name in changes:
        report.fields[name].note(index, name not in record)
    return {**record, **changes}


def fix_file(annotations: str, out: str, *, media: str = "", skip_bad: bool = False, progress: bool | None = None) -> FixReport:
    """Read `annotations`, write the corrected copy to `out` (atomically), return what changed."""
    from skillbank import atomic

    started = time.perf_counter()
    check_out(annotations, out)
    records = read_annotations(annotations)
    root = media_root(media, annotations)
    if not os.path.isdir(root):
        raise InputError(f"media root {root} is not a folder", where="--media-root", fix="pass --media-root DIR: the folder the records' video paths are relative to")
    fixed, report = fix_records(records, root, skip_bad=skip_bad, progress=progress, where=annotations)
    atomic.write_json(out, fixed, indent=1)
    report.annotations, report.out = annotations, out
    report.seconds = time.perf_counter() - started
    return report
