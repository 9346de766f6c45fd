"""The answer rules, written once as DuckDB SQL: evaluate's metrics, `skillbank score`, `skillbank
gaps` and the evaluation's retry check all score responses with `rules_sql` (per row: `rowwise_sql`;
counts only: `source_counts_sql`, which runs the rules once per distinct answer; every row of a
parquet: `score_by_key`, the same once per distinct answer joined back), so a number in
metrics.json and a row in gaps.parquet always agree. SQL (RE2 regular expressions) because scoring
1M results must be a query, not a Python loop.

1. Extraction (answer_type). "short": the whole response is the answer. "reasoning" (Cosmos-Reason
   asked to think): the text of the last `<answer>` block (the closing tag optional, text around
   ignored; Cosmos-Reason1's format), else the text after the last `</think>` (Cosmos-Reason2's "final
   answer immediately after the </think> tag"), else nothing: the answer is not extractable. The tags
   are matched as written there, in lower case; the answer is trimmed of whitespace.
2. Normalisation, of the answer and the ground truth alike: lower case; runs of whitespace -> one
   space; leading / trailing whitespace and `. , ! ? ; : ' " `` ` `` *` dropped. "Yes." / " YES! " /
   "**yes**" -> "yes"; "3.5" stays "3.5". A label parse (3-5) also drops a leading "answer:",
   "final answer:", "the answer is" or "the final answer is".
3. Yes / no (task "", a group of rows whose every ground truth normalises to yes or no): the answer is
   yes when it starts with the word "yes" (followed by its end or a character that is not a letter,
   digit or underscore: RE2's `\\b`), no likewise: "Yes, there is a collision." -> yes, "yesterday"
   -> nothing. An answer that names both first ("yes or no", "yes/no", "No, yes.") or neither is
   unparseable.
4. Directions (task "its_directionality"): left / right / straight by the same rule.
5. Multiple choice (task "mcq"): the options are read from the question: an upper-case letter from A,
   in order, written `A)`, `(A)`, `A.` or `A:` and followed by a space (an option's text runs to the
   next option or the end of its line). An answer (and a ground truth) names option B when its text
   is B's text, or it is `B`, `(B)`, `B.`, `B)`, `B:` alone or followed by a space and more text
   ("B) a red ball", "(b) red"); "Answer: B" and "The answer is B" too. A letter that is not an
   option, two letters ("B or C", "B, C") or anything else is unparseable.
6. Exact match (task "", any other group): the normalised answer equals the normalised ground truth.

A group for rule 3 is the rows with the same `dataset` and `family` (either may be absent), so a mixed
set types each family's errors by that family's answers. An answer that cannot be extracted, is
empty, or names no label of the task is unparseable and counted as wrong (a yes/no FN when the truth
is yes, FP when it is no), never dropped.

Python callers use `score_rows` (and `extract_answer`, `normalize_answer`, `unscorable`), which run
the same SQL over the given rows. duckdb is imported only inside the functions that run a query.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

ANSWER_TYPES = ("short", "reasoning")
TASK_TYPES = ("", "its_directionality", "mcq")  # evaluate spec task.type
YES, NO = "yes", "no"
YES_NO = (YES, NO)
DIRECTIONS = ("left", "right", "straight")
UNPARSEABLE = "unparseable"
FIELDS = ("video_id", "question", "gt", "response", "family", "dataset", "turn")  # what scoring reads of a results row (turn: evaluate's
# index of the answer in a multi-turn record, 0 the first; absent: 0)
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_SEP = r"(?: ?/ ?| or | and |[,.;] ?)"  # between two labels that an answer names "both"


def _lit(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# ---- the rules as SQL expressions (each takes and returns SQL text) ------------------------------


def sql_extract(response: str, answer_type: str) -> str:
    """The answer in a response (rule 1), untrimmed (see sql_trim); NULL when a reasoning response has none."""
    if answer_type == "short":
        return f"coalesce({response}, '')"
    if answer_type != "reasoning":
        raise ValueError(f"answer_type must be one of {ANSWER_TYPES}, not {answer_type!r}")
    block = f"split_part(split_part({response}, '<answer>', -1), '</answer>', 1)"
    return (f"CASE WHEN contains({response}, '<answer>') THEN {block} "
            f"WHEN contains({response}, '</think>') THEN split_part({response}, '</think>', -1) END")


def sql_trim(text: str) -> str:
    """Whitespace dropped at both ends."""
    return f"regexp_replace({text}, '^\\s+|\\s+$', '', 'g')"


_ENDS = "[\\s.,!?;:'\"`*]"  # what normalisation drops at both ends: whitespace and this punctuation


def _layers(source: str, *layers: str) -> str:
    """SELECT *, <layer> FROM (...) for each layer in turn: a column computed once, read by the next layers."""
    for layer in layers:
        source = f"SELECT *, {layer} FROM ({source})"
    return source


def sql_clean(lowered: str, clean: Sequence[str] = ()) -> str:
    """Rule 2 on a lower-cased column: ends stripped of whitespace and punctuation, inner whitespace
    runs -> one space. One regular expression tells the (common) text that is already normal, or one
    of `clean`, a task's labels, skips the work."""
    dirty = _lit(f"^{_ENDS}|{_ENDS}$|\\s\\s|[\\t\\n\\r\\f\\v]")
    stripped = f"regexp_replace(regexp_replace({lowered}, {_lit(f'^{_ENDS}+')}, ''), {_lit(f'{_ENDS}+$')}, '')"
    full = f"regexp_replace({stripped}, '\\s+', ' ', 'g')"  # stripping first, then collapsing, gives the same text
    known = f"{lowered} IN ({', '.join(_lit(c) for c in clean)}) OR " if clean else ""
    return f"CASE WHEN {known}NOT regexp_matches({lowered}, {dirty}) THEN {lowered} ELSE {full} END"


def sql_normalize(text: str) -> str:
    """Rule 2 in one expression ('' for NULL)."""
    return sql_clean(f"lower(coalesce({text}, ''))")


def sql_label_text(norm: str) -> str:
    """A normalised answer without a leading "answer:" / "the answer is" (and what punctuation follows)."""
    prefix = f"^(?:the )?(?:final )?answer\\b(?: is\\b)?{_ENDS}*"
    return (f"CASE WHEN starts_with({norm}, 'answer') OR starts_with({norm}, 'the ') OR starts_with({norm}, 'final ') "
            f"THEN regexp_replace({norm}, {_lit(prefix)}, '') ELSE {norm} END")


def sql_start_labels(text: str, labels: Sequence[str]) -> str:
    """A struct {first, second}: the label a label text starts with (rules 3, 4) and the other label it
    names right after (a "both" answer); '' where none."""
    alt = "|".join(labels)
    pattern = f"^({alt})\\b(?:{_SEP}({alt})(?:[^a-z0-9 ]|$))?"
    return f"regexp_extract({text}, {_lit(pattern)}, ['first', 'second'])"


def sql_start_label(parsed: str) -> str:
    """The label of a sql_start_labels struct; NULL for neither or both."""
    return f"CASE WHEN {parsed}.first = '' OR {parsed}.second NOT IN ('', {parsed}.first) THEN NULL ELSE {parsed}.first END"


def sql_option_letters(question: str) -> str:
    """Rule 5: the letters of a question's option markers, in order (check them with sql_valid_letters)."""
    return f"regexp_extract_all({question}, '(?:^|\\s)\\(?([A-Z])[).:]\\s', 1)"


def sql_valid_letters(letters: str) -> str:
    """The option letters when they run A, B, C... (two or more), else []."""
    return f"CASE WHEN len({letters}) >= 2 AND array_to_string({letters}, '') = left('{ALPHABET}', len({letters})) THEN {letters} ELSE [] END"


def sql_option_texts(question: str) -> str:
    """The normalised option texts of a question, aligned with sql_option_letters when that is not empty."""
    pieces = f"regexp_split_to_array({question}, '(?:^|\\s)\\(?[A-Z][).:]\\s')[2:]"
    return f"list_transform({pieces}, lambda t: {sql_normalize('split_part(t, chr(10), 1)')})"


def sql_letter(text: str) -> str:
    """The option letter a label text is or starts with, upper case; NULL when none (rule 5)."""
    return (f"upper(coalesce(nullif(regexp_extract({text}, '^\\(([a-z])\\)(?:\\s|$)', 1), ''), "
            f"nullif(regexp_extract({text}, '^([a-z])(?:[.):](?:\\s|$)|$)', 1), '')))")


def sql_two_letters(text: str) -> str:
    """True when a label text names two options ("b or c", "(b)/(c)", "b, c")."""
    return f"regexp_matches({text}, '^\\(?[a-z]\\)?(?: ?/ ?| or | and |, ?)\\(?[a-z]\\)?(?:[).,;]|$)')"


def sql_option(text: str, letters: str, texts: str) -> str:
    """The option a label text (a column) names: by the option's text, else by its letter (sql_letter of
    the column, computed in the column `<text>_letter`); NULL for none or two."""
    return (f"CASE WHEN list_position({texts}, {text}) > 0 THEN {letters}[list_position({texts}, {text})] "
            f"WHEN {sql_two_letters(text)} THEN NULL "
            f"WHEN list_contains({letters}, {text}_letter) THEN {text}_letter END")


_INTERNAL = ("a_lower", "gt_lower", "a_norm", "gt_norm", "a_text")


def rules_sql(source: str, task_type: str) -> str:
    """Rules 2-6 on each row of `source` (a relation with extracted, gt, dataset, family and, for mcq,
    question, all VARCHAR): its columns plus truth (the ground truth's label, NULL when it names none;
    for task "" its normalised text), label (the label the answer names, NULL when none: yes/no for
    task "" rows whose truth is yes/no, a direction, an option letter) and text (task "": the
    normalised answer, NULL when empty or not extractable). Which of label / text scores a task ""
    row depends on its group (`yes_no_groups`)."""
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}")
    clean = {"": YES_NO, "its_directionality": DIRECTIONS}.get(task_type, ())
    steps = [
        "lower(extracted) AS a_lower, lower(coalesce(gt, '')) AS gt_lower",
        f"{sql_clean('a_lower', clean)} AS a_norm, {sql_clean('gt_lower', clean)} AS gt_norm",
    ]
    internal = list(_INTERNAL)
    if task_type == "mcq":
        internal += ["letters_found", "texts", "letters", "gt_text", "gt_text_letter", "a_text_letter"]
        steps += [
            f"{sql_option_letters('question')} AS letters_found, {sql_option_texts('question')} AS texts",
            f"{sql_valid_letters('letters_found')} AS letters, {sql_label_text('gt_norm')} AS gt_text, {sql_label_text('a_norm')} AS a_text",
            f"{sql_letter('gt_text')} AS gt_text_letter, {sql_letter('a_text')} AS a_text_letter",
            f"{sql_option('gt_text', 'letters', 'texts')} AS truth, "
            f"CASE WHEN extracted IS NOT NULL THEN {sql_option('a_text', 'letters', 'texts')} END AS label, NULL::VARCHAR AS text",
        ]
    else:
        internal += ["parsed"]
        labels = YES_NO if task_type == "" else DIRECTIONS
        listed = ", ".join(_lit(x) for x in labels)
        scored = f"extracted IS NOT NULL AND gt_norm IN ({listed})"  # rows whose answer is read as a label
        steps += [
            f"CASE WHEN {scored} THEN {sql_label_text('a_norm')} END AS a_text",
            # the common case (the whole answer is a label) skips the regular expression
            f"CASE WHEN {scored} AND a_text NOT IN ({listed}) THEN {sql_start_labels('a_text', labels)} END AS parsed",
            ("gt_norm" if task_type == "" else f"CASE WHEN gt_norm IN ({listed}) THEN gt_norm END") + " AS truth, "
            f"CASE WHEN a_text IN ({listed}) THEN a_text WHEN parsed IS NOT NULL THEN {sql_start_label('parsed')} END AS label, "
            + ("CASE WHEN extracted IS NOT NULL THEN nullif(a_norm, '') END" if task_type == "" else "NULL::VARCHAR") + " AS text",
        ]
    return f"SELECT * EXCLUDE ({', '.join(internal)}) FROM ({_layers(source, *steps)})"


def rowwise_sql(source: str, task_type: str, answer_type: str) -> str:
    """Rules 1-6 on each row of `source` (FIELDS, VARCHAR): dataset, family, truth, label, text (see
    rules_sql) and the text columns (video_id, question, gt, response, extracted, turn)."""
    return (f"SELECT dataset, family, truth, label, text, video_id, question, gt, response, extracted, turn "
            f"FROM ({rules_sql(_extracted(source, answer_type), task_type)})")


def _extracted(source: str, answer_type: str) -> str:
    return f"SELECT *, {sql_extract('response', answer_type)} AS extracted FROM ({source})"


def _keys(task_type: str) -> list[str]:
    """What the rules read of a row (rule 1 already applied): the same key, the same verdict."""
    return ["dataset", "family", "gt", "extracted"] + (["question"] if task_type == "mcq" else [])


def _grouped(source: str, task_type: str, answer_type: str) -> str:
    """Each distinct key of `source` with its rows (n)."""
    keys = ", ".join(_keys(task_type))
    return f"SELECT {keys}, count(*) AS n FROM ({_extracted(source, answer_type)}) GROUP BY ALL"


def counts_sql(scored: str, task_type: str, weight: str = "count(*)") -> str:
    """Counts by (dataset, family, truth_yes_no, truth, label, text_correct, text_missing) (COUNT_FIELDS):
    what metrics and the yes/no groups come from. For task "" truth is kept only when it is yes / no
    (open answers only need text_correct / text_missing), so the counts stay a few rows."""
    truth = "CASE WHEN truth IN ('yes', 'no') THEN truth END" if task_type == "" else "truth"
    return (
        f"SELECT dataset, family, coalesce(truth IN ('yes', 'no'), false) AS truth_yes_no, {truth} AS truth, "
        f"label, coalesce(text = truth, false) AS text_correct, text IS NULL AS text_missing, {weight} AS n "
        f"FROM ({scored}) GROUP BY ALL"
    )


def source_counts_sql(source: str, task_type: str, answer_type: str) -> str:
    """counts_sql straight from a source of many rows: the answer is extracted on every row, but the
    rules run once per distinct (dataset, family, gt, answer[, question]) (answers repeat a lot)."""
    return counts_sql(rules_sql(_grouped(source, task_type, answer_type), task_type), task_type, weight="sum(n)::BIGINT")


def final_sql(rowwise: str, task_type: str, yes_no_groups: Iterable[tuple[str | None, str | None]] = ()) -> str:
    """Each row's kind, answer (the label named, or the extracted text for exact match; NULL when
    unparseable), truth and correct; `yes_no_groups` are the task "" groups scored as yes / no."""
    if task_type == "":
        keys = ", ".join(_lit(_group_key(d, f)) for d, f in sorted(yes_no_groups, key=lambda g: _group_key(*g)))
        member = f"{_GROUP_KEY_SQL} IN ({keys})" if keys else "false"
        kind = f"CASE WHEN {member} THEN 'yes_no' ELSE 'exact_match' END"
    else:
        kind = _lit(task_type)
    pred = "CASE WHEN kind = 'exact_match' THEN text ELSE label END"
    return (
        f"SELECT *, CASE WHEN kind = 'exact_match' THEN CASE WHEN text IS NOT NULL THEN {sql_trim('extracted')} END ELSE label END AS answer, "
        f"coalesce({pred} = truth, false) AS correct "
        f"FROM (SELECT *, {kind} AS kind FROM ({rowwise}))"
    )


# a group as one string: RS (chr 30) for an absent dataset / family, US (chr 31) between the two
_GROUP_KEY_SQL = "coalesce(dataset, chr(30)) || chr(31) || coalesce(family, chr(30))"


def _group_key(dataset: str | None, family: str | None) -> str:
    return f"{chr(30) if dataset is None else dataset}{chr(31)}{chr(30) if family is None else family}"


# ---- running the rules --------------------------------------------------------------------------

COUNT_FIELDS = ("dataset", "family", "truth_yes_no", "truth", "label", "text_correct", "text_missing", "n")
Count = tuple  # one row of counts_sql, in COUNT_FIELDS order


def yes_no_groups(counts: Iterable[Count]) -> set[tuple[str | None, str | None]]:
    """The (dataset, family) groups of task "" whose every ground truth is yes / no (rule 3)."""
    groups: dict[tuple[str | None, str | None], bool] = {}
    for dataset, family, truth_yes_no, *_ in counts:
        groups[(dataset, family)] = groups.get((dataset, family), True) and bool(truth_yes_no)
    return {group for group, yes_no in groups.items() if yes_no}


_local = threading.local()
DUCKDB_SETTINGS = "SET enable_progress_bar = false"  # stdout carries one JSON document under --json


def connect() -> Any:
    """An in-memory DuckDB connection (one per thread, reused)."""
    con = getattr(_local, "con", None)
    if con is None:
        import duckdb

        con = _local.con = duckdb.connect()
        con.execute(DUCKDB_SETTINGS)
    return con


@dataclass
class ScoredSource:
    """A source scored on a connection: its counts (COUNT_FIELDS rows) and `final`, a query of every
    row kept (keep) with kind, answer, truth and correct, the text columns where kept."""

    counts: list[Count]
    final: str
    bad_truths: list[tuple[int, str | None]]  # (row index, gt) of rows whose ground truth names no label (directions, mcq)
    keyed: str = ""  # score_by_key: a query of each distinct key with its rows (n), kind, answer, truth and correct


def score_source(con: Any, source: str, task_type: str, answer_type: str, *, table: str = "sb_scored") -> ScoredSource:
    """Score `source` (a query of FIELDS, in row order) into the temporary table `table`, then resolve
    the yes/no groups. `final` numbers the rows (idx) by the table's rowid: CREATE TABLE AS keeps the source's order
    (DuckDB's preserve_insertion_order, on by default) while it reads in parallel."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {rowwise_sql(source, task_type, answer_type)}")
    counts = con.execute(counts_sql(f"SELECT * FROM {table}", task_type)).fetchall()
    bad: list[tuple[int, str | None]] = []
    if task_type != "" and any(c[3] is None for c in counts):
        bad = con.execute(f"SELECT rowid, gt FROM {table} WHERE truth IS NULL ORDER BY rowid LIMIT 5").fetchall()
    groups = yes_no_groups(counts) if task_type == "" else set()
    return ScoredSource(counts, final_sql(f"SELECT rowid AS idx, * FROM {table}", task_type, groups), bad)


def score_by_key(con: Any, source: str, task_type: str, answer_type: str, *, table: str = "sb_keys") -> ScoredSource:
    """score_source for a source that is cheap to read twice (a parquet file, a table) and numbers its
    rows in `idx`: the rules run once per distinct (dataset, family, gt, extracted answer[, question for mcq]),
    into the table `table`, and `final` joins every row to its key's kind, answer, truth and correct
    (its columns: the source's, extracted, truth, label, text, kind, answer, correct). Answers repeat a
    lot (the labels of a task, a reasoning reply's final answer), so the rules see a few rows, not all."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {rules_sql(_grouped(source, task_type, answer_type), task_type)}")
    counts = con.execute(counts_sql(f"SELECT * FROM {table}", task_type, weight="sum(n)::BIGINT")).fetchall()
    verdicts = final_sql(f"SELECT * FROM {table}", task_type, yes_no_groups(counts) if task_type == "" else set())
    on = " AND ".join(f"s.{k} IS NOT DISTINCT FROM v.{k}" for k in _keys(task_type))
    final = (f"SELECT s.*, v.truth, v.label, v.text, v.kind, v.answer, v.correct "
             f"FROM ({_extracted(source, answer_type)}) s JOIN ({verdicts}) v ON {on}")
    bad: list[tuple[int, str | None]] = []
    if task_type != "" and any(c[3] is None for c in counts):
        bad = con.execute(f"SELECT idx, gt FROM ({final}) WHERE truth IS NULL ORDER BY idx LIMIT 5").fetchall()
    return ScoredSource(counts, final, bad, verdicts)


def _text(value: Any) -> str | None:
    """A field as results.json readers see it: strings as they are, other JSON values as JSON text."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def rows_source(con: Any, name: str, rows: Sequence[dict[str, Any]]) -> str:
    """Register rows' FIELDS (as text) as the view `name` on `con`; return a query of them (for rowwise_sql)."""
    from skillbank.scoring import columns

    return columns.register(con, name, {f: [_text(r.get(f)) for r in rows] for f in FIELDS}, dict.fromkeys(FIELDS, "VARCHAR"))


@dataclass(frozen=True)
class Scored:
    """One row's score: kind (yes_no, exact_match, its_directionality, mcq), answer (None when
    unparseable), truth (the ground truth's label; None when it names none), correct."""

    kind: str
    answer: str | None
    truth: str | None
    correct: bool


def score_rows_with_counts(rows: Sequence[dict[str, Any]], task_type: str = "", answer_type: str = "short") -> tuple[list[Scored], ScoredSource]:
    """Score rows ({question, gt, response} [+ family, dataset]) in order; also the counts behind them."""
    con = connect()
    source = rows_source(con, "sb_rows_input", rows)
    try:
        scored = score_source(con, source, task_type, answer_type, table="sb_rows_scored")
        result = con.execute(f"SELECT kind, answer, truth, correct FROM ({scored.final}) ORDER BY idx").fetchall()
        con.execute("DROP TABLE sb_rows_scored")
    finally:
        con.unregister("sb_rows_input")
    return [Scored(*r) for r in result], scored


def score_rows(rows: Sequence[dict[str, Any]], task_type: str = "", answer_type: str = "short") -> list[Scored]:
    """Score rows ({question, gt, response} [+ family, dataset]) in order, with the rules above."""
    return score_rows_with_counts(rows, task_type, answer_type)[0] if rows else []


def extract_answer(response: Any, answer_type: str = "reasoning") -> str | None:
    """Rule 1 on one response: the answer text (trimmed); None when a reasoning response has none."""
    return extract_answers([response], answer_type)[0]


def extract_answers(responses: Iterable[Any], answer_type: str = "reasoning") -> list[str | None]:
    """Rule 1 on each response, in order (trimmed of whitespace)."""
    responses = [_text(r) for r in responses]
    if not responses:
        return []
    query = f"SELECT {sql_trim(sql_extract('r', answer_type))} FROM (SELECT unnest($1::VARCHAR[]) AS r)"
    return [row[0] for row in connect().execute(query, [responses]).fetchall()]


def normalize_answer(text: Any) -> str:
    """Rule 2 on one text."""
    return connect().execute(f"SELECT {sql_normalize('$1::VARCHAR')}", [_text(text)]).fetchall()[0][0]


def unscorable(rows: list[dict[str, Any]], task_type: str, answer_type: str) -> list[int]:
    """Indices of rows ({question, gt, response}) whose response cannot be scored: empty, no
    extractable answer, or not a label of the task (yes/no groups are judged on the rows given)."""
    return [i for i, s in enumerate(score_rows(rows, task_type, answer_type)) if s.answer is None]
