"""Reading LLaVA annotation files for training (whole-file; preflight streams its own checks)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from skillbank.errors import InputError


def load_records(annotation_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a LLaVA annotations.json (a JSON array) whole: the trainer's reader.

    Streaming checks of huge files belong to preflight; this only fails clearly on a wrong shape.
    """
    path = Path(annotation_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"annotation file not found: {path}", where=str(path), fix="check custom.*_dataset.annotation_path") from None
    except ValueError as exc:
        raise InputError(f"annotation file is not valid JSON: {exc}", where=str(path), fix="write a JSON array of LLaVA records") from None
    if not isinstance(data, list):
        raise InputError("annotations must be a JSON array of records", where=str(path), fix="wrap the records in [ ... ]")
    for i, record in enumerate(data):
        if not isinstance(record, dict) or not isinstance(record.get("conversations"), list):
            raise InputError(f"record {i} has no conversations list", where=f"{path}: record {i}", fix="use LLaVA records")
    return data
