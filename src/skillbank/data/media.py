"""The folder a dataset's relative video paths are read from.

An empty media path means the annotation file's folder, for every command (training on either
backend, preflight, evaluation, gap analysis): a spec then means the same files wherever the command
runs, and the usual layout (annotations.json next to videos/) needs no media path. cosmos-rl's
dataset script never sees an empty one: the TOML names the folder.
"""

from __future__ import annotations


def media_root(media_path: str, annotation_path: str) -> str:
    """media_path, or when empty the folder of annotation_path ("." for a bare file name).
    Works on URLs too (memory://data/a.json -> memory://data); nothing is made absolute here."""
    if media_path:
        return media_path
    head, sep, _ = str(annotation_path).rpartition("/")
    return (head or "/") if sep else "."
