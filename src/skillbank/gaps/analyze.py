"""DEFT gap analysis: an evaluation's results.json -> a parquet of the failures, each with its media
path, so the next round can curate data for exactly what the model gets wrong.

The comparison is the DEFT contract's: a record fails when `response.lower().strip() !=
gt.lower().strip()` (a null or missing response counts as ""). It is deliberately stricter than the
evaluation metrics (which also drop trailing punctuation): an answer outside the constrained format
("Yes, it is.") is a gap worth curating. When every ground truth is yes/no the task is binary with
"yes" positive, and each failure is labelled "FN" (the truth is yes) or "FP" (the truth is no; an
unparseable answer to a "no" question counts as a false alarm, as in the metrics); otherwise
"mismatch".

Both JSON files are read with `jsonarray.read_array` (Arrow, bounded memory); only failing ids are
looked up in the annotations. Paths may be local or fsspec URLs (s3://...). No torch here.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skillbank import atomic
from skillbank.data.media import media_root as resolve_media_root
from skillbank.errors import InputError
from skillbank.gaps.jsonarray import read_array

COLUMNS = ("video_id", "media_path", "question", "ground_truth", "response", "error_type")
RESULT_FIELDS = ("video_id", "question", "gt", "response")


def strings(*values: str) -> pa.Array:
    """A string array built from bytes. pa.array() / pa.scalar() on Python objects import pandas when
    it is installed (~0.3 s, to check for DataFrames): this module never calls them."""
    encoded = [v.encode() for v in values]
    offsets = [0]
    for e in encoded:
        offsets.append(offsets[-1] + len(e))
    buffers = [None, pa.py_buffer(struct.pack(f"<{len(offsets)}i", *offsets)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(values), buffers)


YES_NO = strings("yes", "no")
EMPTY, YES, FN, FP, MISMATCH, SLASH = strings("", "yes", "FN", "FP", "mismatch", "/")
SHOWN_MISSING = 5
COMPRESSION = "zstd"  # half the size of snappy, as fast to write here
DICTIONARY = ["question", "ground_truth", "response", "error_type"]  # repetitive columns; ids are unique


def _is_url(path: str) -> bool:
    return "://" in path


class _Local:
    """The few filesystem calls used here, for local paths (fsspec is imported only for URLs)."""

    isfile = staticmethod(os.path.isfile)
    isdir = staticmethod(os.path.isdir)

    @staticmethod
    def open(path: str, mode: str = "rb") -> IO[Any]:
        return open(path, mode)

    @staticmethod
    def glob(pattern: str) -> list[str]:
        return glob.glob(pattern, recursive=True)


def _filesystem(path: str) -> tuple[Any, str]:
    if not _is_url(path):
        return _Local, path
    import fsspec

    return fsspec.core.url_to_fs(path)


@contextmanager
def open_binary(path: str) -> Iterator[IO[bytes]]:
    """A seekable binary file, local or fsspec URL."""
    fs, inner = _filesystem(path)
    if not fs.isfile(inner):
        raise InputError(f"file not found: {path}", where=path, fix="check the URL and your credentials")
    with fs.open(inner, "rb") as f:
        yield f


def find_results_json(results_dir: str) -> str:
    """The results.json an evaluation wrote under `results_dir`.

    Order: `results_dir` itself when it is a .json file; `results_dir/results.json`; the best step's
    results.json named by `results_dir/best_checkpoint.json` (`skillbank evaluate --run`); else the
    only results.json anywhere below. Several candidates and no best_checkpoint.json is an error
    rather than a silent pick.
    """
    fs, root = _filesystem(results_dir)
    if root.endswith(".json") and fs.isfile(root):
        return results_dir
    if not fs.isdir(root):
        raise InputError(f"results dir not found: {results_dir}", where="--results-dir", fix="pass the evaluation's results_dir")
    direct = posixpath.join(root, "results.json")
    if fs.isfile(direct):
        return _unstrip(fs, results_dir, root, direct)
    best = posixpath.join(root, "best_checkpoint.json")
    if fs.isfile(best):
        with fs.open(best, "r") as f:
            chosen = json.load(f)
        beside = posixpath.join(root, f"step_{chosen.get('step')}", "results.json")  # still right after a copy
        if fs.isfile(beside):
            return _unstrip(fs, results_dir, root, beside)
        if chosen.get("results_json"):
            return str(chosen["results_json"])
    found = sorted(fs.glob(posixpath.join(root, "**", "results.json")))
    if not found:
        raise InputError(
            f"no results.json under {results_dir}",
            where="--results-dir",
            fix="run `skillbank evaluate --config FILE.toml` first; it writes results_dir/results.json",
        )
    if len(found) > 1:
        shown = ", ".join(found[:SHOWN_MISSING])
        raise InputError(
            f"{len(found)} results.json files under {results_dir} ({shown}{', ...' if len(found) > SHOWN_MISSING else ''})",
            where="--results-dir",
            fix="pass the folder of the one to analyse",
        )
    return _unstrip(fs, results_dir, root, found[0])


def _unstrip(fs: Any, original: str, root: str, path: str) -> str:
    """`path` (as the filesystem names it) spelled like the user's `original` spelling of `root`."""
    if not _is_url(original):
        return path
    base = root.rstrip("/")
    return original.rstrip("/") + path[len(base) :] if path.startswith(base) else fs.unstrip_protocol(path)


@dataclass
class _Failures:
    table: pa.Table  # the failing rows of results.json (RESULT_FIELDS) plus gt_norm
    total: int
    yes_no: bool  # every ground truth is yes/no
    unparseable: int  # responses that are neither yes nor no (after normalisation)


def _normalised(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.utf8_trim_whitespace(pc.utf8_lower(pc.fill_null(column, EMPTY)))


def _not_yes_no(column: pa.Array) -> pa.Array:
    """Mask of rows whose normalised value is not yes/no (only rows not already exactly yes/no are normalised)."""
    loose = pc.invert(pc.is_in(column, value_set=YES_NO))
    if not pc.any(loose).as_py():
        return loose
    still = pc.invert(pc.is_in(_normalised(pc.filter(column, loose)), value_set=YES_NO))
    return pc.replace_with_mask(loose, loose, still)


def _failures(results_json: str, threads: int) -> _Failures:
    kept: list[pa.Table] = []
    total, unparseable, yes_no = 0, 0, True
    with open_binary(results_json) as f:
        for table in read_array(f, RESULT_FIELDS, name=results_json, threads=threads):
            total += table.num_rows
            if not table.num_rows:
                continue
            gt = pc.fill_null(table["gt"].combine_chunks(), EMPTY)
            response = pc.fill_null(table["response"].combine_chunks(), EMPTY)
            if yes_no:
                yes_no = not pc.any(_not_yes_no(gt)).as_py()
            unparseable += pc.sum(_not_yes_no(response)).as_py() or 0
            # rows equal as written are equal normalised: normalise only the others
            candidates = table.filter(pc.not_equal(response, gt))
            gt_norm = _normalised(candidates["gt"])
            fail = pc.not_equal(_normalised(candidates["response"]), gt_norm)
            kept.append(candidates.append_column("gt_norm", gt_norm).filter(fail))
    failures = pa.concat_tables(kept) if kept else pa.table({f: pa.nulls(0, pa.string()) for f in (*RESULT_FIELDS, "gt_norm")})
    return _Failures(failures, total, yes_no and total > 0, unparseable)


def _annotation_videos(ids: pa.Array, annotations: str, threads: int) -> pa.Table:
    """(id, video) rows of the annotations whose id is one of `ids`, read in bounded memory."""
    wanted = ids.drop_null()  # duplicates are fine in a lookup set
    kept: list[pa.Table] = []
    batch: list[pa.Table] = []
    rows = 0
    flush_at = max(2 * len(wanted), 1 << 20)  # is_in rebuilds its hash set per call: call it rarely

    def flush() -> None:
        nonlocal rows
        if batch:
            table = pa.concat_tables(batch)
            kept.append(table.filter(pc.and_(pc.is_in(table["id"], value_set=wanted), pc.is_valid(table["video"]))))
            batch.clear()
            rows = 0

    with open_binary(annotations) as f:
        for table in read_array(f, ("id", "video"), name=annotations, threads=threads):
            batch.append(table)
            rows += table.num_rows
            if rows >= flush_at:
                flush()
    flush()
    return pa.concat_tables(kept) if kept else pa.table({"id": pa.nulls(0, pa.string()), "video": pa.nulls(0, pa.string())})


def _media_paths(ids: pa.Array, lookup: pa.Table, annotations: str, media_root: str) -> pa.Array:
    """Media path of each failing id; raises InputError naming the ids the annotations lack."""
    index = pc.index_in(ids, value_set=lookup["id"].combine_chunks())
    missing = pc.is_null(index)
    if pc.any(missing).as_py():
        absent = pc.unique(ids.filter(missing)).to_pylist()
        shown = ", ".join(repr(x) for x in absent[:SHOWN_MISSING])
        raise InputError(
            f"{len(absent)} failing video_id(s) of results.json are not in the annotations (or have no video): "
            f"{shown}{', ...' if len(absent) > SHOWN_MISSING else ''}",
            where=annotations,
            fix="pass the annotations file the evaluation read (dataset.annotation_path of its config)",
        )
    return _join_root(media_root, pc.take(lookup["video"].combine_chunks(), index))


def _join_root(media_root: str, video: pa.Array) -> pa.Array:
    """media_root/video for relative paths; absolute paths and URLs stay as they are."""
    if not media_root:
        return video
    root = media_root.rstrip("/") or "/"
    keep = pc.or_(pc.starts_with(video, "/"), pc.match_substring(video, "://"))
    relative = pc.binary_join_element_wise(strings(root)[0], video, SLASH)
    return pc.if_else(keep, video, relative)


def summary_path(out: str) -> str:
    """Where the summary JSON goes: next to the parquet, `NAME.summary.json`."""
    stem = out[: -len(".parquet")] if out.endswith(".parquet") else out
    return stem + ".summary.json"


def _write(out: str, table: pa.Table, summary: dict[str, Any]) -> None:
    if _is_url(out):
        import fsspec

        fs, inner = fsspec.core.url_to_fs(out)
        pq.write_table(table, inner, filesystem=fs, compression=COMPRESSION, use_dictionary=DICTIONARY)  # an object store publishes the object whole
        with fsspec.open(summary_path(out), "w") as f:
            f.write(json.dumps(summary, indent=2) + "\n")
        return
    with atomic.atomic_path(out) as tmp:
        pq.write_table(table, tmp, compression=COMPRESSION, use_dictionary=DICTIONARY)
    atomic.write_json(summary_path(out), summary)


def analyze_gaps(
    results_dir: str,
    out: str,
    *,
    annotations: str | None = None,
    media_root: str | None = None,
    threads: int = 2,
) -> dict[str, Any]:
    """Write the failures parquet (COLUMNS) and its summary JSON; return the summary."""
    results_json = find_results_json(results_dir)
    if annotations:
        media_root = resolve_media_root(media_root or "", annotations)
    fails = _failures(results_json, threads)
    table = fails.table
    ids = table["video_id"].combine_chunks()
    if annotations:
        media = _media_paths(ids, _annotation_videos(ids, annotations, threads), annotations, media_root or "")
    else:
        media = pa.nulls(table.num_rows, pa.string())
    if fails.yes_no:
        error_type = pc.if_else(pc.equal(table["gt_norm"], YES), FN, FP)
    else:
        error_type = pa.repeat(MISMATCH, table.num_rows)
    result = pa.table(
        {
            "video_id": ids,
            "media_path": media,
            "question": table["question"],
            "ground_truth": table["gt"],
            "response": table["response"],
            "error_type": error_type,
        }
    )
    counts = {row["values"]: row["counts"] for row in pc.value_counts(result["error_type"]).to_pylist()}
    summary: dict[str, Any] = {
        "results_json": results_json,
        "gaps_parquet": out,
        "total": fails.total,
        "failures": result.num_rows,
        "failure_rate": round(result.num_rows / fails.total, 6) if fails.total else 0.0,
        "task": "yes_no" if fails.yes_no else "open",
        "counts": {k: counts.get(k, 0) for k in (("FP", "FN") if fails.yes_no else ("mismatch",))},
        "annotations": annotations,
        "media_root": media_root if annotations else None,
    }
    if fails.yes_no:
        summary["unparseable_responses"] = fails.unparseable
    _write(out, result, summary)
    return summary
