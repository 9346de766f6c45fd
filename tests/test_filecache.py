"""The file cache: a hit only while a file keeps its size and mtime; a broken store is no cache."""

from __future__ import annotations

import hashlib
import os

from skillbank.filecache import FileCache
from skillbank.hashing import sha256_many


def test_a_value_is_a_hit_until_the_file_changes(tmp_path):
    clip = tmp_path / "a.mp4"
    clip.write_bytes(b"one")
    with FileCache("probe", tmp_path / "cache") as cache:
        cache.put(str(clip), {"fps": 4})
        assert cache.get(str(clip)) == {"fps": 4}
        clip.write_bytes(b"longer")
        assert cache.get(str(clip)) is None
        assert cache.get_many([str(tmp_path / "missing.mp4")]) == {}


def test_another_process_sees_the_cache(tmp_path):
    clip = tmp_path / "a.mp4"
    clip.write_bytes(b"x")
    FileCache("probe", tmp_path / "cache").put_many({str(clip): [1, 2]})
    assert FileCache("probe", tmp_path / "cache").get_many([str(clip)]) == {str(clip): [1, 2]}


def test_an_unwritable_cache_folder_is_no_cache(tmp_path):
    clip = tmp_path / "a.mp4"
    clip.write_bytes(b"x")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = FileCache("probe", blocker / "cache")
    cache.put(str(clip), 1)
    assert cache.get(str(clip)) is None


def test_sha256_many_hashes_once_and_skips_unreadable(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLBANK_CACHE", str(tmp_path / "cache"))
    clips = []
    for i in range(3):
        clip = tmp_path / f"{i}.mp4"
        clip.write_bytes(bytes([i]) * 100)
        clips.append(str(clip))
    want = {c: hashlib.sha256(open(c, "rb").read()).hexdigest() for c in clips}
    assert sha256_many([*clips, str(tmp_path / "gone.mp4")]) == want
    calls = []
    import skillbank.hashing as hashing
    monkeypatch.setattr(hashing, "sha256_file", lambda p, *a: calls.append(p) or "x")
    assert sha256_many(clips) == want and calls == []
    os.utime(clips[0], ns=(1, 1))
    assert sha256_many(clips)[clips[0]] == "x" and calls == [clips[0]]
