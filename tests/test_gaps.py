"""DEFT gap analysis: the JSON-array reader, the failures parquet, its summary and the public script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import ROOT, json_out, skillbank
from skillbank.errors import InputError
from skillbank.gaps.analyze import COLUMNS, analyze_gaps, find_results_json
from skillbank.gaps.jsonarray import read_array

# --- the reader ------------------------------------------------------------------------------

TRICKY = [
    {"id": "a", "video": "v/a.mp4", "conversations": [{"id": "nested", "value": "x"}, {"id": "n2"}]},
    {"id": "b\"q", "video": "v/é.mp4", "note": '}, {"id": "fake", "video": "no"'},
    {"id": "c", "video": None, "extra": {"deep": [[{"id": 1}]]}},
    {"video": "only-video.mp4", "id": "d\\"},
    {"id": 5, "video": ["x"]},
    {"id": "f", "video": "\u2603 snow.mp4"},
]


def _read(data: bytes, fields, chunk: int, tmp: Path | None = None) -> list[dict]:
    """Rows read from an in-memory stream, or from a real file (the memory-mapped path) when tmp is given."""
    rows = []
    if tmp is None:
        for table in read_array(io.BytesIO(data), fields, chunk_bytes=chunk, threads=2):
            rows += table.to_pylist()
        return rows
    path = tmp / "array.json"
    path.write_bytes(data)
    with open(path, "rb") as f:
        for table in read_array(f, fields, chunk_bytes=chunk, threads=2):
            rows += table.to_pylist()
    return rows


def _expected(records, fields):
    def text(v):
        return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False)

    return [{f: text(r.get(f)) for f in fields} for r in records]


@pytest.mark.parametrize("source", ["stream", "file"])
@pytest.mark.parametrize("indent", [None, 1, 4])
@pytest.mark.parametrize("chunk", [24, 64, 1 << 20])
def test_reader_matches_json_load(indent, chunk, source, tmp_path):
    records = TRICKY * 7 + [{"id": f"r{i}", "video": f"{i}.mp4"} for i in range(50)]
    data = json.dumps(records, indent=indent, ensure_ascii=indent == 4).encode()
    got = _read(data, ["id", "video"], chunk, tmp_path if source == "file" else None)
    assert got == _expected(records, ["id", "video"])


def test_reader_many_mapped_pieces(tmp_path):
    records = [{"id": f"id-{i}", "video": f"videos/{i}.mp4", "conversations": [{"from": "gpt", "value": "x" * (i % 97)}]} for i in range(3000)]
    for indent in (None, 2):
        data = json.dumps(records, indent=indent).encode()
        assert _read(data, ["id", "video"], 4096, tmp_path) == _expected(records, ["id", "video"])


def test_reader_empty_array_and_errors():
    assert _read(b" [ ] ", ["id"], 64) == []
    assert _read(b'\xef\xbb\xbf[{"id": "x"}]', ["id"], 64) == [{"id": "x"}]
    with pytest.raises(InputError, match="not a JSON array"):
        _read(b'{"id": 1}', ["id"], 64)
    with pytest.raises(InputError, match="closing"):
        _read(b'[{"id": "a"}, {"id": "b"}', ["id"], 1 << 20)
    with pytest.raises(InputError, match="not valid JSON near byte"):
        _read(b'[{"id": "a"}, {"id": "b",, }]', ["id"], 1 << 20)
    with pytest.raises(InputError, match="not an object"):
        _read(b'[{"id": "a"}, 3]', ["id"], 1 << 20)


# --- the analysis ----------------------------------------------------------------------------


def _write_eval(tmp: Path, results: list[dict], annotations: list[dict] | None = None) -> tuple[Path, Path]:
    results_dir = tmp / "eval"
    results_dir.mkdir()
    (results_dir / "results.json").write_text(json.dumps(results, indent=2))
    ann = tmp / "data" / "annotations.json"
    ann.parent.mkdir()
    records = annotations if annotations is not None else [
        {"id": r["video_id"], "video": f"videos/{r['video_id']}.mp4", "video_fps": 8.0,
         "conversations": [{"from": "human", "value": "<video>\n" + r["question"]}, {"from": "gpt", "value": r["gt"]}]}
        for r in results
    ]
    ann.write_text(json.dumps(records))
    return results_dir, ann


YES_NO = [
    {"video_id": "v1", "question": "Is it red?", "gt": "yes", "response": "Yes "},  # correct after lower/strip
    {"video_id": "v2", "question": "Is it red?", "gt": "yes", "response": "no"},  # FN
    {"video_id": "v3", "question": "Is it red?", "gt": "no", "response": "yes"},  # FP
    {"video_id": "v4", "question": "Is it red?", "gt": "no", "response": None},  # FP (null -> "")
    {"video_id": "v5", "question": "Is it red?", "gt": "No"},  # missing response: FP
    {"video_id": "v6", "question": "Is it red?", "gt": "yes", "response": "Yes."},  # strict: a gap
]


def test_failures_parquet_columns_labels_and_summary(tmp_path):
    results_dir, ann = _write_eval(tmp_path, YES_NO)
    out = tmp_path / "gaps" / "round1.parquet"
    summary = analyze_gaps(str(results_dir), str(out), annotations=str(ann))
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS)
    rows = {r["video_id"]: r for r in table.to_pylist()}
    assert list(rows) == ["v2", "v3", "v4", "v5", "v6"]
    assert {k: r["error_type"] for k, r in rows.items()} == {"v2": "FN", "v3": "FP", "v4": "FP", "v5": "FP", "v6": "FN"}
    assert rows["v4"]["response"] is None and rows["v5"]["response"] is None
    assert rows["v2"]["media_path"] == f"{ann.parent}/videos/v2.mp4"  # media root defaults to the annotations' folder
    assert rows["v6"] == {"video_id": "v6", "media_path": f"{ann.parent}/videos/v6.mp4", "question": "Is it red?",
                          "ground_truth": "yes", "response": "Yes.", "error_type": "FN"}
    assert summary["total"] == 6 and summary["failures"] == 5
    assert summary["counts"] == {"FP": 3, "FN": 2}
    assert summary["task"] == "yes_no"
    on_disk = json.loads((tmp_path / "gaps" / "round1.summary.json").read_text())
    assert on_disk == summary
    assert sorted(p.name for p in out.parent.iterdir()) == ["round1.parquet", "round1.summary.json"]  # no temp files left


def test_open_answers_are_mismatches_and_media_root_and_absolute_paths(tmp_path):
    results = [
        {"video_id": "a", "question": "Colour?", "gt": "red", "response": "red"},
        {"video_id": "b", "question": "Colour?", "gt": "blue", "response": "green"},
        {"video_id": "c", "question": "Colour?", "gt": 3, "response": "3"},  # numbers compare as text
        {"video_id": "d", "question": "Colour?", "gt": "yes", "response": "no"},
    ]
    annotations = [{"id": "b", "video": "clips/b.mp4"}, {"id": "d", "video": "/abs/d.mp4"}, {"id": "a", "video": "a.mp4"}]
    results_dir, ann = _write_eval(tmp_path, results, annotations)
    out = tmp_path / "g.parquet"
    summary = analyze_gaps(str(results_dir), str(out), annotations=str(ann), media_root="s3://bucket/media/")
    rows = pq.read_table(out).to_pylist()
    assert [(r["video_id"], r["media_path"], r["error_type"]) for r in rows] == [
        ("b", "s3://bucket/media/clips/b.mp4", "mismatch"),
        ("d", "/abs/d.mp4", "mismatch"),
    ]
    assert summary["counts"] == {"mismatch": 2} and summary["task"] == "open"


def test_without_annotations_media_path_is_null(tmp_path):
    results_dir, _ = _write_eval(tmp_path, YES_NO)
    analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"))
    assert set(pq.read_table(tmp_path / "g.parquet")["media_path"].to_pylist()) == {None}


def test_missing_ids_are_a_clear_input_error_and_nothing_is_written(tmp_path):
    results = [{"video_id": f"id{i}", "question": "q", "gt": "yes", "response": "no"} for i in range(8)]
    results_dir, ann = _write_eval(tmp_path, results, [{"id": "id0", "video": "x.mp4"}])
    out = tmp_path / "g.parquet"
    with pytest.raises(InputError) as err:
        analyze_gaps(str(results_dir), str(out), annotations=str(ann))
    assert "7 failing video_id(s)" in err.value.message
    assert "'id1'" in err.value.message and "..." in err.value.message
    assert not out.exists()


def test_empty_results(tmp_path):
    results_dir, ann = _write_eval(tmp_path, [])
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"), annotations=str(ann))
    assert (summary["total"], summary["failures"]) == (0, 0)
    assert pq.read_table(tmp_path / "g.parquet").column_names == list(COLUMNS)


def test_finding_results_json(tmp_path):
    with pytest.raises(InputError, match="no results.json"):
        find_results_json(str(tmp_path))
    (tmp_path / "step_10").mkdir()
    (tmp_path / "step_10" / "results.json").write_text("[]")
    assert find_results_json(str(tmp_path)) == str(tmp_path / "step_10" / "results.json")
    (tmp_path / "step_20").mkdir()
    (tmp_path / "step_20" / "results.json").write_text("[]")
    with pytest.raises(InputError, match="2 results.json"):
        find_results_json(str(tmp_path))
    (tmp_path / "best_checkpoint.json").write_text(json.dumps({"step": 20, "results_json": "/moved/away/results.json"}))
    assert find_results_json(str(tmp_path)) == str(tmp_path / "step_20" / "results.json")


def test_fsspec_urls(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/evalrun/results.json", json.dumps(YES_NO).encode())
    fs.pipe("/data/annotations.json", json.dumps([{"id": r["video_id"], "video": f"{r['video_id']}.mp4"} for r in YES_NO]).encode())
    summary = analyze_gaps("memory://evalrun", "memory://out/gaps.parquet", annotations="memory://data/annotations.json")
    assert summary["failures"] == 5
    assert summary["results_json"] == "memory://evalrun/results.json"
    with fs.open("/out/gaps.parquet", "rb") as f:
        assert pq.read_table(f)["media_path"][0].as_py() == "memory://data/v2.mp4"
    assert json.loads(fs.cat("/out/gaps.summary.json"))["failures"] == 5


def test_cli_public_flags_json_and_no_torch(tmp_path):
    results_dir, ann = _write_eval(tmp_path, YES_NO)
    out = tmp_path / "gaps.parquet"
    probe = (
        "import sys, runpy\n"
        f"sys.argv = [{str(ROOT / 'scripts' / 'analyze_gaps.py')!r}, '--results-dir', {str(results_dir)!r}, "
        f"'--gaps-parquet', {str(out)!r}, '--kpi-ann-path', {str(ann)!r}, '--kpi-media-path', '/media']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as e:\n    code = e.code\n"
        "print('HEAVY', sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env={**os.environ}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "5 of 6 failed" in proc.stdout
    assert "HEAVY []" in proc.stdout
    assert pq.read_table(out)["media_path"][0].as_py() == "/media/videos/v2.mp4"

    proc = skillbank("gaps", "--results-dir", str(results_dir), "--out", str(tmp_path / "b.parquet"), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    assert doc["ok"] and doc["failures"] == 5 and doc["summary_json"].endswith("b.summary.json")

    proc = skillbank("gaps", "--results-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "c.parquet"), "--json")
    assert proc.returncode == 2
    assert json_out(proc)["ok"] is False
