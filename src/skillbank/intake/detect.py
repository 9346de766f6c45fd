"""Which reader a SOURCE needs, said out loud: the format and the evidence, or an error naming --format.

Never a silent guess: each rule names what it saw ("dataset_dict.json", "*.parquet under data/"), and
the import report carries it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.intake.items import Read, is_video

FORMATS = ("clips", "hf", "csv", "jsonl", "llava")


def detect(source: Path) -> tuple[str, str]:
    """(format, why)."""
    from skillbank.intake.hf import is_arrow_dataset
    from skillbank.intake.llava import looks_like_llava

    if source.is_file():
        suffix = source.suffix.lower()
        if suffix in (".csv", ".tsv"):
            return "csv", f"a {suffix} file"
        if suffix in (".jsonl", ".ndjson"):
            return "jsonl", f"a {suffix} file"
        if suffix == ".parquet":
            return "hf", "a .parquet file"
        if suffix == ".json" and looks_like_llava(source):
            return "llava", "a JSON array of records with conversations"
        raise InputError(f"cannot tell what kind of source this file is ({suffix or 'no suffix'})", where=str(source),
                         fix="pass --format csv, jsonl or llava (a LLaVA annotations file is a JSON array of records with conversations)")
    if not source.is_dir():
        raise InputError("no such file or folder", where=str(source), fix="pass the dataset folder or file")
    if is_arrow_dataset(source):
        marker = "dataset_dict.json" if (source / "dataset_dict.json").is_file() else "state.json"
        return "hf", f"a datasets save_to_disk folder ({marker})"
    if next(source.rglob("*.parquet"), None) is not None:
        return "hf", "parquet shards under the folder"
    if (source / "annotations.json").is_file() and looks_like_llava(source / "annotations.json"):
        raise InputError("the folder holds a LLaVA annotations.json", where=str(source),
                         fix=f"pass the file itself: skillbank data import {source / 'annotations.json'} --out DIR")
    has_video = has_label = False
    for path in source.rglob("*"):
        has_video = has_video or is_video(path)
        has_label = has_label or path.suffix.lower() == ".json"
        if has_video and has_label:
            return "clips", "video files and .json label files under the folder"
    raise InputError("the folder holds no parquet / arrow dataset and no clips with .json label files", where=str(source),
                     fix="pass --format, or a folder of clips with per-clip label files (seq001.mp4 + seq001.label.json)")


def reader(fmt: str) -> Callable[..., Read]:
    """The reader function of a format (imported on demand: pyarrow / duckdb only when used)."""
    if fmt == "clips":
        from skillbank.intake.clips import read_clips

        return read_clips
    if fmt == "hf":
        from skillbank.intake.hf import read_hf

        return read_hf
    if fmt in ("csv", "jsonl"):
        from skillbank.intake import tables

        return getattr(tables, f"read_{fmt}")
    if fmt == "llava":
        from skillbank.intake.llava import read_llava

        return read_llava
    raise InputError(f"unknown format {fmt!r}", where="--format", fix=f"one of: {', '.join(FORMATS)}")


def read(source: Path, fmt: str | None, **options: Any) -> tuple[Read, str]:
    """Run the right reader: (what it read, why that reader)."""
    if fmt:
        why = "--format"
        if (fmt == "clips") != source.is_dir() and fmt != "hf":
            want = "a folder" if fmt == "clips" else "a file"
            raise InputError(f"--format {fmt} reads {want}", where=str(source), fix="pass the right SOURCE, or let the format be detected")
    else:
        fmt, why = detect(source)
    return reader(fmt)(source, **options), why
