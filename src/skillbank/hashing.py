"""The sha256 of a file's content, read in chunks: job records, export manifests and DEFT's
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
