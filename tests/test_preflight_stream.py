"""The streaming reader and the record rules behind preflight's per-record checks."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path

import pytest

from skillbank.data import jsonstream as jsonarray
from skillbank.data.jsonstream import ArrayFormatError, iter_batches
from skillbank.preflight.records import RecordChecker, Wants, fast_columns
from skillbank.preflight.report import Findings


def rec(i: int) -> dict:
    return {
        "id": f"r{i}",
        "video": f"v/{i % 3}.mp4",
        "video_fps": 30.0,
        "conversations": [{"from": "human", "value": "<video>\nq }, {\"id\": x ?"}, {"from": "gpt", "value": "a"}],
    }


LAYOUTS = {
    "indent": lambda rs: json.dumps(rs, indent=2),
    "compact": lambda rs: json.dumps(rs),
    "tight": lambda rs: json.dumps(rs, separators=(",", ":")),
    "lines": lambda rs: "[\n" + ",\n".join(json.dumps(r) for r in rs) + "\n]\n",
}


def read_all(path: Path, chunk: int) -> list:
    return [r for batch in iter_batches(str(path), chunk) for r in batch]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("chunk", [7, 100, 1 << 20])
def test_every_record_in_order_whatever_the_layout_and_chunk(tmp_path: Path, layout: str, chunk: int) -> None:
    records = [rec(i) for i in range(60)]
    records[7]["conversations"][0]["value"] = "unicode é ü 漢字 and a } brace"
    records[8] = ["not", "an", "object"]
    path = tmp_path / "a.json"
    path.write_text(LAYOUTS[layout](records), encoding="utf-8")
    assert read_all(path, chunk) == records


def test_the_fast_path_carries_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"fast": 0}
    real = jsonarray._fast_loads

    def counting(data):
        calls["fast"] += 1
        return real(data)

    monkeypatch.setattr(jsonarray, "_fast_loads", counting)
    records = [rec(i) for i in range(3000)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=2))
    batches = list(iter_batches(str(path), 16 << 10))
    assert [r for b in batches for r in b] == records
    assert calls["fast"] >= len(batches) - 2


def test_nan_and_infinity_reach_the_record_rules(tmp_path: Path) -> None:
    text = json.dumps([rec(i) for i in range(40)], indent=1).replace('"video_fps": 30.0', '"video_fps": NaN', 1)
    path = tmp_path / "a.json"
    path.write_text(text)
    records = read_all(path, 256)
    assert len(records) == 40 and math.isnan(records[0]["video_fps"])


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("", "empty", 1, 1),
        ('{"a": 1}', "JSON object", 1, 1),
        ('{"a": 1}\n{"a": 2}\n', "JSON Lines", 1, 1),
        ('[{"a": 1},\n {"a": 2},]', "trailing comma", 2, 11),
        ('[{"a": 1},\n {"a" 2}]', "record 1", 2, 7),
        ('[{"a": 1}\n {"a": 2}]', "expected ','", 2, 2),
        ('[{"a": 1}, {"a": 2}', "ends inside the array", 1, 20),
        ('[{"a": 1}] trailing', "after the closing", 1, 12),
    ],
)
def test_format_errors_give_line_and_column(tmp_path: Path, text: str, message: str, line: int, column: int) -> None:
    path = tmp_path / "a.json"
    path.write_text(text)
    for chunk in (4, 1 << 20):
        with pytest.raises(ArrayFormatError) as caught:
            read_all(path, chunk)
        assert message in caught.value.message
        assert (caught.value.line, caught.value.column) == (line, column)


def test_records_before_a_syntax_error_are_yielded(tmp_path: Path) -> None:
    text = json.dumps([rec(i) for i in range(50)], indent=1).replace('"id": "r30"', '"id": "r30" oops')
    path = tmp_path / "a.json"
    path.write_text(text)
    seen = []
    with pytest.raises(ArrayFormatError) as caught:
        for batch in iter_batches(str(path), 512):
            seen.extend(batch)
    assert caught.value.index == 30 and len(seen) == 30


def test_empty_array(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("\ufeff [ ]\n")
    assert read_all(path, 3) == []


# ---- fast path vs exact path ---------------------------------------------------------------------

MUTATIONS = [
    lambda r: r.pop("id"),
    lambda r: r.update(id=""),
    lambda r: r.update(id=True),
    lambda r: r.update(id=None),
    lambda r: r.update(id=3.5),
    lambda r: r.pop("video_fps"),
    lambda r: r.update(video_fps=0),
    lambda r: r.update(video_fps=-1.0),
    lambda r: r.update(video_fps=float("inf")),
    lambda r: r.update(video_fps=float("nan")),
    lambda r: r.update(video_fps="30"),
    lambda r: r.update(video_fps=True),
    lambda r: r.update(video=""),
    lambda r: r.update(video=None),
    lambda r: r.update(video=5),
    lambda r: r.pop("video"),
    lambda r: r.update(image="a.png"),
    lambda r: r.pop("conversations"),
    lambda r: r.update(conversations="hi"),
    lambda r: r.update(conversations=[]),
    lambda r: r["conversations"].pop(),
    lambda r: r["conversations"].reverse(),
    lambda r: r["conversations"].append({"from": "human", "value": "more?"}),
    lambda r: r["conversations"][0].update({"from": "gpt"}),
    lambda r: r["conversations"][1].update({"from": "human"}),
    lambda r: r["conversations"][0].pop("from"),
    lambda r: r["conversations"][0].pop("value"),
    lambda r: r["conversations"][0].update(value=""),
    lambda r: r["conversations"][1].update(value=" \n"),
    lambda r: r["conversations"][1].update(value=7),
    lambda r: r["conversations"].__setitem__(0, "human: hi"),
    lambda r: r["conversations"].__setitem__(1, ["gpt", "a"]),
    lambda r: r["conversations"].insert(0, {"from": "system", "value": "be brief"}),
    lambda r: r["conversations"][0].update({"from": "USER"}),
]


def exact_problems(batch: list) -> list:
    findings = Findings(cap=10**9)
    RecordChecker("f", findings).columns(batch, 0, Wants())
    return findings.items


@pytest.mark.parametrize("mutation", range(len(MUTATIONS)))
def test_fast_path_accepts_only_what_the_exact_path_finds_clean(mutation: int) -> None:
    batch = [rec(i) for i in range(5)]
    batch[2] = copy.deepcopy(batch[2])
    MUTATIONS[mutation](batch[2])
    problems = exact_problems(batch)
    fast = fast_columns(batch, Wants(questions=True, meta=True))
    assert fast is None or not problems, problems


def test_fast_and_exact_columns_agree_on_clean_batches() -> None:
    rng = random.Random(0)
    batch = [rec(i) for i in range(50)]
    for r in batch[::7]:
        r["conversations"] += [{"from": "human", "value": "and?"}, {"from": "assistant", "value": "no"}]
    for r in batch[::5]:
        r["duration"] = rng.uniform(1, 100)
    batch.append({"id": 99, "video": "x.mp4", "video_fps": 25, "conversations": [{"from": "user", "value": "q"}, {"from": "gpt", "value": "a"}]})
    wants = Wants(questions=True, meta=True)
    fast = fast_columns(batch, wants)
    assert fast is not None
    findings = Findings()
    exact = RecordChecker("f", findings).columns(batch, 0, wants)
    assert findings.items == []
    assert (fast.ids, fast.videos, fast.images, fast.questions) == (exact.ids, exact.videos, exact.images, exact.questions)
    assert [i for i, _ in fast.meta] == [i for i, _ in exact.meta]


def test_without_orjson_the_stdlib_parser_gives_the_same_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [rec(i) for i in range(500)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=1))
    monkeypatch.setattr(jsonarray, "_fast_loads", json.loads)
    assert read_all(path, 4096) == records


def test_a_record_larger_than_the_chunk(tmp_path: Path) -> None:
    records = [rec(i) for i in range(5)]
    records[2]["conversations"][1]["value"] = "x" * 300_000
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=1))
    assert read_all(path, 1024) == records


def test_the_shared_boundary_guess() -> None:
    """skillbank.data.jsonarray: the cut both big-array readers (preflight, gaps) check by parsing."""
    from skillbank.data.jsonarray import last_boundary, record_opening

    text = b'[\n  {\n    "id": "a",\n    "x": [{\n    "id": 1}]\n  },\n  {\n    "id": "b"\n  }\n]'
    opening = record_opening(text, 4)
    assert opening == b'{\n    "id"'
    comma, following = last_boundary(text, opening)
    assert text[comma : comma + 1] == b"," and text[following:].startswith(opening)
    assert text[:comma].rstrip().endswith(b"}") and following > text.index(b'"a"')
    assert last_boundary(text, opening, 0, comma) is None  # the nested {"id" has no comma before it
    assert record_opening(b'{"k\\"ey": 1}') == b'{"k\\"ey"' and record_opening(b"[1, 2]") is None
    assert last_boundary(text, None) is None
