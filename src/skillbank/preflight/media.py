"""Whether records' media files exist under the media folder without escaping it.

A million records must not cost a million stat calls or a million Python-level path operations:
each folder is listed once (os.scandir) into one set of relative paths, and a batch of plain
relative paths (`videos/a.mp4`: no '.', '..' or empty segments) is checked with one set
difference. Anything else (an absolute path, '..', './') is normalised one by one and must stay
inside the media folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from operator import itemgetter, methodcaller

OK, MISSING, ESCAPES = "ok", "missing", "escapes"

# relative, segments neither empty nor starting with '.' (so no '.' or '..'): the text before the
# last '/' is the folder. Linear: a segment cannot hold '/', so the match never backtracks.
_SEGMENT = r"[^/.\\\n][^/\\\n]*"
_PLAIN = re.compile(f"{_SEGMENT}(?:/{_SEGMENT})*")
PLAIN_RE2 = _PLAIN.pattern  # the same pattern for DuckDB's regexp functions (RE2 reads it alike)
_SPLIT = methodcaller("rpartition", "/")
_FOLDER = itemgetter(0)


class MediaIndex:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root or ".")
        self._inside = self.root.rstrip(os.sep) + os.sep
        self._listed: set[str] = set()  # folders (relative to root) already listed
        self._files: set[str] = set()  # every file of those folders, as a path relative to root
        self._by_abs: dict[str, frozenset[str]] = {}
        self.folders_listed = 0

    def problems(self, paths: Iterable[str]) -> dict[str, str]:
        """{path: MISSING or ESCAPES} for the paths that are not fine."""
        rest = set(paths) - self._files  # a listed file is a plain path that exists
        if not rest:
            return {}
        plain = set(filter(_PLAIN.fullmatch, rest)) if os.sep == "/" else set()
        bad = {}
        if plain:
            for folder in set(map(_FOLDER, map(_SPLIT, plain))) - self._listed:
                self._list_relative(folder)
            bad = dict.fromkeys(plain - self._files, MISSING)
        for path in rest - plain:
            verdict = self.verdict(path)
            if verdict != OK:
                bad[path] = verdict
        return bad

    def verdict(self, path: str) -> str:
        """OK, MISSING or ESCAPES for one path (normalised; the slow way)."""
        full = os.path.normpath(path if os.path.isabs(path) else os.path.join(self.root, path))
        if not full.startswith(self._inside):
            return ESCAPES
        folder, name = os.path.split(full)
        names = self._by_abs.get(folder)
        if names is None:
            names = self._by_abs[folder] = frozenset(self._names(folder))
        return OK if name in names else MISSING

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.root, path))

    def _list_relative(self, folder: str) -> None:
        self._listed.add(folder)
        prefix = folder + "/" if folder else ""
        self._files.update(prefix + name for name in self._names(os.path.join(self.root, folder)))

    def _names(self, folder: str) -> list[str]:
        self.folders_listed += 1
        try:
            with os.scandir(folder) as entries:
                return [e.name for e in entries if e.is_file()]
        except OSError:
            return []
