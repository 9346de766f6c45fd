"""A big top-level JSON array cut into parts that DuckDB reads side by side, and any part's records
read back exactly.

DuckDB's read_json parses one array file on one thread. Cut at guessed record boundaries
(skillbank.data.jsonarray: the comma before a record that opens like the first one), each part is
served to DuckDB as a small array of its own, `[` + part + `]`, through an fsspec filesystem
registered on the connection, so its threads parse parts in parallel; rows keep file order
(DuckDB keeps insertion order over the files of one scan, so a table's rowid is the record index).

The cuts need no trust. Part 0 starts right after the array's `[`; if it parses as an array, its
end was a top-level boundary (a cut inside a string leaves the string open, a cut inside a nested
value leaves a bracket open), so part 1 starts at a record, and so on: when every part parses, the
parts' elements are exactly the file's records, in order (two lists of values joined by a comma are
the list of both). When one does not, the caller reads the file whole (and its exact reader names
the line and column of a real syntax error).

A part is a few MiB, so the records behind a handful of rows (the ones a rule flagged, a random
sample) are read back by parsing only their parts, record by record, with Python's json scanner.
"""

from __future__ import annotations

import bisect
import io
import itertools
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from skillbank.data.jsonarray import WS, last_boundary, record_opening

PART_BYTES = 4 << 20  # a part's size: small enough to read back a few records cheaply, large enough for DuckDB
LARGE_FILE = 64 << 20  # from this size on, parts grow (part_size): DuckDB spends ~4 ms of CPU per part it opens
PARTS_PER_THREAD = 4  # enough to keep every thread busy when one is slowed
READ_BYTES = 1 << 20  # the most a read of a part returns
OPENING_WINDOW = 64 << 10
SEEK_WINDOW = 64 << 10  # bytes read before a cut point to find the record boundary there
PROTOCOL = "skillbank-parts"

_SCAN = json.JSONDecoder().scan_once  # the stdlib's C scanner: one record at a time, exactly as json.loads reads it
_SEP = re.compile(r"[ \t\r\n]*,[ \t\r\n]*")
_WS_TEXT = " \t\r\n"


@dataclass
class ArrayParts:
    """Byte ranges [start, end) of a file's top-level array, each a comma-separated run of records."""

    path: str
    bounds: list[tuple[int, int]]
    token: str = ""
    counts: list[int] = field(default_factory=list)  # rows per part, once a scan has counted them

    def urls(self) -> list[str]:
        return [f"{PROTOCOL}://{self.token}/{i}.json" for i in range(len(self.bounds))]

    def sql_list(self) -> str:
        """The parts as a DuckDB list of file names."""
        return "[" + ", ".join(f"'{u}'" for u in self.urls()) + "]"

    def read_json_sql(self, columns: dict[str, str], *, filename: bool = False) -> str:
        """read_json over the parts (rows in file order), `columns` {key: DuckDB type}; with
        `filename`, a `part` column numbers each row's part."""
        spec = ", ".join(f"{json.dumps(k)}: '{v}'" for k, v in columns.items())
        read = f"read_json({self.sql_list()}, format='array', columns={{{spec}}}{', filename=true' if filename else ''})"
        return f"(SELECT * EXCLUDE (filename), parse_filename(filename, true)::USMALLINT AS part FROM {read})" if filename else read

    def part_bytes(self, part: int) -> bytes:
        start, end = self.bounds[part]
        with open(self.path, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def iter_part(self, part: int) -> Iterator[Any]:
        """The records of one part, one at a time, as Python's json module reads them."""
        text = self.part_bytes(part).decode("utf-8")
        pos, end = len(text) - len(text.lstrip(_WS_TEXT)), len(text.rstrip(_WS_TEXT))
        while pos < end:
            value, pos = _SCAN(text, pos)
            yield value
            sep = _SEP.match(text, pos)
            if sep is None:
                if pos < end:
                    raise ValueError(f"part {part} of {self.path}: no ',' after a record at {self.bounds[part][0] + pos}")
                return
            pos = sep.end()

    def starts(self) -> list[int]:
        """The index of each part's first record (needs `counts`)."""
        return [0, *itertools.accumulate(self.counts)][:-1]

    def iter_records_at(self, indices: Iterable[int]) -> Iterator[tuple[int, Any]]:
        """(index, record) for record indices of the file, in order (needs `counts`); each part read
        once, up to its last wanted record, one record in memory at a time."""
        starts = self.starts()
        wanted: dict[int, list[int]] = {}
        for index in sorted(set(indices)):
            wanted.setdefault(bisect.bisect_right(starts, index) - 1, []).append(index)
        for part in sorted(wanted):
            offsets = [index - starts[part] for index in wanted[part]]
            records = self.iter_part(part)
            position = -1
            for offset in offsets:
                for position, record in zip(range(position + 1, offset + 1), records):
                    pass
                if position != offset:
                    raise ValueError(f"part {part} of {self.path} ends before record {offset}; DuckDB read {self.counts[part]}")
                yield starts[part] + offset, record

def part_size(con: Any, path: str, *, most: int) -> int:
    """The part size for the file at `path` read on `con`'s threads: PART_BYTES, or for a large
    file PARTS_PER_THREAD parts per thread, up to `most` (callers that read records back keep it small:
    reading one back parses its part up to it). 4 MiB parts cost preflight ~0.2 s of CPU more than 16 MiB
    ones on 1M records (244 MB), gaps 0.35 s more than 48 MiB ones on 1M results and annotations."""
    size = os.path.getsize(path)
    if size < LARGE_FILE:
        return PART_BYTES
    (threads,) = con.execute("SELECT current_setting('threads')").fetchone()
    return max(PART_BYTES, min(most, size // (PARTS_PER_THREAD * max(1, int(threads)))))


def split_array(path: str, part_bytes: int | None = None) -> ArrayParts | None:
    """The file's array cut into parts of about `part_bytes`; None when it is not a plain array of
    objects (no `[` first, no learnable record opening, anything but whitespace after the `]`):
    the caller then reads the file whole."""
    part_bytes = part_bytes or PART_BYTES
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(OPENING_WINDOW)
        start = _array_start(head)
        if start is None:
            return None
        opening = record_opening(head, start)
        end = _array_end(f, size)
        if opening is None or end is None or end <= start:
            return None
        bounds: list[tuple[int, int]] = []
        lo = start
        while end - lo > part_bytes + part_bytes // 2:
            cut = _cut(f, lo, part_bytes, opening)
            if cut is None:  # a record larger than a part: take the rest whole
                break
            bounds.append((lo, cut[0]))
            lo = cut[1]
        bounds.append((lo, end))
    return register(ArrayParts(path, bounds))


def _cut(f: Any, lo: int, part_bytes: int, opening: bytes) -> tuple[int, int] | None:
    """(comma, next record) of the last guessed boundary before lo + part_bytes, in file offsets;
    only the bytes just before that point are read, more while no boundary shows."""
    hi = lo + part_bytes + len(opening)
    back = SEEK_WINDOW
    while True:
        begin = max(lo, hi - back)
        f.seek(begin)
        window = f.read(hi - begin)
        cut = last_boundary(window, opening, 1 if begin == lo else 0, len(window))
        if cut is not None and begin + cut[0] > lo:
            return begin + cut[0], begin + cut[1]
        if begin == lo:
            return None
        back *= 8


def _array_start(head: bytes) -> int | None:
    """Where the first record starts: after a BOM, whitespace, `[` and whitespace."""
    pos = 3 if head.startswith(b"\xef\xbb\xbf") else 0
    pos += len(head[pos:]) - len(head[pos:].lstrip(WS))
    if head[pos : pos + 1] != b"[":
        return None
    pos += 1
    return pos + len(head[pos:]) - len(head[pos:].lstrip(WS))


def _array_end(f: Any, size: int) -> int | None:
    """Where the last record ends: before whitespace, `]` and whitespace at the end of the file."""
    tail_size = min(size, OPENING_WINDOW)
    f.seek(size - tail_size)
    tail = f.read(tail_size).rstrip(WS)
    if not tail.endswith(b"]"):
        return None
    return size - tail_size + len(tail[:-1].rstrip(WS))


# ---- the filesystem DuckDB reads the parts through -----------------------------------------------

_LOCK = threading.Lock()
_PARTS: dict[str, ArrayParts] = {}
_COUNTER = itertools.count()


def register(parts: ArrayParts) -> ArrayParts:
    with _LOCK:
        parts.token = f"{os.getpid()}-{next(_COUNTER)}"
        _PARTS[parts.token] = parts
    return parts


def release(parts: ArrayParts) -> None:
    with _LOCK:
        _PARTS.pop(parts.token, None)


def attach(con: Any) -> None:
    """Register the parts filesystem on a DuckDB connection (once)."""
    if not con.filesystem_is_registered(PROTOCOL):
        con.register_filesystem(_filesystem())


def _locate(path: str) -> tuple[ArrayParts, int]:
    token, _, name = path.split("://", 1)[-1].rpartition("/")
    return _PARTS[token], int(name.split(".", 1)[0])


class _PartFile(io.RawIOBase):
    """`[` + the part's bytes + `]`, read from the file with pread (one copy per read)."""

    def __init__(self, parts: ArrayParts, part: int) -> None:
        super().__init__()
        self.start, end = parts.bounds[part]
        self.size = end - self.start + 2
        self.pos = 0
        self.fd = os.open(parts.path, os.O_RDONLY)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def read(self, n: int = -1) -> bytes:
        """At most READ_BYTES a call (DuckDB reads on until it gets nothing): fresh multi-MiB byte
        strings would cost page faults on every call, twice DuckDB's own parsing time."""
        end = min(self.size, self.pos + READ_BYTES) if n is None or n < 0 else min(self.size, self.pos + n, self.pos + READ_BYTES)
        if end <= self.pos:
            return b""
        lo, hi = max(self.pos, 1), min(end, self.size - 1)  # inner bytes [lo, hi) of the virtual file
        data = os.pread(self.fd, hi - lo, self.start + lo - 1) if hi > lo else b""
        if self.pos == 0 or end == self.size:
            data = b"".join((b"[" if self.pos == 0 else b"", data, b"]" if end == self.size else b""))
        self.pos = end
        return data

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def _filesystem() -> Any:
    from fsspec.spec import AbstractFileSystem

    class PartsFileSystem(AbstractFileSystem):
        protocol = PROTOCOL
        cachable = False

        def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            return _PartFile(*_locate(path))

        def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
            parts, part = _locate(path)
            start, end = parts.bounds[part]
            return {"name": path, "size": end - start + 2, "type": "file"}

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
            return [self.info(path)] if detail else [path]

    return PartsFileSystem()
