"""Read a top-level JSON array of objects (results.json, LLaVA annotations) into Arrow tables, fast
and in bounded memory.

`json.load` of a 1M-record file builds a Python dict per record (~2 GiB for results + annotations).
pyarrow's C++ JSON reader is ~10x faster but reads only a stream of objects, not one array. So we
cut the file into pieces of complete records and wrap each as one object, `{"r":[ piece ]}`,
parsed with an explicit schema that keeps only the fields asked for (the rest, e.g. LLaVA
`conversations`, is skipped by the parser without being built). Pieces are parsed on a small
thread pool (pyarrow releases the GIL); only a few pieces are in memory at a time. A local file is
memory-mapped: each piece is a private copy-on-write map with the wrapper written over the bytes
around it, so the parser reads the page cache directly (other sources are read into reused buffers).

Where to cut: skillbank.data.jsonarray's guess, shared with preflight's reader (the first record
shows how every record opens, e.g. `{\n    "id"`; a cut goes at the comma before the last such
opening in a piece). That guess is checked, not trusted: wrapped as above, a piece parses to
exactly one row if and only if it is a run of complete top-level records (a cut inside a string or
a nested object leaves the wrapper unbalanced). A piece that fails (a bad guess, a number where a
string is expected, or invalid JSON) is re-read from its start, which is known good, with Python's
json decoder one record at a time; values that are not strings are kept as their JSON text
(3 -> "3"). Genuinely invalid JSON then raises InputError with the byte offset.
"""

from __future__ import annotations

import codecs
import io
import json
import mmap
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

import pyarrow as pa
import pyarrow.json as pa_json

from skillbank.data.jsonarray import WS, last_boundary, record_opening
from skillbank.errors import InputError

CHUNK_BYTES = 16 << 20
_BOM = b"\xef\xbb\xbf"
_HEAD = b'{"r":['
_TAIL = b"]}\n"


def read_array(
    source: IO[bytes],
    fields: Sequence[str],
    *,
    name: str = "input",
    chunk_bytes: int = CHUNK_BYTES,
    threads: int = 2,
) -> Iterator[pa.Table]:
    """Yield tables (one string column per field, null where absent) for the array's records, in order.

    `source` is a binary file object that can seek (a local file or an fsspec file).
    """
    reader = _ArrayReader(source, list(fields), name, chunk_bytes)
    yield from reader.tables(threads)


class _ArrayReader:
    def __init__(self, source: IO[bytes], fields: list[str], name: str, chunk_bytes: int) -> None:
        self.f = source
        self.fields = fields
        self.name = name
        self.chunk = chunk_bytes
        struct = pa.struct([(f, pa.string()) for f in fields])
        self.schema = pa.schema([("r", pa.list_(struct))])
        self.empty = pa.table({f: pa.nulls(0, pa.string()) for f in fields})
        self.free: list[bytearray] = []  # piece buffers back from the parser: reused, never re-zeroed
        self.start, self.signature = self._head()
        self.fileno, self.size, self.whole = _mappable(source)

    # -- the head: '[' and how the first record opens -------------------------------------------
    def _head(self) -> tuple[int, bytes | None]:
        self.f.seek(0)
        head = self.f.read(1 << 16)
        i = len(_BOM) if head.startswith(_BOM) else 0
        while i < len(head) and head[i] in WS:
            i += 1
        if i >= len(head) or head[i] != ord("["):
            raise InputError(
                f"{self.name} is not a JSON array",
                where=self.name,
                fix="it must be a list of objects: [{...}, {...}]",
            )
        start = i + 1
        j = start
        while j < len(head) and head[j] in WS:
            j += 1
        return start, record_opening(head, j)  # None (empty array, odd layout, a huge gap): the exact path reads it

    # -- pieces of complete records, cut by the signature guess ---------------------------------
    def _pieces(self, offset: int, *, last_only: bool = False, stop: int | None = None) -> Iterator[tuple[int, memoryview, Any]]:
        """Yield (file offset, wrapped piece, its buffer) from `offset` (just after '[' or a top-level ',').

        Each piece is read straight into a buffer that already holds the wrapper's head, and the
        wrapper's tail is written over the cut comma: no copy of the data besides the carried tail.
        `stop` (a known cut) reads just the one piece before it; `last_only` the rest of the file.
        """
        self.f.seek(offset)
        carry = b""
        want = self.chunk if not last_only else self.size - offset + 1
        if stop is not None:
            buf = self._buffer(len(_HEAD) + stop - offset + len(_TAIL))
            buf[: len(_HEAD)] = _HEAD
            end = len(_HEAD) + self._fill(memoryview(buf)[len(_HEAD) : len(_HEAD) + stop - offset])
            buf[end : end + len(_TAIL)] = _TAIL
            yield offset, memoryview(buf)[: end + len(_TAIL)], buf
            return
        while True:
            buf = self._buffer(len(_HEAD) + want + len(_TAIL))
            buf[: len(_HEAD)] = _HEAD
            body = len(_HEAD)
            buf[body : body + len(carry)] = carry
            n = len(carry) + self._fill(memoryview(buf)[body + len(carry) : body + want])
            if n < want:  # the end of the file: the piece runs to the closing ']'
                end = body + n
                while end > body and buf[end - 1] in WS:
                    end -= 1
                if end == body or buf[end - 1] != ord("]"):
                    raise InputError(f"{self.name} ends before its closing ']'", where=self.name, fix="the file is truncated; regenerate it")
                buf[end - 1 : end - 1 + len(_TAIL)] = _TAIL
                yield offset, memoryview(buf)[: end - 1 + len(_TAIL)], buf
                return
            cut = self._cut(buf, body, body + n)
            if cut is None:
                carry, want = bytes(buf[body : body + n]), want * 2  # one record larger than a chunk
                continue
            carry = bytes(buf[cut + 1 : body + n])
            buf[cut : cut + len(_TAIL)] = _TAIL
            yield offset, memoryview(buf)[: cut + len(_TAIL)], buf
            offset += cut + 1 - body
            want = self.chunk

    def _pieces_mapped(self, offset: int) -> Iterator[tuple[int, memoryview, Any]]:
        """As _pieces, for a local file: each piece is a private copy-on-write map of its bytes, with the
        wrapper written over the 6 bytes before it and the comma after it (a page or two copied), so the
        parser reads the page cache directly: no copy of the data at all.
        """
        size, whole = self.size, self.whole
        want = self.chunk
        while True:
            hi = offset + want
            cut = self._cut(whole, offset, hi) if hi < size else None
            if cut is None and hi < size:
                want *= 2  # one record larger than a chunk
                continue
            if cut is None or offset < len(_HEAD) or cut + len(_TAIL) > size:
                # the first piece (nothing before it to write over) and the last: copy them
                yield from self._pieces(offset, last_only=cut is None, stop=cut)
                if cut is None:
                    return
            else:
                base = (offset - len(_HEAD)) // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
                piece = mmap.mmap(self.fileno, cut + len(_TAIL) - base, offset=base, access=mmap.ACCESS_COPY)
                head = offset - len(_HEAD) - base
                piece[head : head + len(_HEAD)] = _HEAD
                piece[cut - base : cut - base + len(_TAIL)] = _TAIL
                yield offset, memoryview(piece)[head:], piece
            offset = cut + 1
            want = self.chunk

    def _buffer(self, size: int) -> bytearray:
        while self.free:
            buf = self.free.pop()
            if len(buf) >= size:
                return buf
        return bytearray(size)

    def _fill(self, view: memoryview) -> int:
        """Read into `view` until it is full or the file ends (a stream may return less)."""
        got = 0
        while got < len(view):
            n = self.f.readinto(view[got:])
            if not n:
                break
            got += n
        return got

    def _cut(self, buf: bytearray, lo: int, hi: int) -> int | None:
        """Index of the comma before the last record opening in buf[lo:hi] (a guess, checked by parsing)."""
        boundary = last_boundary(buf, self.signature, lo, hi)
        return boundary[0] if boundary else None

    def _parse(self, wrapped: memoryview) -> pa.Table:
        """Parse a wrapped piece with pyarrow; raises an Arrow error unless it is a run of whole records."""
        if len(wrapped) < 64:  # maybe no record at all: '[]' or whitespace
            inner = bytes(wrapped[len(_HEAD) : len(wrapped) - len(_TAIL)])
            if not inner.strip(WS):
                return self.empty
        table = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(wrapped)),
            read_options=pa_json.ReadOptions(block_size=len(wrapped) + 1, use_threads=False),
            parse_options=pa_json.ParseOptions(
                explicit_schema=self.schema, unexpected_field_behavior="ignore", newlines_in_values=False
            ),
        )
        if table.num_rows != 1:
            raise pa.ArrowInvalid("a piece did not parse to one wrapped array")
        column = table.column(0)
        values = column.chunk(0).flatten() if column.num_chunks == 1 else pa.concat_arrays([c.flatten() for c in column.chunks])
        if values.null_count:
            raise pa.ArrowInvalid("an element of the array is not an object")
        return pa.Table.from_struct_array(values)

    # -- the exact path: Python's decoder, one record at a time ---------------------------------
    def _exact(self, offset: int) -> tuple[pa.Table, int | None]:
        """Decode about one chunk of records from `offset`; return them and where the next piece starts
        (None at the end of the array)."""
        self.f.seek(offset)
        utf8 = codecs.getincrementaldecoder("utf-8")()
        decoder = json.JSONDecoder()
        text, eof = "", False
        rows: dict[str, list[str | None]] = {f: [] for f in self.fields}
        i = 0
        record = 0

        def more() -> bool:
            nonlocal text, eof
            if eof:
                return False
            data = self.f.read(self.chunk)
            eof = len(data) < self.chunk
            try:
                text += utf8.decode(data, final=eof)
            except UnicodeDecodeError as exc:
                raise InputError(f"{self.name} is not valid UTF-8 near byte {offset + exc.start}", where=self.name) from None
            return True

        def skip_ws() -> str:
            nonlocal i
            while True:
                while i < len(text) and text[i] in " \t\r\n":
                    i += 1
                if i < len(text) or not more():
                    return text[i] if i < len(text) else ""

        more()
        consumed_goal = self.chunk
        while True:
            ch = skip_ws()
            if ch == "]" and record == 0:
                return self._table(rows), None
            while True:
                try:
                    obj, end = decoder.raw_decode(text, i)
                    break
                except json.JSONDecodeError as exc:
                    if not more():
                        at = offset + len(text[: exc.pos].encode("utf-8"))
                        raise InputError(
                            f"{self.name} is not valid JSON near byte {at}: {exc.msg}", where=self.name,
                            fix="fix or regenerate the file (it must be one JSON array of objects)",
                        ) from None
            if not isinstance(obj, dict):
                raise InputError(f"{self.name}: an element of the array is not an object (near byte {offset})", where=self.name)
            for f in self.fields:
                rows[f].append(_as_text(obj.get(f)))
            record += 1
            i = end
            ch = skip_ws()
            if ch == "]":
                return self._table(rows), None
            if ch != ",":
                at = offset + len(text[:i].encode("utf-8"))
                raise InputError(f"{self.name} is not valid JSON near byte {at}: expected ',' or ']'", where=self.name)
            i += 1
            if i >= consumed_goal:
                return self._table(rows), offset + len(text[:i].encode("utf-8"))

    def _release(self, owner: Any) -> None:
        if isinstance(owner, bytearray):
            self.free.append(owner)
            return
        try:
            owner.close()  # unmap now rather than at garbage collection (keeps peak RSS low)
        except BufferError:
            pass  # a view is still alive somewhere: the map goes when it does

    def _table(self, rows: dict[str, list[str | None]]) -> pa.Table:
        return pa.table({f: pa.array(v, pa.string()) for f, v in rows.items()})

    # -- the pipeline --------------------------------------------------------------------------
    def tables(self, threads: int) -> Iterator[pa.Table]:
        offset: int | None = self.start
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            while offset is not None:
                pending: deque[tuple[int, Future[pa.Table], Any]] = deque()
                pieces = self._pieces_mapped(offset) if self.whole is not None else self._pieces(offset)
                failed_at: int | None = None
                exhausted = False
                while True:
                    while not exhausted and len(pending) <= threads:
                        try:
                            at, piece, buf = next(pieces)
                        except StopIteration:
                            exhausted = True
                            break
                        pending.append((at, pool.submit(self._parse, piece), buf))
                        del piece
                    if not pending:
                        break
                    at, future, owner = pending.popleft()
                    try:
                        table = future.result()
                    except (pa.ArrowException, OverflowError):
                        failed_at = at
                        break
                    self._release(owner)  # the table owns copies of its values
                    yield table
                for _, other, _ in pending:
                    other.cancel()  # a piece still parsing keeps its buffer; it is dropped after
                if failed_at is None:
                    return
                table, offset = self._exact(failed_at)
                yield table


def _mappable(source: IO[bytes]) -> tuple[int, int, Any]:
    """(fileno, size, a read-only map of the whole file) for a plain local file; (-1, 0, None) otherwise."""
    try:
        fileno = source.fileno()
        size = os.fstat(fileno).st_size
        if size == 0 or not isinstance(source, io.BufferedReader):
            return -1, 0, None
        return fileno, size, mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return -1, 0, None


def _as_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
