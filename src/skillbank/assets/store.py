"""Build-once folders: a content key of (builder arguments, builder code), atomic directory writes.

Every built asset carries a stamp file naming its key, so a folder that exists with the same key is
reused and one with another key is refused instead of silently mixed. Builds happen in a temporary
sibling folder that is renamed into place: a reader (or a second builder) never sees half an asset.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.paths import cache_dir

STAMP = "skillbank_asset.json"


def code_version(*modules: str) -> str:
    """A digest of the builder modules' source: editing a builder invalidates what it cached."""
    import importlib.util

    digest = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec else None
        digest.update(Path(origin).read_bytes() if origin and os.path.isfile(origin) else name.encode())
    return digest.hexdigest()[:16]


def content_key(kind: str, args: dict[str, Any], version: str) -> str:
    blob = json.dumps({"kind": kind, "args": args, "code": version}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_stamp(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        return json.loads((Path(folder) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_folder(
    target: str | os.PathLike[str],
    *,
    kind: str,
    args: dict[str, Any],
    version: str,
    build: Callable[[Path], None],
) -> Path:
    """Build `target` with `build(tmp_dir)` unless it already holds this exact asset.

    Raises InputError when `target` exists and is something else (another asset or user files).
    """
    target = Path(target).resolve()
    key = content_key(kind, args, version)
    if target.exists():
        stamp = read_stamp(target)
        if stamp and stamp.get("key") == key:
            return target
        if target.is_dir() and not any(target.iterdir()):
            target.rmdir()
        else:
            what = f"a different {stamp.get('kind')} (key {stamp.get('key')})" if stamp else "other files"
            raise InputError(
                f"{target} already exists and holds {what}",
                where=str(target),
                fix="choose a new --out folder, or delete this one",
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic.temp_dir(target)  # the mode a plain mkdir gives (mkdtemp: 0700)
    try:
        build(tmp)
        atomic.write_json(tmp / STAMP, {"kind": kind, "key": key, "args": args, "code_version": version})
        try:
            os.rename(tmp, target)
        except OSError:
            # another builder won the race; keep theirs if it is the same asset
            stamp = read_stamp(target)
            if not (stamp and stamp.get("key") == key):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def cached_folder(*, kind: str, args: dict[str, Any], version: str, build: Callable[[Path], None]) -> Path:
    """The asset under `skillbank.paths.cache_dir()/<kind>/<key>`, built on first use."""
    key = content_key(kind, args, version)
    return build_folder(cache_dir() / kind / key, kind=kind, args=args, version=version, build=build)


def copy_folder(source: Path, target: str | os.PathLike[str]) -> Path:
    """Copy a cached asset to `target` atomically (build_folder reuses `target` if it already is that asset)."""
    stamp = read_stamp(source) or {}

    def build(tmp: Path) -> None:
        shutil.copytree(source, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(STAMP))

    return build_folder(
        target, kind=stamp.get("kind", "asset"), args=stamp.get("args", {}), version=stamp.get("code_version", ""), build=build
    )


def asset_folder(out_dir: str | os.PathLike[str] | None, *, cache: bool, kind: str, args: dict[str, Any], version: str,
                 build: Callable[[Path], None]) -> Path:
    """Where an asset builder's result lives: out_dir=None is the cached copy; with cache=True the
    cached copy is built once and copied to out_dir; otherwise out_dir is built in place."""
    if out_dir is None or cache:
        cached = cached_folder(kind=kind, args=args, version=version, build=build)
        return cached if out_dir is None else copy_folder(cached, out_dir)
    return build_folder(out_dir, kind=kind, args=args, version=version, build=build)
