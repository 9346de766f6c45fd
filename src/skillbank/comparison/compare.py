"""Two evaluations of the same items, compared: is model A really better than model B?

Each side is any results `skillbank score` reads (evaluate's results.json, a folder holding one, an
`evaluate --run` folder, other engines' files), scored with the same answer rules and the same task /
answer-format resolution as score (skillbank.evaluation.engines.resolve_scoring). The items are joined
on (video_id, question, turn) in one DuckDB session (turn: the answer's index in a multi-turn record, 0
where a side has none); a shared item whose reference answers differ (after the
rules' normalisation) is an InputError naming it, as is an item that appears twice on one side: then
the two sets are not the same test. Items only on one side are counted and named, never dropped silently.

On the paired items, overall and per family (else per dataset): n, a_correct, b_correct, a_only (A right,
B wrong), b_only, diff (accuracy A - B), diff_ci95 (Newcombe's paired interval, method 10),
diff_ci95_exact (the exact conditional interval, which agrees with the test), p_value (exact McNemar,
two-sided; full precision, never rounded to 0), p_value_one_sided (H1: A is better), a_ci95 / b_ci95
(Wilson), n_for_power_0_8 (Connor 1987: paired items needed to detect this difference at 80% power) and
disagreement (a sentence when Newcombe's interval and the exact test disagree about 0); each family also
p_adjusted (Holm across the families). The statistics are skillbank.scoring.stats.

Training overlap: each side's metrics.json `training_overlap` (evaluate writes it; computed here from the
recipe and annotations metrics.json names when an older evaluation lacks it; "not checked" with the
reason otherwise). When either side's overlapping ids are among the paired items, `clean` repeats the
overall comparison and every family's on the items neither model trained on.

`compare_dirs(a, b)` returns the `skillbank compare --json` document; comparison.markdown renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.scoring import stats

SHOWN = 5  # items named in an error before "..."
METHODS = {
    "a_ci95": "Wilson score interval (95%) of each side's accuracy on the paired items",
    "diff_ci95": "Newcombe 1998 (Stat Med 17:2635) method 10: paired difference of proportions, 95% (an approximation from "
                 "the two Wilson intervals; it can exclude 0 where the exact test is above 0.05, see disagreement)",
    "diff_ci95_exact": "exact conditional interval, 95%: the Clopper-Pearson interval of A's share of the discordant pairs "
                       "(Liddell 1983), as a difference (2 share - 1) * discordant / n; excludes 0 exactly when p_value < 0.05. "
                       "Conditional on how many pairs are discordant, it bounds how they split: with every discordant pair one "
                       "way its far end is the observed difference",
    "p_value": "exact McNemar test (binomial on the discordant pairs), two-sided, full precision",
    "p_value_one_sided": "exact McNemar test, one-sided, H1: A is more accurate than B",
    "p_adjusted": "Holm step-down adjustment of the families' two-sided p-values",
    "n_for_power_0_8": "paired items a two-sided McNemar test at alpha 0.05 needs to detect the observed difference with 80% "
                       "power, at the observed discordant shares: Connor 1987 (Biometrics 43:207), "
                       "n = ((z_0.975 sqrt(psi) + z_0.8 sqrt(psi - delta^2)) / delta)^2, psi = (a_only + b_only) / n, "
                       "delta = (a_only - b_only) / n; null when the difference is 0",
}


@dataclass
class Side:
    """One side of the comparison: what was read and how it was scored."""

    label: str
    where: str
    source: Any  # engines.Source
    scoring: Any  # engines.Scoring
    table: str  # the temp table of its scored rows


def compare_dirs(a: str | Path, b: str | Path) -> dict[str, Any]:
    """The comparison document of two evaluations (see the module docstring); InputError on bad input."""
    from skillbank.evaluation import engines
    from skillbank.evaluation.results import connection

    located = [(_locate(engines, str(path), label), str(path), label) for path, label in ((a, "A"), (b, "B"))]
    con = connection(*(source.pattern for source, _, _ in located))
    sides = [_score(con, engines, source, where, label) for source, where, label in located]
    _check_pairs(con, *sides)
    return _document(con, *sides)


def _locate(engines: Any, folder: str, label: str) -> Any:
    try:
        return engines.locate(folder)
    except InputError as exc:
        raise InputError(exc.message, where=f"{label} ({folder})", fix=exc.fix) from None


def _score(con: Any, engines: Any, source: Any, where: str, label: str) -> Side:
    """Identify the side's field set, resolve how it is scored, and score every row into a temp table."""
    from skillbank.evaluation.metrics import raise_bad_truths
    from skillbank.evaluation.results import json_errors
    from skillbank.scoring import answers

    source.fields_found = engines.read_fields(con, source)
    try:
        source.reader = engines.detect(set(source.fields_found), source.where)
    except InputError as exc:
        raise InputError(exc.message, where=f"{label} ({where})", fix="compare reads the field sets `skillbank score` knows; "
                         "score the results with --field and --per-sample, or rename their fields") from None
    scoring = engines.resolve_scoring(con, source, None, None)
    table = f"cmp_{label.lower()}"
    with json_errors(source.where, "results"):
        scored = answers.score_source(con, source.query(), scoring.task, scoring.answer_type, table=f"{table}_scored")
    raise_bad_truths(scored.bad_truths, scoring.task, where=source.where)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT idx, coalesce(video_id, '') AS video_id, coalesce(question, '') AS question, "
                f"coalesce(turn, '0') AS turn, gt, {answers.sql_normalize('gt')} AS ref, family, dataset, correct FROM ({scored.final})")
    con.execute(f"DROP TABLE {table}_scored")
    return Side(label, where, source, scoring, table)


def _named(rows: list[tuple[Any, ...]]) -> str:
    shown = "; ".join(f"video_id {r[0]!r}, question {r[1]!r}" for r in rows[:SHOWN])
    return shown + ("; ..." if len(rows) > SHOWN else "")


def _check_pairs(con: Any, a: Side, b: Side) -> None:
    """InputError when a side repeats an item or a shared item's references differ (not the same test)."""
    for side in (a, b):
        twice = con.execute(f"SELECT video_id, question FROM {side.table} GROUP BY video_id, question, turn HAVING count(*) > 1 "
                            f"ORDER BY min(idx) LIMIT {SHOWN + 1}").fetchall()
        if twice:
            raise InputError(f"items appear more than once ({_named(twice)}): an item is one (video_id, question, turn)",
                             where=f"{side.label} ({side.where})", fix="keep one result per item (one evaluation per results file)")
    differ = con.execute(f"SELECT a.video_id, a.question, a.gt, b.gt FROM {a.table} a JOIN {b.table} b USING (video_id, question, turn) "
                         f"WHERE a.ref <> b.ref ORDER BY a.idx LIMIT {SHOWN + 1}").fetchall()
    if differ:
        first = differ[0]
        raise InputError(f"the reference answer of a shared item differs: video_id {first[0]!r}, question {first[1]!r} has "
                         f"{first[2]!r} in A and {first[3]!r} in B" + (f" ({len(differ) - 1}{'+' if len(differ) > SHOWN else ''} more)" if len(differ) > 1 else ""),
                         where=f"A ({a.where}) vs B ({b.where})",
                         fix="compare two evaluations of the same annotations (same video_id, question and reference answer)")


def _group_column(con: Any) -> str | None:
    """family when any paired row has one, else dataset when any has one, else None."""
    (families, datasets) = con.execute("SELECT count(family), count(dataset) FROM cmp_pairs").fetchone()
    return "family" if families else "dataset" if datasets else None


def _round(x: float) -> float:
    return round(x, 6)


def paired(n: int, a_correct: int, b_correct: int, a_only: int, b_only: int) -> dict[str, Any]:
    """The comparison of n paired items from their counts (stats: Wilson, Newcombe, the exact conditional
    interval, exact McNemar, Connor's sample size). p-values keep full precision: 30 vs 0 is 1.86e-9, not 0."""
    both = a_correct - a_only
    neither = n - both - a_only - b_only
    p_two, p_one = stats.mcnemar_exact(a_only, b_only)
    r = _round
    acc_a, acc_b = (a_correct / n, b_correct / n) if n else (0.0, 0.0)
    row = {
        "n": n, "a_correct": a_correct, "b_correct": b_correct, "a_accuracy": r(acc_a), "b_accuracy": r(acc_b),
        "a_ci95": [r(x) for x in stats.wilson(a_correct, n)], "b_ci95": [r(x) for x in stats.wilson(b_correct, n)],
        "a_only": a_only, "b_only": b_only, "diff": r(acc_a - acc_b),
        "diff_ci95": [r(x) for x in stats.newcombe_paired(both, a_only, b_only, neither)],
        "diff_ci95_exact": [r(x) for x in stats.mcnemar_exact_interval(a_only, b_only, n)],
        "p_value": p_two, "p_value_one_sided": p_one,
        "n_for_power_0_8": stats.mcnemar_sample_size(a_only, b_only, n),
    }
    row["disagreement"] = disagreement(row)
    return row


def disagreement(row: dict[str, Any]) -> str | None:
    """Why Newcombe's interval and the exact McNemar test disagree about 0, when they do (else None)."""
    low, high = row["diff_ci95"]
    excludes, significant = low > 0 or high < 0, row["p_value"] < 0.05
    if excludes == significant:
        return None
    d = row["a_only"] + row["b_only"]
    floor = min(1.0, 2 * 0.5**d) if d else 1.0
    exact = "[{:+.3f}, {:+.3f}]".format(*row["diff_ci95_exact"])
    why = (f"the exact test sees only the {d} discordant pair(s) ({row['a_only']} vs {row['b_only']})"
           + (f", and {d} pair(s) cannot give a two-sided p below {floor:.4g} however they split" if floor >= 0.05 else "")
           + f"; Newcombe's interval is built from the two accuracies' Wilson intervals over all {row['n']} items, "
           "an approximation that is too narrow when the discordant pairs are few")
    if excludes:
        return (f"Newcombe's interval [{low:+.3f}, {high:+.3f}] excludes 0 but the exact McNemar p is {row['p_value']:.4g}: {why}. "
                f"The exact interval {exact} agrees with the test: the difference is not significant at 0.05.")
    return (f"The exact McNemar p is {row['p_value']:.4g} but Newcombe's interval [{low:+.3f}, {high:+.3f}] includes 0: {why}. "
            f"The exact interval {exact} agrees with the test.")


_COUNTS = ("count(*), count(*) FILTER (WHERE a_correct), count(*) FILTER (WHERE b_correct), "
           "count(*) FILTER (WHERE a_correct AND NOT b_correct), count(*) FILTER (WHERE b_correct AND NOT a_correct)")


def _document(con: Any, a: Side, b: Side) -> dict[str, Any]:
    con.execute(f"CREATE OR REPLACE TEMP TABLE cmp_pairs AS SELECT a.idx, a.video_id, a.question, coalesce(a.family, b.family) AS family, "
                f"coalesce(a.dataset, b.dataset) AS dataset, a.correct AS a_correct, b.correct AS b_correct "
                f"FROM {a.table} a JOIN {b.table} b USING (video_id, question, turn)")
    (n,) = con.execute("SELECT count(*) FROM cmp_pairs").fetchone()
    if not n:
        raise InputError("A and B share no item (joined on video_id, question and turn): they are evaluations of different sets",
                         where=f"A ({a.where}) vs B ({b.where})", fix="compare two evaluations of the same annotations")
    group = _group_column(con)
    families = _families(con, group, "TRUE")
    overlaps = {side.label.lower(): _overlap(con, side) for side in (a, b)}
    doc = {
        "a": _side_block(con, a), "b": _side_block(con, b),
        "paired": n,
        "overall": paired(*con.execute(f"SELECT {_COUNTS} FROM cmp_pairs").fetchone()),
        "group_by": group, "families": families,
        "only_in_a": _only(con, a, b), "only_in_b": _only(con, b, a),
        "training_overlap": overlaps,
        "clean": _clean(con, overlaps, group),
        "methods": METHODS,
        "warnings": _warnings(a, b, overlaps),
    }
    return doc


def _families(con: Any, group: str | None, where: str) -> dict[str, Any]:
    """paired() of each family (or dataset) of the pairs `where` holds, with Holm's adjusted p across them."""
    from skillbank.evaluation.metrics import NONE_KEY

    families: dict[str, Any] = {}
    if not group:
        return families
    for name, *counts in con.execute(f"SELECT coalesce({group}, '{NONE_KEY}') AS g, {_COUNTS} FROM cmp_pairs WHERE {where} "
                                     "GROUP BY g ORDER BY g").fetchall():
        families[name] = paired(*counts)
    for name, adjusted in zip(families, stats.holm([f["p_value"] for f in families.values()])):
        families[name]["p_adjusted"] = adjusted
    return families


def _side_block(con: Any, side: Side) -> dict[str, Any]:
    (items, correct) = con.execute(f"SELECT count(*), count(*) FILTER (WHERE correct) FROM {side.table}").fetchone()
    previous = side.scoring.previous
    return {"path": side.where, "results": side.source.pattern if side.source.by_skillbank else side.source.where,
            "format": side.source.reader.name, "task_type": side.scoring.task, "task_from": side.scoring.task_from,
            "answer_type": side.scoring.answer_type, "answer_type_from": side.scoring.answer_from,
            "items": items, "accuracy": round(correct / items, 6) if items else 0.0, "model": previous.get("model")}


def _only(con: Any, side: Side, other: Side) -> dict[str, Any]:
    rows = con.execute(f"SELECT video_id, question FROM {side.table} s ANTI JOIN {other.table} o USING (video_id, question, turn) "
                       "ORDER BY s.idx").fetchall()
    return {"count": len(rows), "items": [{"video_id": v, "question": q} for v, q in rows]}


def _overlap(con: Any, side: Side) -> dict[str, Any]:
    """The side's training overlap (evaluation.overlap) and how many of its ids are paired items."""
    from skillbank.evaluation import overlap

    if not side.source.by_skillbank:
        block = overlap.not_checked("results skillbank's evaluate did not write: no metrics.json names the model's recipe")
    elif not side.scoring.previous:
        block = overlap.not_checked("no metrics.json beside the results")
    else:
        block = overlap.from_metrics(dict(side.scoring.previous))
    ids = [str(i) for i in block.get("ids") or []]
    con.execute(f"CREATE OR REPLACE TEMP TABLE cmp_overlap_{side.label.lower()} AS SELECT unnest(?::VARCHAR[]) AS video_id", [ids])
    (in_pairs,) = con.execute(f"SELECT count(*) FROM cmp_pairs WHERE video_id IN (SELECT video_id FROM cmp_overlap_{side.label.lower()})").fetchone()
    keep = ("checked", "reason", "training_data", "count", "ids", "by_video", "by_question_answer", "excluded", "note")
    return {**{k: block[k] for k in keep if k in block}, "paired_items": in_pairs}


_CLEAN = ("video_id NOT IN (SELECT video_id FROM cmp_overlap_a) AND video_id NOT IN (SELECT video_id FROM cmp_overlap_b)")


def _clean(con: Any, overlaps: dict[str, dict[str, Any]], group: str | None) -> dict[str, Any] | None:
    """The comparison, overall and per family, on the paired items neither model trained on (None when no
    paired item overlaps)."""
    if not any(o.get("paired_items") for o in overlaps.values()):
        return None
    row = con.execute(f"SELECT {_COUNTS} FROM cmp_pairs WHERE {_CLEAN}").fetchone()
    (n,) = con.execute("SELECT count(*) FROM cmp_pairs").fetchone()
    excluded = n - row[0]
    if not row[0]:
        return {"n": 0, "excluded": excluded, "families": {}}
    return {**paired(*row), "excluded": excluded, "families": _families(con, group, _CLEAN)}


def _warnings(a: Side, b: Side, overlaps: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    if a.scoring.task != b.scoring.task:
        out.append(f"A is scored as task {a.scoring.task!r} ({a.scoring.task_from}) and B as {b.scoring.task!r} ({b.scoring.task_from}): "
                   "the same answer can count differently on each side")
    for label, block in overlaps.items():
        if block.get("paired_items"):
            out.append(f"{label.upper()}: {block['paired_items']} paired item(s) share content with its model's training data "
                       f"({block.get('training_data')}): see `clean` for the comparison without them")
        elif not block.get("checked") and block.get("training_data"):
            out.append(f"{label.upper()}: training overlap not checked ({block.get('reason')})")
    return out


def to_markdown(doc: dict[str, Any]) -> str:
    """The document as a markdown table (comparison.markdown): what `compare --out FILE.md` writes."""
    from skillbank.comparison.markdown import to_markdown as render

    return render(doc)
