"""Preflight's columnar read (DuckDB over the parts of a file) against its exact path (the stream
reader and the record checker): the same findings, in the same order, and the same stats."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from skillbank.data import jsonparts
from skillbank.preflight import records as rules
from skillbank.preflight.records import RecordChecker
from skillbank.preflight.report import Findings
from skillbank.preflight.run import run_preflight

SKILL = "tao-finetune-cosmos-reason"


def rec(i: int, **changes) -> dict:
    r = {"id": f"r{i}", "video": f"videos/c{i % 3}.mp4", "video_fps": 30.0,
         "conversations": [{"from": "human", "value": f"<video>\nq {i} }}, {{\"id\": x?"}, {"from": "gpt", "value": "yes"}]}
    r.update(changes)
    return {k: v for k, v in r.items() if v is not None}


def turns(*values: object, roles: tuple[str, ...] = ("human", "gpt")) -> list:
    return [{"from": roles[i % len(roles)], "value": v} for i, v in enumerate(values)]


# every record shape the rules look at; each row of this list is one record of the file
DEFECTS = [
    rec(0, id=7), rec(1, id="7"), rec(2, id=7), rec(3, id="a\u0062"), rec(4, id="ab"), rec(5, id=""), rec(6, id=None),
    rec(7, id=5.0), rec(8, id=True), rec(9, id=10**22), rec(10, id=10**22),
    rec(11, video_fps="30"), rec(12, video_fps=None), rec(13, video_fps=0), rec(14, video_fps=-1.5), rec(15, video_fps=True),
    rec(16, video_fps=float("nan")), rec(17, video_fps=1e308 * 10), rec(18, video_fps=25),
    rec(19, conversations=turns("q", " \u00a0\n")), rec(20, conversations=turns("q", "")), rec(21, conversations=turns("q", 5)),
    rec(22, conversations=turns("q", None)), rec(23, conversations=turns("q", "a", roles=("Human", "GPT"))),
    rec(24, conversations=turns("be brief", "q", "a", roles=("system", "human", "gpt"))),
    rec(25, conversations=turns("q", "a", "q2", "a2", roles=("user", "assistant"))), rec(26, conversations=turns("q", "a", "q2")),
    rec(27, conversations=turns("q")), rec(28, conversations=None), rec(29, conversations=turns("q", "a", roles=("gpt", "human"))),
    rec(30, conversations=turns("\u3000", "a")), rec(31, conversations=turns("q", "\\n")),
    rec(32, image="i.png"), rec(33, video=None), rec(34, video=""), rec(35, video=["videos/c0.mp4", "videos/c1.mp4"]),
    rec(36, video=["videos/c0.mp4", "videos/none.mp4"]), rec(37, video="videos/missing.mp4"), rec(38, video="../outside.mp4"),
    rec(39, video="./videos/c0.mp4"), rec(40, video=5), rec(41, video=None, image="i.png"),
    rec(42, duration=2.0), rec(43, num_frames=3000, video_fps=30.0), rec(44, frames=90), rec(45, num_frames=None, frames=60),
    rec(46, duration=1e4, width=640, height=480), rec(47, num_frames=12, width=0, height=480),
    rec(48, conversations=turns("<video>\n  shared question ", "no"), video="videos/c1.mp4"),
    rec(49, id="v1"),
]
VAL = [rec(100, id="v1"), rec(101, conversations=turns("<video>shared question", "yes"), video="videos/c1.mp4"), rec(102, id="v2")]


def bank(tmp: Path) -> tuple[Path, Path]:
    media = tmp / "media"
    (media / "videos").mkdir(parents=True)
    for i in range(3):
        (media / f"videos/c{i}.mp4").write_bytes(b"\0")
    (media / "i.png").write_bytes(b"\0")
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (model / "model.safetensors").write_bytes(b"\0" * 1024)
    return media, model


def spec_for(tmp: Path, train: list, val: list | None, *, layout: str = "indent") -> dict:
    media, model = bank(tmp)
    dump = {"indent": lambda rs: json.dumps(rs, indent=2), "lines": lambda rs: "[\n" + ",\n".join(json.dumps(r) for r in rs) + "\n]\n"}[layout]
    (tmp / "train.json").write_text(dump(train))
    spec = {
        "train": {"train_batch_per_replica": 1, "output_dir": str(tmp / "out"), "train_policy": {"mini_batch": 1}},
        "policy": {"model_name_or_path": str(model), "parallelism": {"dp_shard_size": 1}, "model_max_length": 4096},
        "validation": {"enable": False},
        "custom": {"train_dataset": {"annotation_path": str(tmp / "train.json"), "media_path": str(media)}},
    }
    if val is not None:
        (tmp / "val.json").write_text(dump(val))
        spec["custom"]["val_dataset"] = {"annotation_path": str(tmp / "val.json"), "media_path": str(media)}
    return spec


def both_paths(tmp: Path, monkeypatch: pytest.MonkeyPatch, train: list, val: list | None = None, **kw) -> tuple:
    """(columnar report, exact report) of the same files; the columnar one over many small parts."""
    spec = spec_for(tmp, train, val, **{k: v for k, v in kw.items() if k == "layout"})
    kw = {k: v for k, v in kw.items() if k != "layout"}
    monkeypatch.setattr(jsonparts, "PART_BYTES", 700)
    columnar = run_preflight(skill=SKILL, action="train", spec=spec, backend="local", **kw)
    monkeypatch.setattr(jsonparts, "split_array", lambda *a, **k: None)
    exact = run_preflight(skill=SKILL, action="train", spec=spec, backend="local", **kw)
    return columnar, exact


def comparable(report) -> tuple:
    stats = {k: v for k, v in report.stats.items() if k not in ("seconds",)}
    if "probe" in stats:  # the second run reads the clip headers from the cache the first one filled
        stats["probe"] = {k: v for k, v in stats["probe"].items() if k not in ("from_cache", "read", "seconds")}
    return [(f.check, f.severity, f.message, f.where) for f in report.findings], stats


@pytest.mark.parametrize("layout", ["indent", "lines"])
def test_columnar_and_exact_paths_report_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    train = DEFECTS + [rec(i) for i in range(50, 90)]
    columnar, exact = both_paths(tmp_path, monkeypatch, train, VAL, layout=layout)
    assert comparable(columnar) == comparable(exact)
    checks = {f.check for f in exact.findings}
    assert {"annotations.unique_id", "annotations.video_fps", "annotations.conversations", "annotations.media_key",
            "annotations.media_exists", "annotations.media_escape", "annotations.overlap", "annotations.mixed_media", "vision.budget"} <= checks


def test_a_file_duckdb_cannot_read_goes_the_exact_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record that is not an object, turns that are not objects: DuckDB refuses the file, the stream reads it."""
    train = [rec(i) for i in range(30)] + [["not", "an", "object"], rec(31, conversations="hi"), rec(32, conversations=["a", "b"])]
    columnar, exact = both_paths(tmp_path, monkeypatch, train)
    assert comparable(columnar) == comparable(exact)
    assert {"annotations.record", "annotations.conversations"} <= {f.check for f in exact.findings}


def test_a_syntax_error_keeps_its_line_and_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_for(tmp_path, [rec(i) for i in range(40)], None)
    path = Path(spec["custom"]["train_dataset"]["annotation_path"])
    lines = path.read_text().splitlines()
    bad = next(i for i in range(100, len(lines)) if '"video_fps":' in lines[i])
    lines[bad] = lines[bad].replace(":", "", 1)
    path.write_text("\n".join(lines))
    monkeypatch.setattr(jsonparts, "PART_BYTES", 700)
    report = run_preflight(skill=SKILL, action="train", spec=spec, backend="local")
    [found] = [f for f in report.findings if f.check == "annotations.format"]
    assert found.where.startswith(f"{path}:{bad + 1}:") and f"(line {bad + 1}, column" in found.message
    assert report.stats["records"]["train"] < 40  # the records before it were checked


def test_many_defects_are_counted_past_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    train = [rec(i, video_fps=None) for i in range(300)]
    columnar, exact = both_paths(tmp_path, monkeypatch, train)
    assert comparable(columnar) == comparable(exact)
    assert any("(300 in all; first 20 shown)" in f.message for f in columnar.findings if f.check == "annotations.video_fps")


def test_the_sql_proof_flags_whatever_the_checker_finds(tmp_path: Path) -> None:
    """Every record of DEFECTS the checker finds something in is flagged by CLEAN_SQL; clean ones are not."""
    path = tmp_path / "a.json"
    path.write_text(json.dumps(DEFECTS))
    findings = Findings(cap=10**9)
    checker = RecordChecker(str(path), findings)
    for index, record in enumerate(DEFECTS):
        checker.record(record, index)
    dirty = {int(f.where.rsplit("#", 1)[1]) for f in findings.items}
    con = duckdb.connect()
    spec = ", ".join(f"{json.dumps(k)}: '{v}'" for k, v in rules.READ_COLUMNS.items())
    computed = ", ".join(f"{sql} AS {name}" for name, sql in rules.SQL_SOURCE.items())
    try:
        rows = con.execute(f"SELECT NOT {rules.CLEAN_SQL} FROM (SELECT {computed}, * FROM read_json('{path}', format='array', columns={{{spec}}}))").fetchall()
    finally:
        con.close()
    flagged = {i for i, (flag,) in enumerate(rows) if flag}
    assert dirty <= flagged
    assert flagged - dirty <= {23, 24, 35, 36}, "only capitalised roles, a system turn and path lists go to the checker while clean"


def test_python_whitespace_table() -> None:
    assert rules.PY_SPACE == "".join(c for c in map(chr, range(0x110000)) if c.isspace())


def test_parts_are_read_in_order_with_short_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of a few KiB, reads of 100 bytes: DuckDB still sees every record once, in file order."""
    records = [rec(i) for i in range(400)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=2))
    monkeypatch.setattr(jsonparts, "READ_BYTES", 100)
    parts = jsonparts.split_array(str(path), 4096)
    assert parts is not None and len(parts.bounds) > 10
    con = duckdb.connect()
    jsonparts.attach(con)
    try:
        rows = con.execute(f"SELECT id, part FROM {parts.read_json_sql({'id': 'VARCHAR'}, filename=True)}").fetchall()
    finally:
        jsonparts.release(parts)
        con.close()
    assert [r[0] for r in rows] == [r["id"] for r in records]
    counts = [sum(1 for r in rows if r[1] == p) for p in range(len(parts.bounds))]
    parts.counts = counts
    assert dict(parts.iter_records_at([0, 137, 399])) == {0: records[0], 137: records[137], 399: records[399]}


def test_a_cut_inside_a_record_fails_to_parse_never_silently(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nested lists of objects that open like a record: a part cut there does not parse, and the
    scan reads the file whole (the same findings as the exact path)."""
    records = [rec(i, clips=[{"id": f"n{i}-{j}", "t": j} for j in range(30)]) for i in range(40)]
    for r in records:  # make every record open with the nested objects' key
        r["clips"] = r.pop("clips")
    path = tmp_path / "a.json"
    path.write_text("[" + ",".join(json.dumps({"id": r["id"], **{k: v for k, v in r.items() if k != "id"}}) for r in records) + "]")
    parts = jsonparts.split_array(str(path), 1000)
    con = duckdb.connect()
    jsonparts.attach(con)
    try:
        rows = con.execute(f"SELECT id FROM {parts.read_json_sql({'id': 'VARCHAR'})}").fetchall()
        assert [r[0] for r in rows] == [r["id"] for r in records]  # parsed: then every cut was a record boundary
    except duckdb.Error:
        pass  # a cut inside a record: the part does not parse
    finally:
        jsonparts.release(parts)
        con.close()


@pytest.mark.parametrize("layout", ["indent", "lines"])
def test_probe_pick_spreads_about_k_clips_over_the_file_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """Records that state no clip length: about K of them spread from the start to the end of the file,
    each with its own text length, the same picks on both paths (the clips here are unreadable, so each
    counts the vision budget; what matters is which records are picked)."""
    from skillbank.preflight import datasets

    picks: list[list] = []
    scan = datasets.scan

    def keep(*args, **kwargs):
        data = scan(*args, **kwargs)
        if data.role == "train":
            picks.append(list(data.probe))
        return data

    monkeypatch.setattr("skillbank.preflight.run.scan", keep)
    train = [rec(i, conversations=turns("<video>\n" + "q" * (i % 7), "yes")) for i in range(400)]
    both_paths(tmp_path, monkeypatch, train, None, layout=layout, probe_sample=16)
    columnar, exact = picks
    assert columnar == exact
    assert 8 <= len(columnar) <= 32
    indices = [p[0] for p in columnar]
    assert indices[0] < 50 and indices[-1] > 350
    assert all(chars == len("<video>\n") + index % 7 + len("yes") for index, _, chars, _ in columnar)


def test_a_large_file_is_cut_into_fewer_larger_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB pays per part it opens: a large file gets PARTS_PER_THREAD parts per thread, up to the
    caller's most; a small one PART_BYTES; the parts still hold every record once, in order."""
    records = [rec(i) for i in range(2000)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=2))
    size = path.stat().st_size
    monkeypatch.setattr(jsonparts, "PART_BYTES", 2048)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    assert jsonparts.part_size(con, str(path), most=size) == 2048  # under LARGE_FILE
    monkeypatch.setattr(jsonparts, "LARGE_FILE", size // 2)
    assert jsonparts.part_size(con, str(path), most=size) == size // (jsonparts.PARTS_PER_THREAD * 2)
    assert jsonparts.part_size(con, str(path), most=5000) == 5000
    parts = jsonparts.split_array(str(path), jsonparts.part_size(con, str(path), most=size))
    assert parts is not None and abs(len(parts.bounds) - jsonparts.PARTS_PER_THREAD * 2) <= 1
    jsonparts.attach(con)
    try:
        rows = con.execute(f"SELECT id FROM {parts.read_json_sql({'id': 'VARCHAR'})}").fetchall()
    finally:
        jsonparts.release(parts)
        con.close()
    assert [r[0] for r in rows] == [r["id"] for r in records]
