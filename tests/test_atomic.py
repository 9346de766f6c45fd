"""Atomic writes leave the mode a plain write would: readable by teammates as far as the umask says."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from skillbank import atomic


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002, 0o077])
def test_a_new_file_gets_0666_less_the_umask(tmp_path: Path, mask: int) -> None:
    with umask(mask):
        assert atomic.umask() == mask  # read without setting it
        path = atomic.write_json(tmp_path / "sub" / "results.json", {"ok": True})
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    assert mode(path) == 0o666 & ~mask == mode(plain)
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # no temp file left


def test_replacing_a_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    for kept in (0o600, 0o664, 0o640):
        path.write_text("old")
        path.chmod(kept)
        with umask(0o022):
            atomic.write_text(path, "new")
        assert path.read_text() == "new" and mode(path) == kept


def test_atomic_path_for_writers_that_take_a_path(tmp_path: Path) -> None:
    """What parquet writers and torch.save go through: the file they write gets the plain mode too."""
    with umask(0o002):
        with atomic.atomic_path(tmp_path / "failures.parquet") as tmp:
            tmp.write_bytes(b"PAR1")
            assert mode(tmp) == 0o600  # mkstemp's, until the rename
    assert mode(tmp_path / "failures.parquet") == 0o664


def test_a_folder_built_whole_gets_a_plain_mkdir_mode(tmp_path: Path) -> None:
    with umask(0o022):
        tmp = atomic.temp_dir(tmp_path / "export")
    assert mode(tmp) == 0o755 and tmp.parent == tmp_path and tmp.name.startswith(".export.")
    existing = tmp_path / "shared"
    existing.mkdir()
    existing.chmod(0o770)
    assert mode(atomic.temp_dir(existing)) == 0o770


def test_umask_falls_back_without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_proc)
    with umask(0o027):
        assert atomic.umask() == 0o027
        assert atomic.umask() == 0o027  # and left as it was
