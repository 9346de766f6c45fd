"""Model folders written whole or not at all, each with a manifest of its files' sha256.

The folder is built beside its target (`.<name>.tmp-XXXX`) and renamed into place, so a reader never
sees half an export; an existing target is replaced only with overwrite=True.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillbank import __version__, atomic
from skillbank.errors import InputError
from skillbank.hashing import sha256_file


@contextmanager
def staged_folder(target: str | os.PathLike[str], *, overwrite: bool = False, flag: str = "--overwrite") -> Iterator[Path]:
    out = Path(target).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise InputError(
            f"output folder {out} exists and is not empty",
            where="output_dir",
            fix=f"choose a new output_dir, or pass {flag} to replace it",
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic.temp_dir(out)  # the mode a plain mkdir gives (mkdtemp: 0700, unreadable to teammates)
    try:
        yield tmp
        if out.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, trash / out.name)
            os.replace(tmp, out)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def file_hashes(folder: Path, *, exclude: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """{relative path: {sha256, bytes}} of every file under folder (sorted)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel in exclude:
            continue
        out[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return out


def write_manifest(folder: Path, name: str, info: dict[str, Any]) -> Path:
    """The manifest lists every other file of the folder with its sha256 (written last)."""
    from skillbank.runs.record import now

    doc = {"skillbank": __version__, "created": now(), **info, "files": file_hashes(folder, exclude=(name,))}
    return atomic.write_json(folder / name, doc)


def verify_manifest(folder: Path, name: str) -> list[str]:
    """Files whose hash differs from the manifest, or that are missing (empty list: intact)."""
    import json

    doc = json.loads((folder / name).read_text(encoding="utf-8"))
    bad = []
    for rel, entry in doc["files"].items():
        path = folder / rel
        if not path.is_file() or sha256_file(path) != entry["sha256"]:
            bad.append(rel)
    return bad
