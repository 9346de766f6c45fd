"""Python columns into DuckDB without pandas.

pyarrow's `pa.array` of a Python list imports pandas to ask whether the list is a pandas object
(0.4-1 s on 2 cores: a third of what evaluate spends outside torch and transformers), and a list
passed as a query parameter costs a few microseconds a value. DuckDB scans a dict of NumPy arrays
directly (an object array of str / None is VARCHAR), so columns go in that way; the query casts each
to its type, since a column of only None has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def register(con: Any, name: str, columns: Mapping[str, Sequence[Any]], types: Mapping[str, str]) -> str:
    """Register `columns` (lists of one length) as the view `name` on `con`; return a query of them
    with each column cast to its SQL type in `types` (VARCHAR, BIGINT, DOUBLE, BOOLEAN). Unregister
    with `con.unregister(name)` when done."""
    import numpy as np

    arrays = {k: np.fromiter(v, dtype=bool if types[k] == "BOOLEAN" else object, count=len(v)) for k, v in columns.items()}
    con.register(name, arrays)
    return "SELECT " + ", ".join(f'"{k}"::{types[k]} AS "{k}"' for k in columns) + f" FROM {name}"
