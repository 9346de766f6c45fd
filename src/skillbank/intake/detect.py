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

FORMATS = ("clips", "hf", "csv", "jsonl", "llava", "messages")


def detect(source: Path) -> tuple[str, str]:
    """(format, why)."""
    from skillbank.intake.hf import is_arrow_dataset

    if source.is_file():
        suffix = source.suffix.lower()
        if suffix in (".csv", ".tsv"):
            return "csv", f"a {suffix} file"
        if suffix == ".parquet":
            return "hf", "a .parquet file"
        if suffix in (".json", ".jsonl", ".ndjson"):
            return _json_kind(source, suffix)
        raise InputError(f"cannot tell what kind of source this file is ({suffix or 'no suffix'})", where=str(source),
                         fix="pass --format csv, jsonl, messages or llava")
    from skillbank.intake.conversations import sniff, turn_list_key

    if not source.is_dir():
        raise InputError("no such file or folder", where=str(source), fix="pass the dataset folder or file")
    if is_arrow_dataset(source):
        marker = "dataset_dict.json" if (source / "dataset_dict.json").is_file() else "state.json"
        return "hf", f"a datasets save_to_disk folder ({marker})"
    if next(source.rglob("*.parquet"), None) is not None:
        return "hf", "parquet shards under the folder"
    for file in sorted(p for p in source.iterdir() if p.suffix.lower() in (".json", ".jsonl") and p.is_file()):
        if turn_list_key(sniff(file)[1]):
            raise InputError(f"the folder holds conversation records in {file.name}", where=str(source),
                             fix=f"pass the file itself: skillbank data import {file} --out DIR")
    has_video = has_label = False
    for path in source.rglob("*"):
        has_video = has_video or is_video(path)
        has_label = has_label or path.suffix.lower() == ".json"
        if has_video and has_label:
            return "clips", "video files and .json label files under the folder"
    raise InputError("the folder holds no parquet / arrow dataset and no clips with .json label files", where=str(source),
                     fix="pass --format, or a folder of clips with per-clip label files (seq001.mp4 + seq001.label.json)")


def _json_kind(source: Path, suffix: str) -> tuple[str, str]:
    """A .json / .jsonl file: conversation records (LLaVA, or the messages shape of LLaMA-Factory and
    ms-swift) in a JSON array or JSON lines, else JSON lines of rows (the jsonl table reader)."""
    from skillbank.intake.conversations import SHAPE, is_llava, keys_of, sniff, turn_list_key

    layout, first = sniff(source)
    what = "a JSON array" if layout == "array" else "JSON lines"
    key = turn_list_key(first)
    if key is not None:
        if layout == "array" and is_llava(first):
            return "llava", f"{what} of LLaVA records (conversations + video)"
        return "messages", f"{what} of records with {key}"
    if layout == "lines":
        return "jsonl", f"JSON lines of rows ({suffix})"
    if layout == "array":
        held = "no record" if first is None else f"records without conversations (the first has keys {keys_of(first)})"
        raise InputError(f"a JSON array of {held}", where=str(source),
                         fix=f"a JSON array is read as conversation records: {SHAPE}; rows of question / answer / video keys go one per line in a .jsonl file")
    raise InputError(f"a {suffix} file that is neither a JSON array nor JSON lines of objects", where=str(source),
                     fix=f"write a JSON array of records ({SHAPE}) or one JSON object per line")


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
    if fmt in ("llava", "messages"):
        from skillbank.intake import conversations

        return getattr(conversations, f"read_{fmt}")
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
