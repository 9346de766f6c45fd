"""The sha256 of a file's content, read in chunks (sha256_many: cached by path, size and mtime): job records, export manifests, DEFT's
benchmark-disjointness check all identify files this one way."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_many(paths: list[str], *, cache: bool = True) -> dict[str, str]:
    """Each readable file's sha256, from the file cache (skillbank.filecache: same path, size and mtime)
    where it was hashed before; unreadable files are left out (the caller names them)."""
    from skillbank.filecache import FileCache

    store = FileCache("sha256") if cache else None
    found = store.get_many(paths) if store else {}
    fresh: dict[str, str] = {}
    for path in paths:
        if path in found or path in fresh:
            continue
        try:
            fresh[path] = sha256_file(path)
        except OSError:
            continue
    if store:
        store.put_many(fresh)
        store.close()
    return {**found, **fresh}
