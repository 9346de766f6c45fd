"""Evaluate's per-item verdicts, read from results.json with DuckDB: the failing items (in an order that
takes each family in turn, so the first strips show every family) and the confusion counts of every
family (reference vs extracted answer, both normalised by the answer rules' rule 2; an answer the rules
could not read is "(unparseable)"). Counting verdicts is reading them: nothing here scores an answer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from skillbank.errors import InputError

NONE = "(none)"  # family of rows without one (metrics.json's key too)
UNPARSEABLE = "(unparseable)"
OTHER = "(other)"
MAX_LABELS = 10  # labels per confusion axis; rarer ones are folded into (other)
COLUMNS = ("video_id", "question", "gt", "response", "answer", "correct", "family")


@dataclass
class Confusion:
    family: str
    truths: list[str]
    answers: list[str]
    counts: list[list[int]]  # counts[truth][answer]


def _source(results_json: str) -> tuple[Any, str]:
    from skillbank.evaluation.results import connection, read_json_sql

    return connection(results_json), f"SELECT row_number() OVER () - 1 AS idx, * FROM {read_json_sql(results_json, COLUMNS)}"


def check(results_json: str) -> int:
    """The number of rows; InputError when a row carries no verdict (results not written by evaluate)."""
    from skillbank.evaluation.results import json_errors

    con, src = _source(results_json)
    with json_errors(results_json, "results"):
        total, first = con.execute(f"SELECT count(*), min(idx) FILTER (WHERE correct IS NULL) FROM ({src})").fetchone()
    if first is not None:
        raise InputError(f"results.json row {first} has no `correct` verdict: the report reads evaluate's verdicts, it does not score",
                         where=results_json, fix="pass a folder written by `skillbank evaluate` (its rows carry answer and correct)")
    return int(total)


def failures(results_json: str) -> list[dict[str, Any]]:
    """The failing rows (id, family, question, reference, answer, response), each family in turn."""
    con, src = _source(results_json)
    query = f"""
        SELECT video_id, coalesce(family, '{NONE}') AS family, question, gt, answer, response
        FROM (SELECT *, row_number() OVER (PARTITION BY family ORDER BY idx) AS turn FROM ({src}) WHERE lower(correct) <> 'true')
        ORDER BY turn, family, idx"""
    names = ("id", "family", "question", "reference", "answer", "response")
    return [dict(zip(names, row)) for row in con.execute(query).fetchall()]


def confusions(results_json: str) -> list[Confusion]:
    """Per family, counts of (reference, answer) with the answer rules' normalisation."""
    from skillbank.scoring.answers import sql_normalize

    con, src = _source(results_json)
    query = f"""
        SELECT coalesce(family, '{NONE}') AS family, {sql_normalize('gt')} AS truth,
               CASE WHEN answer IS NULL THEN '{UNPARSEABLE}' ELSE {sql_normalize('answer')} END AS said, count(*) AS n
        FROM ({src}) GROUP BY ALL ORDER BY ALL"""
    cells: dict[str, dict[tuple[str, str], int]] = defaultdict(dict)
    for family, truth, said, n in con.execute(query).fetchall():
        cells[family][(truth, said)] = int(n)
    return [_matrix(family, counts) for family, counts in sorted(cells.items())]


def _top(weights: dict[str, int], keep: list[str] = ()) -> list[str]:
    ranked = sorted(weights, key=lambda k: (-weights[k], k))
    if len(ranked) <= MAX_LABELS:
        return sorted(ranked, key=lambda k: (k == UNPARSEABLE, k))
    chosen = [k for k in ranked if k in keep][: MAX_LABELS - 1] or ranked[: MAX_LABELS - 1]
    chosen += [k for k in ranked if k not in chosen][: MAX_LABELS - 1 - len(chosen)]
    return sorted(chosen, key=lambda k: (k == UNPARSEABLE, k)) + [OTHER]


def _matrix(family: str, cells: dict[tuple[str, str], int]) -> Confusion:
    by_truth: dict[str, int] = defaultdict(int)
    by_said: dict[str, int] = defaultdict(int)
    for (truth, said), n in cells.items():
        by_truth[truth] += n
        by_said[said] += n
    truths = _top(by_truth)
    for truth in truths:  # every reference label is also a column, so the diagonal reads as "right"
        by_said.setdefault(truth, 0)
    answers = _top(by_said, keep=[*truths, UNPARSEABLE])
    t_index, a_index = {t: i for i, t in enumerate(truths)}, {a: i for i, a in enumerate(answers)}
    counts = [[0] * len(answers) for _ in truths]
    for (truth, said), n in cells.items():
        counts[t_index.get(truth, t_index.get(OTHER, 0))][a_index.get(said, a_index.get(OTHER, 0))] += n
    return Confusion(family, truths, answers, counts)
