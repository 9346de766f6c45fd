"""gaps over evaluate's results.parquet: the same failures as from results.json, and the rule that says
when the parquet may stand for results.json (evaluation.results_parquet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import ROOT
from skillbank.errors import InputError
from skillbank.evaluation import results_parquet
from skillbank.evaluation.metrics import score_results
from skillbank.gaps.analyze import analyze_gaps
from test_gaps import MIXED, YES_NO

MCQ = "Which object falls first?\nA) the ball\nB) the cube\nC) the cone"
REASONING = [
    {"video_id": "m1", "question": MCQ, "gt": "B", "response": "<think>\nthe cube is heavier\n</think>\n\n<answer>\nB\n</answer>"},
    {"video_id": "m2", "question": MCQ, "gt": "the cone", "response": "<think>hmm</think>\n\nThe answer is (A)."},
    {"video_id": "m3", "question": MCQ, "gt": "A", "response": "<think>I keep thinking and never answer"},
    {"video_id": "m4", "question": MCQ, "gt": "A", "response": "<think>x</think><answer>the ball</answer>"},
]
OPEN = [
    {"video_id": "a", "question": "Colour?", "gt": "red", "response": "red"},
    {"video_id": "b", "question": "Colour?", "gt": "blue", "response": "green"},
    {"video_id": "c", "question": "Colour?", "gt": 3, "response": "3"},
    {"video_id": "d", "question": "Colour?", "gt": "yes", "response": "no"},
]


def evaluation(tmp: Path, results: list[dict], *, task_type: str = "", answer_type: str = "short", videos: list | None = None) -> tuple[Path, Path]:
    """An evaluate output as evaluate writes it: results.json (the rows scored), results.parquet beside
    it (evaluate's own writer) and metrics.json; the annotations the records came from."""
    folder, data = tmp / "eval", tmp / "data"
    folder.mkdir(parents=True)
    data.mkdir()
    videos = videos if videos is not None else [f"videos/{r['video_id']}.mp4" for r in results]
    annotations = data / "annotations.json"
    annotations.write_text(json.dumps([{"id": r["video_id"], "video": v} for r, v in zip(results, videos)]))
    rows, _ = score_results(results, task_type, answer_type)
    (folder / "results.json").write_text(json.dumps(rows, indent=2))
    results_parquet.write(folder / results_parquet.PARQUET, rows, videos, results_json=folder / "results.json",
                          annotations=str(annotations), task_type=task_type, answer_type=answer_type)
    (folder / "metrics.json").write_text(json.dumps({"task_type": task_type, "answer_type": answer_type}))
    return folder, annotations


def both(tmp: Path, folder: Path, annotations: Path | None, **kw) -> tuple[dict, dict, list, list]:
    """gaps over the folder (its parquet), then over a copy holding only results.json: summaries and rows."""
    alone = tmp / "json_only"
    alone.mkdir()
    for name in ("results.json", "metrics.json"):
        (alone / name).write_bytes((folder / name).read_bytes())
    ann = str(annotations) if annotations else None
    a = analyze_gaps(str(folder), str(tmp / "from_parquet.parquet"), annotations=ann, **kw)
    b = analyze_gaps(str(alone), str(tmp / "from_json.parquet"), annotations=ann, **kw)
    return a, b, pq.read_table(tmp / "from_parquet.parquet").to_pylist(), pq.read_table(tmp / "from_json.parquet").to_pylist()


def _counts(summary: dict) -> dict:
    skip = {"results_json", "results_read", "gaps_parquet", "media_from", "results_parquet_ignored"}
    return {k: v for k, v in summary.items() if k not in skip}


@pytest.mark.parametrize("results, task_type, answer_type, annotated", [
    (YES_NO, "", "short", True),
    (MIXED, "", "short", True),
    (REASONING, "mcq", "reasoning", False),
    (OPEN, "", "short", True),
])
def test_parquet_gives_the_failures_of_results_json(tmp_path, results, task_type, answer_type, annotated):
    folder, annotations = evaluation(tmp_path, results, task_type=task_type, answer_type=answer_type)
    a, b, rows_a, rows_b = both(tmp_path, folder, annotations if annotated else None)
    assert a["results_read"] == str(folder / "results.parquet") and b["results_read"].endswith("json_only/results.json")
    assert "results_parquet_ignored" not in a and "results_parquet_ignored" not in b  # b: no parquet at all, nothing to say
    assert rows_a == rows_b and rows_a  # same rows, same order, same media paths
    assert _counts(a) == _counts(b)
    if annotated:  # the records' videos stood for the unchanged annotations: the file was not read
        assert (a["media_from"], b["media_from"]) == (str(folder / "results.parquet"), str(annotations))


def test_many_rows_keep_results_order_from_the_parquet(tmp_path):
    results = [{"video_id": f"r{i:05d}", "question": "Is it red?", "gt": "yes" if i % 2 else "no", "response": "no" if i % 3 else "yes"}
               for i in range(30000)][::-1]
    folder, annotations = evaluation(tmp_path, results)
    a, b, rows_a, rows_b = both(tmp_path, folder, annotations, threads=2)
    assert [r["video_id"] for r in rows_a] == [r["video_id"] for r in results if (r["response"] == "yes") != (r["gt"] == "yes")]
    assert rows_a == rows_b and a["counts"] == b["counts"]


def test_results_json_written_again_makes_the_parquet_stale(tmp_path):
    """results.json written again after the parquet (another evaluate, inference, a hand edit), or another
    results.json put in its place with an old mtime (cp -p): results.json is read, and the summary says why."""
    folder, annotations = evaluation(tmp_path, YES_NO)
    before = (folder / "results.json").stat()
    rows = json.loads((folder / "results.json").read_text())[:3]  # fewer rows now
    (folder / "results.json").write_text(json.dumps(rows))
    summary = analyze_gaps(str(folder), str(tmp_path / "g.parquet"), annotations=str(annotations))
    assert summary["results_read"] == str(folder / "results.json") and summary["total"] == 3
    assert "older than results.json" in summary["results_parquet_ignored"]
    os.utime(folder / "results.json", ns=(before.st_atime_ns, before.st_mtime_ns))  # the old mtime, other bytes
    summary = analyze_gaps(str(folder), str(tmp_path / "g2.parquet"), annotations=str(annotations))
    assert summary["total"] == 3 and "results.json changed after" in summary["results_parquet_ignored"]


def test_a_parquet_is_read_only_for_the_results_json_it_was_written_beside(tmp_path):
    folder, annotations = evaluation(tmp_path, YES_NO)
    other = folder / "other.json"  # another results file in the folder, same bytes and mtime
    other.write_bytes((folder / "results.json").read_bytes())
    st = (folder / "results.json").stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    summary = analyze_gaps(str(other), str(tmp_path / "g.parquet"), annotations=str(annotations))
    assert summary["results_read"] == str(other) and "not other.json" in summary["results_parquet_ignored"]


def test_a_parquet_older_than_results_json_is_not_trusted(tmp_path):
    folder, annotations = evaluation(tmp_path, YES_NO)
    st = (folder / "results.json").stat()
    os.utime(folder / "results.parquet", ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    summary = analyze_gaps(str(folder), str(tmp_path / "g.parquet"), annotations=str(annotations))
    assert summary["results_read"].endswith("results.json") and "older than results.json" in summary["results_parquet_ignored"]
    assert summary["failures"] == 4


def test_a_parquet_whose_row_count_disagrees_is_not_trusted(tmp_path):
    """A parquet with the stamp but other rows than the stamp says (copied over, cut short): results.json is read."""
    import duckdb

    folder, annotations = evaluation(tmp_path, YES_NO)
    path = folder / "results.parquet"
    con = duckdb.connect()
    [(stamp,)] = con.execute(f"SELECT decode(value) FROM parquet_kv_metadata('{path}')").fetchall()
    con.execute(f"COPY (SELECT * FROM '{path}' LIMIT 2) TO '{tmp_path / 'cut.parquet'}' (FORMAT parquet, KV_METADATA "
                f"{{'{results_parquet.STAMP_KEY}': '{stamp}'}})")
    os.replace(tmp_path / "cut.parquet", path)
    summary = analyze_gaps(str(folder), str(tmp_path / "g.parquet"), annotations=str(annotations))
    assert "holds 2 rows where results.json had 6" in summary["results_parquet_ignored"]
    assert (summary["results_read"], summary["total"], summary["failures"]) == (str(folder / "results.json"), 6, 4)


def test_a_parquet_skillbank_did_not_write_is_not_trusted(tmp_path):
    folder, annotations = evaluation(tmp_path, YES_NO)
    import duckdb

    duckdb.connect().execute(f"COPY (SELECT * FROM '{folder / 'results.parquet'}') TO '{tmp_path / 'plain.parquet'}' (FORMAT parquet)")
    os.replace(tmp_path / "plain.parquet", folder / "results.parquet")
    summary = analyze_gaps(str(folder), str(tmp_path / "g.parquet"))
    assert summary["results_read"].endswith("results.json") and "no skillbank.results stamp" in summary["results_parquet_ignored"]
    (folder / "results.parquet").write_bytes(b"not a parquet")
    os.utime(folder / "results.parquet")
    summary = analyze_gaps(str(folder), str(tmp_path / "g2.parquet"))
    assert summary["results_read"].endswith("results.json") and "unreadable" in summary["results_parquet_ignored"]


def test_changed_annotations_are_read_and_a_missing_video_is_the_same_input_error(tmp_path):
    folder, annotations = evaluation(tmp_path, YES_NO)
    records = json.loads(annotations.read_text())
    records[1]["video"] = "moved/v2.mp4"
    annotations.write_text(json.dumps(records))  # changed since the evaluation: its videos win
    summary = analyze_gaps(str(folder), str(tmp_path / "g.parquet"), annotations=str(annotations))
    assert summary["results_read"].endswith("results.parquet") and summary["media_from"] == str(annotations)
    assert pq.read_table(tmp_path / "g.parquet")["media_path"][0].as_py() == f"{annotations.parent}/moved/v2.mp4"

    other = tmp_path / "other"
    other.mkdir()
    folder2, annotations2 = evaluation(other, YES_NO, videos=[f"{r['video_id']}.mp4" if r["video_id"] != "v3" else None for r in YES_NO])
    with pytest.raises(InputError) as err:
        analyze_gaps(str(folder2), str(other / "g.parquet"), annotations=str(annotations2))
    assert "1 failing video_id(s)" in err.value.message and "'v3'" in err.value.message
    assert not (other / "g.parquet").exists()


def test_the_cli_over_a_parquet_imports_no_pandas_or_torch(tmp_path):
    folder, annotations = evaluation(tmp_path, YES_NO)
    probe = ("import sys\nfrom skillbank.cli import main\n"
             f"code = main(['gaps', '--results-dir', {str(folder)!r}, '--out', {str(tmp_path / 'g.parquet')!r}, "
             f"'--annotations', {str(annotations)!r}, '--json'])\n"
             "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'pandas', 'pyarrow') if m in sys.modules))\n"
             "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env={**os.environ}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout
    assert json.loads(proc.stdout[: proc.stdout.rindex("HEAVY")])["results_read"] == str(folder / "results.parquet")
