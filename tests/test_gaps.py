"""DEFT gap analysis on DuckDB: the failures parquet, its summary, the same rules as the metrics, the
public script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import ROOT, json_out, skillbank
from skillbank.errors import InputError
from skillbank.evaluation.metrics import compute_metrics
from skillbank.gaps.analyze import COLUMNS, analyze_gaps
from skillbank.evaluation.results import find_results_json
from skillbank.scoring.stats import wilson


def _write_eval(tmp: Path, results: list[dict], annotations: list[dict] | None = None, indent: int | None = 2) -> tuple[Path, Path]:
    results_dir = tmp / "eval"
    results_dir.mkdir()
    (results_dir / "results.json").write_text(json.dumps(results, indent=indent))
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
    {"video_id": "v1", "question": "Is it red?", "gt": "yes", "response": "Yes "},  # correct
    {"video_id": "v2", "question": "Is it red?", "gt": "yes", "response": "no"},  # FN
    {"video_id": "v3", "question": "Is it red?", "gt": "no", "response": "yes"},  # FP
    {"video_id": "v4", "question": "Is it red?", "gt": "no", "response": None},  # FP, unparseable
    {"video_id": "v5", "question": "Is it red?", "gt": "No"},  # missing response: FP, unparseable
    {"video_id": "v6", "question": "Is it red?", "gt": "yes", "response": "Yes, it is red."},  # yes: as the metrics read it
]


def test_failures_parquet_columns_labels_and_summary(tmp_path):
    results_dir, ann = _write_eval(tmp_path, YES_NO)
    out = tmp_path / "gaps" / "round1.parquet"
    summary = analyze_gaps(str(results_dir), str(out), annotations=str(ann))
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS)
    rows = {r["video_id"]: r for r in table.to_pylist()}
    assert list(rows) == ["v2", "v3", "v4", "v5"]  # in results order
    assert {k: r["error_type"] for k, r in rows.items()} == {"v2": "FN", "v3": "FP", "v4": "FP", "v5": "FP"}
    assert rows["v4"]["answer"] is None and rows["v5"]["response"] is None  # unparseable: kept, answer null
    assert rows["v2"] == {"video_id": "v2", "media_path": f"{ann.parent}/videos/v2.mp4", "question": "Is it red?",
                          "ground_truth": "yes", "response": "no", "answer": "no", "family": None, "error_type": "FN",
                          "turn": None}
    assert summary["total"] == 6 and summary["failures"] == 4
    assert summary["counts"] == {"FP": 3, "FN": 1} and summary["unparseable"] == 2
    assert summary["task"] == "yes_no" and (summary["task_type"], summary["answer_type"]) == ("", "short")
    on_disk = json.loads((tmp_path / "gaps" / "round1.summary.json").read_text())
    assert on_disk == summary
    assert sorted(p.name for p in out.parent.iterdir()) == ["round1.parquet", "round1.summary.json"]  # no temp files left


def test_gaps_and_metrics_agree(tmp_path):
    """One rule for metrics and gaps: the gap counts are the metrics' fp / fn / unparseable."""
    results_dir, _ = _write_eval(tmp_path, YES_NO)
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"))
    m = compute_metrics([r["gt"] for r in YES_NO], [r.get("response") for r in YES_NO])
    assert (summary["counts"]["FP"], summary["counts"]["FN"], summary["unparseable"]) == (m["fp"], m["fn"], m["unparseable"])
    assert summary["failures"] == m["total"] - m["correct"]


MIXED = [
    {"video_id": "c1", "question": "Is the ball red? Answer yes or no.", "gt": "yes", "response": "No.", "family": "colour_yes_no"},
    {"video_id": "c2", "question": "Is the ball red? Answer yes or no.", "gt": "no", "response": "maybe", "family": "colour_yes_no"},
    {"video_id": "c3", "question": "Is the ball red? Answer yes or no.", "gt": "no", "response": "no", "family": "colour_yes_no"},
    {"video_id": "d1", "question": "Which way? Answer left, right or straight.", "gt": "left", "response": "right", "family": "direction"},
    {"video_id": "n1", "question": "What colour? One word.", "gt": "red", "response": "Red.", "family": "colour_name"},
    {"video_id": "n2", "question": "What colour? One word.", "gt": "blue", "response": "green", "family": "colour_name"},
]


def test_mixed_set_types_errors_per_family(tmp_path):
    """Issue 12 item 8: in a mixed set a yes/no family's failures are FP / FN, not mismatch; a family column."""
    results_dir, ann = _write_eval(tmp_path, MIXED)
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"), annotations=str(ann))
    rows = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert [(r["video_id"], r["family"], r["error_type"], r["answer"]) for r in rows] == [
        ("c1", "colour_yes_no", "FN", "no"),
        ("c2", "colour_yes_no", "FP", None),  # unparseable "maybe" to a "no" question: a false alarm, kept
        ("d1", "direction", "mismatch", "right"),
        ("n2", "colour_name", "mismatch", "green"),
    ]
    assert summary["task"] == "mixed"
    assert summary["counts"] == {"FP": 1, "FN": 1, "mismatch": 2}
    assert {name: {k: v for k, v in counts.items() if k != "ci95"} for name, counts in summary["families"].items()} == {
        "colour_name": {"total": 2, "failures": 1, "mismatch": 1, "unparseable": 0},
        "colour_yes_no": {"total": 3, "failures": 2, "FP": 1, "FN": 1, "unparseable": 1},
        "direction": {"total": 1, "failures": 1, "mismatch": 1, "unparseable": 0},
    }
    # each family's 95% Wilson interval, as metrics.json states it (issue 28 item 2)
    assert summary["families"]["colour_yes_no"]["ci95"] == {"accuracy": [round(x, 6) for x in wilson(1, 3)]}
    assert summary["ci95"] == {"accuracy": [round(x, 6) for x in wilson(2, 6)]}


def test_reasoning_answers_and_mcq(tmp_path):
    q = "Which object falls first?\nA) the ball\nB) the cube\nC) the cone"
    results = [
        {"video_id": "m1", "question": q, "gt": "B", "response": "<think>\nthe cube is heavier\n</think>\n\n<answer>\nB\n</answer>"},
        {"video_id": "m2", "question": q, "gt": "the cone", "response": "<think>hmm</think>\n\nThe answer is (A)."},
        {"video_id": "m3", "question": q, "gt": "A", "response": "<think>I keep thinking and never answer"},
        {"video_id": "m4", "question": q, "gt": "A", "response": "<think>x</think><answer>the ball</answer>"},
    ]
    results_dir, ann = _write_eval(tmp_path, results)
    (results_dir / "metrics.json").write_text(json.dumps({"task_type": "mcq", "answer_type": "reasoning"}))  # defaults come from it
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"))
    rows = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert [(r["video_id"], r["answer"], r["error_type"]) for r in rows] == [("m2", "A", "mismatch"), ("m3", None, "mismatch")]
    assert rows[1]["response"].startswith("<think>")  # the raw response
    assert (summary["task"], summary["task_type"], summary["answer_type"], summary["unparseable"]) == ("mcq", "mcq", "reasoning", 1)
    short = analyze_gaps(str(results_dir), str(tmp_path / "s.parquet"), answer_type="short")
    assert short["failures"] == 4  # read as short answers, no response names an option


def test_open_answers_media_root_and_absolute_paths(tmp_path):
    results = [
        {"video_id": "a", "question": "Colour?", "gt": "red", "response": "red"},
        {"video_id": "b", "question": "Colour?", "gt": "blue", "response": "green"},
        {"video_id": "c", "question": "Colour?", "gt": 3, "response": "3"},  # numbers compare as text
        {"video_id": "d", "question": "Colour?", "gt": "yes", "response": "no"},
    ]
    annotations = [{"id": "b", "video": "clips/b.mp4"}, {"id": "d", "video": "/abs/d.mp4"}, {"id": "a", "video": "a.mp4"}]
    results_dir, ann = _write_eval(tmp_path, results, annotations)
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"), annotations=str(ann), media_root="s3://bucket/media/")
    rows = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert [(r["video_id"], r["media_path"], r["error_type"]) for r in rows] == [
        ("b", "s3://bucket/media/clips/b.mp4", "mismatch"),
        ("d", "/abs/d.mp4", "mismatch"),
    ]
    assert summary["counts"] == {"mismatch": 2} and summary["task"] == "exact_match"


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


def test_bad_json_is_an_input_error_naming_the_file(tmp_path):
    results_dir = tmp_path / "eval"
    results_dir.mkdir()
    for text, expected in (('{"video_id": "a"}', "array"), ('[{"video_id": "a"}, 3]', "OBJECT"), ('[{"video_id": "a",, }]', "Malformed")):
        (results_dir / "results.json").write_text(text)
        with pytest.raises(InputError, match=expected) as err:
            analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"))
        assert err.value.where.endswith("results.json")


def test_empty_results(tmp_path):
    results_dir, ann = _write_eval(tmp_path, [])
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"), annotations=str(ann))
    assert (summary["total"], summary["failures"]) == (0, 0)
    assert pq.read_table(tmp_path / "g.parquet").column_names == list(COLUMNS)


def test_many_rows_keep_results_order(tmp_path):
    """DuckDB reads in parallel: the parquet still lists failures in results.json order."""
    results = [{"video_id": f"r{i:05d}", "question": "Is it red?", "gt": "yes", "response": "no" if i % 3 else "yes"} for i in range(30000)]
    results_dir, _ = _write_eval(tmp_path, results[::-1], annotations=[], indent=None)
    summary = analyze_gaps(str(results_dir), str(tmp_path / "g.parquet"), threads=2)
    ids = pq.read_table(tmp_path / "g.parquet")["video_id"].to_pylist()
    assert ids == [r["video_id"] for r in results[::-1] if r["response"] == "no"]
    assert summary["counts"] == {"FP": 0, "FN": 20000}


def test_parts_give_the_rows_of_the_whole_file(tmp_path, monkeypatch):
    """results.json and the annotations read over parts of a few KiB (every core parses): the same
    parquet, in results order, as one read of each file; a malformed part is an InputError naming the file."""
    from skillbank.data import jsonparts

    results = [{"video_id": f"r{i:04d}", "question": "Is it red?", "gt": "yes" if i % 2 else "no", "response": "no" if i % 3 else "yes"}
               for i in range(2000)]
    results_dir, ann = _write_eval(tmp_path, results)
    whole = tmp_path / "whole.parquet"
    analyze_gaps(str(results_dir), str(whole), annotations=str(ann))
    monkeypatch.setattr(jsonparts, "PART_BYTES", 4096)
    split = tmp_path / "split.parquet"
    assert len(jsonparts.split_array(str(results_dir / "results.json")).bounds) > 10
    analyze_gaps(str(results_dir), str(split), annotations=str(ann))
    assert pq.read_table(split).to_pylist() == pq.read_table(whole).to_pylist()
    text = (results_dir / "results.json").read_text()
    cut = text.index("},", len(text) // 2) + 2
    (results_dir / "results.json").write_text(text[:cut] + "," + text[cut:])  # a stray comma between two records
    with pytest.raises(InputError) as err:
        analyze_gaps(str(results_dir), str(tmp_path / "bad.parquet"), annotations=str(ann))
    assert err.value.where.endswith("results.json") and "skillbank-parts" not in err.value.message


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
    assert summary["failures"] == 4
    assert summary["results_json"] == "memory://evalrun/results.json"
    with fs.open("/out/gaps.parquet", "rb") as f:
        assert pq.read_table(f)["media_path"][0].as_py() == "memory://data/v2.mp4"
    assert json.loads(fs.cat("/out/gaps.summary.json"))["failures"] == 4


def test_cli_public_flags_json_and_no_torch(tmp_path):
    results_dir, ann = _write_eval(tmp_path, YES_NO)
    out = tmp_path / "gaps.parquet"
    probe = (
        "import sys, runpy\n"
        f"sys.argv = [{str(ROOT / 'scripts' / 'analyze_gaps.py')!r}, '--results-dir', {str(results_dir)!r}, "
        f"'--gaps-parquet', {str(out)!r}, '--kpi-ann-path', {str(ann)!r}, '--kpi-media-path', '/media']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as e:\n    code = e.code\n"
        "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'pandas') if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env={**os.environ}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "4 of 6 failed" in proc.stdout
    assert "HEAVY []" in proc.stdout
    assert pq.read_table(out)["media_path"][0].as_py() == "/media/videos/v2.mp4"

    proc = skillbank("gaps", "--results-dir", str(results_dir), "--out", str(tmp_path / "b.parquet"), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    assert doc["ok"] and doc["failures"] == 4 and doc["summary_json"].endswith("b.summary.json")

    proc = skillbank("gaps", "--results-dir", str(tmp_path / "nope"), "--out", str(tmp_path / "c.parquet"), "--json")
    assert proc.returncode == 2
    assert json_out(proc)["ok"] is False
