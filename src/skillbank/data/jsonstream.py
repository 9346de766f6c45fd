"""Stream the records of a top-level JSON array in batches, without holding the file in memory.

Why not `json.load`: a 1M-record annotations file costs seconds and gigabytes that way, which is
why the public preflight samples 20 records and misses the bad one. Why not a pure-Python
streaming parser: too slow. Here:

- Fast path: the buffer is cut at the last guessed record boundary (skillbank.data.jsonarray: the
  comma before the last record opening like the first one, for example `{\\n    "id"`) and the
  piece is parsed as one JSON array by a C parser. The cut needs no trust: the piece starts at a
  record start, so it parses as an array only if the cut falls exactly after a top-level record.
- Exact path: whenever the fast path cannot be used or fails (no learned opening, a cut inside a
  nested object, a syntax error, NaN that the fast parser refuses), that buffer is read record by
  record with the stdlib scanner, which also gives the line and column of a syntax error.

Either way every record is parsed, in file order, and nothing is kept once its batch is yielded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from skillbank.data.jsonarray import WS, last_boundary, record_opening

try:  # a faster C parser when installed; the result is the same (the exact path is the stdlib's)
    import orjson as _orjson

    _fast_loads = _orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _fast_loads = json.loads

CHUNK = 512 << 10
OPENING_WINDOW = 64 << 10  # bytes read at the start to learn how records open
_SEP = re.compile(r"[ \t\r\n]*,[ \t\r\n]*")
_END = re.compile(r"[ \t\r\n]*\]")
_SCAN = json.JSONDecoder().scan_once


class ArrayFormatError(Exception):
    """The file is not a well-formed JSON array: message with 1-based line and column."""

    def __init__(self, message: str, *, line: int, column: int, index: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.column, self.index = message, line, column, index

    def __str__(self) -> str:
        return f"{self.message} (line {self.line}, column {self.column})"


def iter_batches(path: str, chunk_size: int = CHUNK) -> Iterator[list[Any]]:
    """Yield the array's elements in consecutive batches (lists), in file order."""
    with open(path, "rb") as f:
        yield from _Reader(f, chunk_size).batches()


def _utf8_prefix(data: bytes) -> int:
    """Length of `data` without a UTF-8 sequence cut at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # lead byte: complete if the sequence fits
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


class _Reader:
    def __init__(self, f: BinaryIO, chunk_size: int) -> None:
        self.f, self.chunk_size = f, chunk_size
        self.buf = b""
        self.eof = False
        self.offset = 0  # bytes of the file before buf
        self.index = 0  # records yielded so far
        self.opening: bytes | None = None  # how the first record opens, e.g. b'{"id"'

    # -- buffer ----------------------------------------------------------------------------------
    def _fill(self, at_least: int) -> None:
        parts = [self.buf]
        size = len(self.buf)
        while size < at_least and not self.eof:
            data = self.f.read(max(self.chunk_size, at_least - size))
            if not data:
                self.eof = True
                break
            parts.append(data)
            size += len(data)
        self.buf = b"".join(parts)

    def _consume(self, n: int) -> None:
        self.offset += n
        self.buf = self.buf[n:]

    def _error(self, message: str, pos: int, index: int | None = None) -> ArrayFormatError:
        """An error at byte `pos` of the buffer, with its line and column in the file.

        Lines are counted only here (re-reading the file up to the error), never on the fast path.
        """
        target = self.offset + pos
        lines, line_start, done = 0, 0, 0
        with open(self.f.name, "rb") as again:
            while done < target:
                data = again.read(min(self.chunk_size, target - done))
                if not data:
                    break
                newlines = data.count(b"\n")
                if newlines:
                    lines += newlines
                    line_start = done + data.rfind(b"\n") + 1
                done += len(data)
            again.seek(line_start)
            prefix = again.read(target - line_start).decode("utf-8", "replace")
        return ArrayFormatError(message, line=lines + 1, column=len(prefix) + 1, index=index)

    # -- the array -------------------------------------------------------------------------------
    def batches(self) -> Iterator[list[Any]]:
        self._open_array()
        while self.buf or not self.eof:
            self._fill(self.chunk_size)
            batch = self._fast() if self.opening else None
            if batch is None:
                batch, done = self._exact()
                if batch:
                    self.index += len(batch)
                    yield batch
                if done:
                    return
                continue
            self.index += len(batch)
            yield batch

    def _open_array(self) -> None:
        self._fill(self.chunk_size)
        if self.buf.startswith(b"\xef\xbb\xbf"):
            self._consume(3)
        self._skip_ws()
        if not self.buf:
            raise self._error("the file is empty; annotations must be a JSON array of records", 0)
        if self.buf[:1] != b"[":
            raise self._error(self._not_an_array(), 0)
        self._consume(1)
        self._skip_ws()
        self._fill(OPENING_WINDOW)
        self.opening = record_opening(self.buf)

    def _not_an_array(self) -> str:
        first = self.buf[:1]
        if first == b"{":
            while b"\n" not in self.buf and not self.eof and len(self.buf) < (64 << 20):
                self._fill(len(self.buf) + self.chunk_size)
            line, _, rest = self.buf.partition(b"\n")
            try:
                json.loads(line)
                if rest.lstrip(WS)[:1] == b"{":
                    return "the file looks like JSON Lines (one object per line); annotations must be one JSON array [{...}, {...}]"
            except ValueError:
                pass
            return "the file holds a JSON object; annotations must be a JSON array of records [{...}, {...}]"
        return f"annotations must be a JSON array of records; the file starts with {first.decode('utf-8', 'replace')!r}"

    def _skip_ws(self) -> None:
        while True:
            stripped = self.buf.lstrip(WS)
            self._consume(len(self.buf) - len(stripped))
            if self.buf or self.eof:
                return
            self._fill(self.chunk_size)

    # -- fast path -------------------------------------------------------------------------------
    def _fast(self) -> list[Any] | None:
        """Parse up to the last learned record boundary in the buffer; None when that fails."""
        boundary = last_boundary(self.buf, self.opening)
        if boundary is None:
            return None
        comma, following = boundary
        try:
            batch = _fast_loads(b"".join((b"[", memoryview(self.buf)[:comma], b"]")))
        except (ValueError, RecursionError):
            return None
        self._consume(following)
        return batch

    # -- exact path ------------------------------------------------------------------------------
    def _exact(self) -> tuple[list[Any], bool]:
        """Records of the buffer one by one; (records, reached the end of the array)."""
        while True:
            usable = len(self.buf) if self.eof else _utf8_prefix(self.buf)
            try:
                text = self.buf[:usable].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self._error(f"the file is not valid UTF-8 ({exc.reason})", exc.start, self.index) from None
            records, pos, done, problem = self._scan(text)
            if records or done:
                self._consume(len(text[:pos].encode("utf-8")) if len(text) != usable else pos)
                return records, done
            if problem is not None:  # an error at the first record
                raise problem
            # the first record is cut by the buffer end: read as much again (a huge record costs
            # a few re-reads, not one per chunk)
            self._fill(2 * len(self.buf) + self.chunk_size)

    def _scan(self, text: str) -> tuple[list[Any], int, bool, ArrayFormatError | None]:
        records: list[Any] = []
        pos, size = 0, len(text)
        if self.index == 0 and text[:1] == "]":  # []
            self._check_tail(text, 1)
            return records, 1, True, None
        while True:
            index = self.index + len(records)
            try:
                record, end = _SCAN(text, pos)
            except StopIteration as stop:  # no value where one must start (stop.value: where)
                at = stop.value if isinstance(stop.value, int) else pos
                if self._maybe_cut(text, at):
                    return records, pos, False, None
                if at == pos and text[pos : pos + 1] == "]":
                    what = "a ',' before ']' (trailing comma): remove it"
                elif at == pos:
                    what = f"expected record {index} (a JSON object)"
                else:
                    what = f"invalid JSON in record {index}: expecting a value"
                return self._fail(records, pos, self._text_error(text, self._at_end(what, at, text), at, index))
            except json.JSONDecodeError as exc:
                if self._maybe_cut(text, exc.pos, pos, exc.msg):
                    return records, pos, False, None
                return self._fail(records, pos, self._text_error(text, self._at_end(f"invalid JSON in record {index}: {exc.msg}", exc.pos, text), exc.pos, index))
            records.append(record)
            sep = _SEP.match(text, end)
            if sep is not None and sep.end() < size:
                pos = sep.end()
                continue
            close = _END.match(text, end)
            if close is not None:
                self._check_tail(text, close.end())
                return records, close.end(), True, None
            if self._maybe_cut(text, end):
                records.pop()  # read it again with what follows, to see its separator
                return records, pos, False, None
            records.pop()  # the error is raised when this record comes first
            at = end + len(text[end:]) - len(text[end:].lstrip())
            message = self._at_end(f"expected ',' or ']' after record {index}", end, text)
            return self._fail(records, pos, self._text_error(text, message, at, index))

    def _at_end(self, message: str, pos: int, text: str) -> str:
        if self.eof and not text[pos:].strip():
            return "the file ends inside the array (is the closing ']' missing, or the file truncated?)"
        return message

    def _fail(self, records: list[Any], pos: int, error: ArrayFormatError) -> tuple[list[Any], int, bool, ArrayFormatError]:
        """Hand back the good records first; the error is raised once its record comes first."""
        if records:
            return records, pos, False, error
        raise error

    def _maybe_cut(self, text: str, err_pos: int, start: int | None = None, msg: str = "") -> bool:
        """Whether a failure can be the buffer end cutting a record (so reading more may fix it)."""
        if self.eof:
            return False
        if msg.startswith("Unterminated string") and start is not None:
            return len(text) - start < (256 << 20)
        return len(text) - err_pos < (1 << 20)

    def _text_error(self, text: str, message: str, pos: int, index: int) -> ArrayFormatError:
        return self._error(message, len(text[:pos].encode("utf-8")), index)

    def _check_tail(self, text: str, pos: int) -> None:
        """Only whitespace may follow the closing ']'."""
        rest = text[pos:]
        junk = len(rest) - len(rest.lstrip())
        if rest.strip():
            raise self._error("unexpected content after the closing ']' of the array", len(text[: pos + junk].encode("utf-8")))
        while not self.eof:
            data = self.f.read(self.chunk_size)
            if not data:
                self.eof = True
            elif data.strip(WS):
                lead = len(data) - len(data.lstrip(WS))
                self.offset += len(self.buf)
                self.buf = data
                raise self._error("unexpected content after the closing ']' of the array", lead)
            else:
                self.offset += len(self.buf) + len(data)
                self.buf = b""
