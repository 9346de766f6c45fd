"""Where a big top-level JSON array of records can be cut between two records, found without parsing.

Both readers of big annotation arrays (preflight's record stream, gap analysis's Arrow reader) hand
runs of whole records to a C parser. Finding the boundaries exactly would mean following strings,
escapes and nesting in Python, slower than the parse itself, so the boundary is a guess: the records
of one file open alike (`{`, its whitespace, its first key, e.g. `{\\n    "id"`), and a cut goes at the
comma before the last such opening. The guess can be wrong (that text inside a string, or in a
nested list of objects); the readers check it by parsing the piece, which succeeds only for a run of
whole top-level records, and read the piece with an exact decoder when it fails.
"""

from __future__ import annotations

import re

WS = b" \t\r\n"
_OPENING = re.compile(rb'\{[ \t\r\n]*"(?:[^"\\]|\\.)*"')


def record_opening(data: bytes | bytearray, start: int = 0) -> bytes | None:
    """How the record at data[start] opens: `{`, its whitespace and its first key, quotes included.

    None when no object with a key opens there within `data` (an empty array, an element that is
    not an object, a key past the end): the readers then use their exact decoder.
    """
    match = _OPENING.match(data, start)
    return bytes(match.group()) if match else None


def last_boundary(buf: bytes | bytearray, opening: bytes | None, lo: int = 0, hi: int | None = None) -> tuple[int, int] | None:
    """The last guessed boundary in buf[lo:hi]: (index of the comma, index of the next record's `{`).

    None when there is none (no opening learned, or one record fills the window). `buf` may be any
    buffer with rfind and integer indexing (bytes, bytearray, mmap).
    """
    if not opening:
        return None
    hi = len(buf) if hi is None else hi
    idx = buf.rfind(opening, lo, hi)
    while idx > lo:
        j = idx - 1
        while j > lo and buf[j] in WS:
            j -= 1
        if j > lo and buf[j] == 0x2C:  # ','
            return j, idx
        idx = buf.rfind(opening, lo, idx)
    return None
