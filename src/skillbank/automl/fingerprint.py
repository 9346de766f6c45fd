"""A study's base spec, as the study stores it: what every worker joining it must train alike.

Trials are comparable only when they differ in the searched values alone. The first worker stores
its base spec (normalized, below) and its digest with the study; a worker whose base spec differs
is refused (exit 2) naming the differing dotted keys, unless it passes --allow-spec-change.

Normalized: where this machine writes (train.output_dir, results_dir) is left out, it differs by
machine and changes no result; an annotation file that exists here is named by the sha256 of its
content (the same records under another mount point agree, other records differ). Every other key
counts as written, searched ones included (the baseline trains their base values).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

LOCAL_KEYS = ("train.output_dir", "results_dir")  # where a machine writes: left out of the comparison
CONTENT_KEYS = ("annotation_path",)  # a file named by its content's sha256 where it exists


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted key: leaf value}; lists are leaves."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted))
        else:
            out[dotted] = value
    return out


def normalized(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the study compares it (module docstring): flat dotted keys, sorted."""
    from skillbank.hashing import sha256_many

    flat = {k: v for k, v in flatten(spec).items() if k not in LOCAL_KEYS}
    files = [v for k, v in flat.items() if k.rsplit(".", 1)[-1] in CONTENT_KEYS and isinstance(v, str) and Path(v).is_file()]
    digests = sha256_many(files) if files else {}
    for key, value in flat.items():
        if isinstance(value, str) and value in digests and key.rsplit(".", 1)[-1] in CONTENT_KEYS:
            flat[key] = f"sha256:{digests[value]}"
    return dict(sorted(flat.items()))


def digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, the study's value, this spec's value) for each differing key (missing: None)."""
    return [(k, theirs.get(k), ours.get(k)) for k in sorted({*theirs, *ours}) if theirs.get(k) != ours.get(k)]


def describe(diffs: list[tuple[str, Any, Any]], limit: int = 6) -> str:
    shown = "; ".join(f"{k}: study {_short(a)}, this spec {_short(b)}" for k, a, b in diffs[:limit])
    return shown + (f"; and {len(diffs) - limit} more" if len(diffs) > limit else "")


def _short(value: Any, width: int = 40) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."
