"""Reader: a Hugging Face dataset on disk, as parquet shards or a `datasets` save_to_disk folder.

Parquet: `data/<split>-00000-of-00001.parquet` (the Hub's layout), `<split>.parquet`, or shards in a
folder named after the split. save_to_disk: `dataset_dict.json` + one folder per split, or a single
dataset's `state.json`; its `.arrow` files are Arrow IPC streams. Both are read with pyarrow, a batch
at a time, so embedded clips never sit in memory all at once. The dataset's own splits are kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.intake.items import Read
from skillbank.intake.rows import RowReader, Spill

BATCH_ROWS = 256


def is_arrow_dataset(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def parquet_shards(source: Path) -> list[tuple[str, Path]]:
    """(split, shard) for every parquet file under source (a single .parquet file: split "train")."""
    if source.is_file():
        return [("train", source)]
    out = []
    for shard in sorted(source.rglob("*.parquet")):
        stem = shard.name.split(".", 1)[0]
        split = stem.split("-", 1)[0] if "-" in stem else stem
        if split.isdigit() or split in ("data", "default"):  # 0000.parquet in a folder named after its split
            split = shard.parent.name
        out.append((split, shard))
    return out


def arrow_shards(source: Path) -> list[tuple[str, Path]]:
    """(split, .arrow file) of a save_to_disk folder, in the dataset's own order."""
    if (source / "dataset_dict.json").is_file():
        splits = json.loads((source / "dataset_dict.json").read_text(encoding="utf-8")).get("splits") or []
        return [pair for split in splits for pair in _state_files(source / split, split)]
    return _state_files(source, None)


def _state_files(folder: Path, split: str | None) -> list[tuple[str, Path]]:
    state_path = folder / "state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        files = [folder / f["filename"] for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a readable save_to_disk folder: {exc}", where=str(state_path), fix="pass the folder `Dataset.save_to_disk` wrote") from None
    return [(split or state.get("_split") or "train", f) for f in files]


def _batches(fmt: str, path: Path) -> tuple[list[str], Iterator[Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if fmt == "parquet":
            handle = pq.ParquetFile(path)
            return handle.schema_arrow.names, handle.iter_batches(batch_size=BATCH_ROWS)
        try:
            reader = pa.ipc.open_stream(pa.memory_map(str(path)))
        except pa.ArrowInvalid:
            reader = pa.ipc.open_file(pa.memory_map(str(path)))
            return reader.schema.names, (reader.get_batch(i) for i in range(reader.num_record_batches))
        return reader.schema.names, iter(reader)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read this {fmt} file: {exc}", where=str(path), fix="check the file (a partial download?)") from None


def read_hf(source: Path, *, spill: Spill, media_root: Path | None = None, question_key: str | None = None,
            answer_key: str | None = None, video_key: str | None = None, on_clip: Callable[[str], None] | None = None, **_: Any) -> Read:
    fmt = "arrow" if source.is_dir() and is_arrow_dataset(source) else "parquet"
    shards = arrow_shards(source) if fmt == "arrow" else parquet_shards(source)
    if not shards:
        raise InputError("no parquet or arrow files", where=str(source), fix="pass the dataset folder (data/<split>-*.parquet or a save_to_disk folder)")
    root = media_root or (source if source.is_dir() else source.parent)
    out = Read(f"hf-{fmt}", root=Path(os.path.abspath(root)), on_clip=on_clip)
    base = source if source.is_dir() else source.parent
    reader: RowReader | None = None
    counts: dict[str, int] = {}
    for split, shard in shards:
        columns, batches = _batches(fmt, shard)
        if reader is None:
            reader = RowReader(out, columns, where=str(shard), media_root=root, spill=spill,
                               question_key=question_key, answer_key=answer_key, video_key=video_key)
        name = shard.relative_to(base).as_posix()
        for batch in batches:
            for row in batch.to_pylist():
                index = counts.get(split, 0)
                counts[split] = index + 1
                reader.add(row, f"{name}#{index}", f"{split}_{index:06d}", split)
    assert reader is not None
    reader.finish()
    out.notes["source_splits"] = counts
    return out
