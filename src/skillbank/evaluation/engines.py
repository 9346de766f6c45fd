"""Other engines' results read as they are: one reader per known field set, each into the one shape
the answer rules score (answers.FIELDS: video_id, question, gt, response, family, dataset).

A reader is a column mapping, so reading is one DuckDB read_json query (no Python object per row):

- skillbank: `skillbank evaluate`'s results.json rows {video_id, question, gt, response, ...} (gt and
  response identify it), also what the seed's evaluator and scripts copied from it write;
- cosmos-reason1: the per-sample files of Cosmos-Reason1's benchmark script (examples/benchmark
  tools/eval/evaluate.py): {datasource, video_id, prompt, correct_answer, reasoning, answer,
  full_response, is_correct}; prompt is the question, correct_answer the ground truth, full_response
  the response scored, datasource the dataset;
- cosmos-rl: the per-sample files of cosmos-rl's evaluator (the ITS evaluator of TAO's cosmos-rl):
  the same fields without prompt (so an mcq task, which reads its options from the question, cannot
  be scored from them).

Their own verdict (is_correct, from their own answer parse) is not what is scored; it is reported
beside ours (source.their_accuracy). Any other field set is an InputError that lists the fields
found and the --field mapping to pass (`--field gt=label --field response=output`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skillbank.errors import InputError
from skillbank.scoring.answers import FIELDS

REQUIRED = ("gt", "response")  # what scoring cannot do without


@dataclass(frozen=True)
class Reader:
    """One field set: `columns` maps our fields to theirs (absent: NULL); `identify` are the fields
    whose presence names the format (the ones scoring needs, so a version that drops, say, reasoning
    still reads); `verdict` their per-row correct flag, when they write one."""

    name: str
    columns: dict[str, str]
    identify: frozenset[str]
    verdict: str | None = None
    by_skillbank: bool = False
    about: str = ""

    def fields_read(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.columns.values(), *([self.verdict] if self.verdict else [])]))

    def select_sql(self, table: str, extra: str = "") -> str:
        """The FIELDS of `table` (a read_json of fields_read, all VARCHAR), in our names (and `extra` columns)."""
        columns = ", ".join(f"{_ident(self.columns[f])} AS {f}" if f in self.columns else f"NULL::VARCHAR AS {f}" for f in FIELDS)
        return columns + (f", {extra}" if extra else "") + f" FROM {table}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


SKILLBANK = Reader(
    "skillbank",
    {f: f for f in FIELDS},
    frozenset({"gt", "response"}),
    by_skillbank=True,
    about="skillbank evaluate's results.json (video_id, question, gt, response; family, dataset optional)",
)
COSMOS_REASON1 = Reader(
    "cosmos-reason1",
    {"video_id": "video_id", "question": "prompt", "gt": "correct_answer", "response": "full_response", "dataset": "datasource"},
    frozenset({"prompt", "correct_answer", "full_response"}),
    verdict="is_correct",
    about="Cosmos-Reason1 evaluate.py per-sample files (prompt, correct_answer, full_response, datasource)",
)
COSMOS_RL = Reader(
    "cosmos-rl",
    {"video_id": "video_id", "gt": "correct_answer", "response": "full_response", "dataset": "datasource"},
    frozenset({"correct_answer", "full_response"}),
    verdict="is_correct",
    about="cosmos-rl evaluator per-sample files (correct_answer, full_response, datasource; no question)",
)
READERS = (COSMOS_REASON1, COSMOS_RL, SKILLBANK)  # most specific first: Reason1's set holds cosmos-rl's


def detect(found: set[str], where: str) -> Reader:
    """The reader whose identifying fields are all present (the first, most specific, of READERS)."""
    for reader in READERS:
        if reader.identify <= found:
            return reader
    raise InputError(
        f"unknown results fields: {', '.join(sorted(found)) or '(none)'}; known sets: "
        + "; ".join(f"{r.name}: {', '.join(sorted(r.identify))}" for r in READERS),
        where=where,
        fix="map the fields: --field gt=FIELD --field response=FIELD (optional: question=, video_id=, family=, dataset=), "
        f"e.g. {mapping_hint(found)}",
    )


def mapping_hint(found: set[str]) -> str:
    """A --field example built from the fields found (the first plausible names, else placeholders)."""
    guesses = {
        "gt": ("label", "answer_gt", "ground_truth", "target", "gold", "reference", "expected", "correct_answer"),
        "response": ("prediction", "pred", "output", "generated", "model_output", "completion", "full_response", "text"),
        "question": ("question", "prompt", "query", "instruction"),
    }
    parts = []
    for ours, names in guesses.items():
        name = next((n for n in names if n in found), None)
        if name is None and ours == "question":
            continue
        parts.append(f"--field {ours}={name or 'FIELD'}")
    return " ".join(parts)


def parse_fields(items: list[str] | None) -> dict[str, str]:
    """--field OURS=THEIRS (repeatable) -> {ours: theirs}; names checked against FIELDS."""
    mapping: dict[str, str] = {}
    for item in items or ():
        ours, sep, theirs = item.partition("=")
        ours, theirs = ours.strip(), theirs.strip()
        if not sep or not theirs or ours not in FIELDS:
            raise InputError(f"--field {item!r} is not FIELD=THEIR_FIELD with FIELD one of {', '.join(FIELDS)}", where="--field", fix="e.g. --field gt=label --field response=prediction")
        mapping[ours] = theirs
    return mapping


def custom(mapping: dict[str, str], found: set[str], where: str) -> Reader:
    """A reader from --field: the mapped fields, and our own names for the fields not mapped when present."""
    missing = [theirs for theirs in mapping.values() if theirs not in found]
    if missing:
        raise InputError(
            f"--field names {', '.join(missing)}, not among the results' fields ({', '.join(sorted(found))})",
            where="--field",
            fix="map to fields the results have",
        )
    columns = {f: f for f in FIELDS if f in found} | mapping
    lacking = [f for f in REQUIRED if f not in columns]
    if lacking:
        raise InputError(
            f"no field for {', '.join(lacking)} (results' fields: {', '.join(sorted(found))})",
            where=where,
            fix=" ".join(f"--field {f}=FIELD" for f in lacking),
        )
    return Reader("custom", columns, frozenset(columns.values()), about="--field " + " ".join(f"{k}={v}" for k, v in mapping.items()))


@dataclass
class Source:
    """The results to score: what read_json reads, how, and the reader that maps it."""

    where: str  # what the user named
    pattern: str  # a file, or a folder's glob of per-sample files (our documents filtered out in the query)
    json_format: str  # read_json's format: array, newline_delimited or auto (an object or a list per file)
    layout: str  # results.json | json file | jsonl file | per-sample folder
    detect_paths: list[str]  # the files whose fields name the format
    files: int = 1
    reader: Reader = SKILLBANK
    fields_found: list[str] = field(default_factory=list)

    @property
    def choices(self) -> bool:
        """The rows carry a `choices` list (multiple choice with the options beside the question)."""
        return CHOICES in self.fields_found and CHOICES not in self.reader.columns.values()

    @property
    def by_skillbank(self) -> bool:
        """Written by `skillbank evaluate`: its results.json, our field set; metrics.json then goes beside it."""
        return self.layout == "results.json" and self.reader.by_skillbank

    def table_sql(self, columns: tuple[str, ...]) -> str:
        """read_json of `columns` (VARCHAR; NULL where absent; JSON text for other JSON values), in file order."""
        spec = ", ".join(f"{_lit(c)}: 'VARCHAR'" for c in columns)
        args = f"{_lit(self.pattern)}, format='{self.json_format}', columns={{{spec}}}"
        if self.layout != "per-sample folder":
            return f"read_json({args})"
        excluded = ", ".join(_lit(n) for n in NOT_RESULTS)
        return (f"(SELECT * EXCLUDE (sb_file) FROM read_json({args}, filename='sb_file') "
                f"WHERE parse_filename(sb_file) NOT IN ({excluded}) AND NOT suffix(sb_file, {_lit(SCORE_SUFFIX)}))")

    def query(self) -> str:
        """The results as answers.FIELDS rows; a `choices` list is written into its question as options
        A) ... B) ... (one per line) unless the question lists options already, so the answer rules read them."""
        if not self.choices:
            return "SELECT " + self.reader.select_sql(self.table_sql(self.reader.fields_read()))
        table = self.table_sql(tuple(dict.fromkeys([*self.reader.fields_read(), CHOICES])))
        rows = "SELECT " + self.reader.select_sql(table, extra=f"{_ident(CHOICES)} AS sb_choices")
        options = (f"list_aggregate(list_transform(from_json(sb_choices, '[\"VARCHAR\"]'), "
                   f"lambda c, i: chr((64 + i)::INTEGER) || ') ' || c), 'string_agg', chr(10))")
        listed = "regexp_matches(coalesce(question, ''), '(?:^|\\s)\\(?[A-Z][).:]\\s')"
        question = f"CASE WHEN sb_choices IS NULL OR {listed} THEN question ELSE concat_ws(chr(10), question, {options}) END"
        return f"SELECT * EXCLUDE (sb_choices) REPLACE ({question} AS question) FROM ({rows})"


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# ---- finding and reading the results -----------------------------------------------------------

CHOICES = "choices"  # a results field listing a multiple-choice item's options
NOT_RESULTS = ("metrics.json", "best_checkpoint.json", "import.json")  # our own documents, never result rows
SCORE_SUFFIX = "_score.json"  # cosmos-rl's evaluator writes directionality_score.json beside its per-sample files
LINES = (".jsonl", ".ndjson")
DETECT_FILES = 20  # per-sample files whose fields name the format


def _is_result_file(path: str) -> bool:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name not in NOT_RESULTS and not name.endswith(SCORE_SUFFIX)


def locate(results_dir: str) -> Source:
    """What --results-dir names: a results.json (ours, found as before: the folder's, the best checkpoint's,
    the only one below), else a .json / .jsonl file, else a folder of per-sample JSON files (or its one JSONL file)."""
    from skillbank.evaluation.results import filesystem, find_results_json

    fs, root = filesystem(results_dir)
    if fs.isfile(root):
        if root.endswith(LINES):
            return Source(results_dir, results_dir, "newline_delimited", "jsonl file", [results_dir])
        layout = "results.json" if root.rstrip("/").rsplit("/", 1)[-1] == "results.json" else "json file"
        return Source(results_dir, results_dir, "auto", layout, [results_dir])
    found = find_results_json(results_dir, missing_ok=True)
    if found:
        return Source(results_dir, found, "array", "results.json", [found])
    base = root.rstrip("/")
    files = sorted(p for p in fs.glob(base + "/**/*.json") if _is_result_file(p))
    spelled = results_dir.rstrip("/")
    if files:
        shown = [_spelled(spelled, base, p) for p in files[:DETECT_FILES]]
        return Source(results_dir, spelled + "/**/*.json", "auto", "per-sample folder", shown, files=len(files))
    lines = sorted(p for ext in LINES for p in fs.glob(f"{base}/**/*{ext}"))
    if len(lines) == 1:
        path = _spelled(spelled, base, lines[0])
        return Source(results_dir, path, "newline_delimited", "jsonl file", [path])
    raise InputError(
        f"no results under {results_dir}" + (f" ({len(lines)} JSONL files)" if lines else ""),
        where="--results-dir",
        fix="pass a results.json, a JSONL file, or a folder of per-sample JSON files (`skillbank evaluate` writes results_dir/results.json)",
    )


def _spelled(original: str, root: str, path: str) -> str:
    """`path` (as the filesystem lists it) under the user's spelling of `root` (a URL keeps its scheme)."""
    return original + path[len(root):] if path.startswith(root) else path


def read_fields(con: object, source: Source) -> list[str]:
    """The fields the results' rows have (the first files' of a per-sample folder)."""
    from skillbank.evaluation.results import json_errors

    paths = "[" + ", ".join(_lit(p) for p in source.detect_paths) + "]"
    with json_errors(source.where, "results"):
        described = con.execute(f"DESCRIBE SELECT * FROM read_json({paths}, format='{source.json_format}', union_by_name=true)").fetchall()  # type: ignore[attr-defined]
    return [row[0] for row in described]


def open_results(results_dir: str, mapping: dict[str, str]) -> tuple[object, Source]:
    """A DuckDB connection and the located, identified results (reader chosen by fields or by --field)."""
    from skillbank.evaluation.results import connection

    source = locate(results_dir)
    con = connection(source.pattern)
    found = read_fields(con, source)
    source.fields_found = found
    source.reader = custom(mapping, set(found), source.where) if mapping else detect(set(found), source.where)
    return con, source


def their_verdict(con: object, source: Source) -> dict[str, object] | None:
    """The other engine's own verdict (is_correct) summed, to show beside ours; None when it writes none."""
    verdict = source.reader.verdict
    if verdict is None or verdict not in source.fields_found:
        return None
    table = source.table_sql((verdict,))
    correct, judged = con.execute(  # type: ignore[attr-defined]
        f"SELECT count(*) FILTER (WHERE lower({_ident(verdict)}) = 'true'), count({_ident(verdict)}) FROM {table}"
    ).fetchone()
    return {"field": verdict, "correct": correct, "total": judged, "accuracy": round(correct / judged, 6) if judged else None}


def guess_answer_type(con: object, source: Source) -> str:
    """reasoning when some response holds an <answer> block or a </think> (a reasoning model's output), else short."""
    (reasoning,) = con.execute(  # type: ignore[attr-defined]
        f"SELECT coalesce(bool_or(contains(response, '<answer>') OR contains(response, '</think>')), false) FROM ({source.query()})"
    ).fetchone()
    return "reasoning" if reasoning else "short"


def detect_task(con: object, source: Source, answer_type: str) -> tuple[str, str]:
    """(task type, why) when none is given: "mcq" when every question lists options (A) ... B) ...,
    or the row has a `choices` list) and every ground truth names one of them; else "" (yes/no per
    family whose answers are all yes/no, else exact match)."""
    from skillbank.scoring import answers
    from skillbank.evaluation.results import json_errors

    query = source.query()
    letters = answers.sql_valid_letters("found")
    with json_errors(source.where, "results"):
        total, listed = con.execute(  # type: ignore[attr-defined]
            f"SELECT count(*), count(*) FILTER (WHERE len({letters}) >= 2) FROM "
            f"(SELECT {answers.sql_option_letters('question')} AS found FROM ({query}))").fetchone()
        if not total or listed < total:
            return "", "general: not every question lists options A) B) ..." if listed else "general"
        counts = con.execute(answers.source_counts_sql(query, "mcq", answer_type)).fetchall()  # type: ignore[attr-defined]
    if any(c[3] is None for c in counts):
        return "", "general: every question lists options, but not every ground truth names one"
    where = "a choices field" if source.choices else "options A) B) ... in every question"
    return "mcq", f"mcq, detected from {where}"


@dataclass
class Scoring:
    """How a source is scored and why: task and answer format, each with where it came from."""

    task: str
    task_from: str  # "--task", "metrics.json", or detect_task's reason
    answer_type: str
    answer_from: str  # "--answer-format", "metrics.json", "default", or "guessed from the responses"
    previous: dict[str, object]  # the metrics.json beside our results.json ({} for other engines' results)


def resolve_scoring(con: object, source: Source, task: str | None, answer_type: str | None) -> Scoring:
    """The task type and answer format of a source: as given, else what the metrics.json beside our
    results.json recorded, else detected (answer format: reasoning when a response holds <answer> or
    </think>, for other engines' results; task: detect_task)."""
    from skillbank.errors import InputError
    from skillbank.evaluation.results import METRICS, beside, read_metrics
    from skillbank.scoring.answers import ANSWER_TYPES

    previous = read_metrics(beside(source.pattern, METRICS)) if source.by_skillbank else {}
    if answer_type:
        answer, answer_from = answer_type, "--answer-format"
    elif previous.get("answer_type"):
        answer, answer_from = str(previous["answer_type"]), "metrics.json"
    elif source.by_skillbank:
        answer, answer_from = "short", "default"
    else:
        answer, answer_from = guess_answer_type(con, source), "guessed from the responses"
    if answer not in ANSWER_TYPES:
        raise InputError(f"unknown answer format {answer!r}", where="--answer-format", fix=f"one of {ANSWER_TYPES}")
    if task is not None:
        return Scoring(task, "--task", answer, answer_from, previous)
    if isinstance(previous.get("task_type"), str):
        return Scoring(str(previous["task_type"]), "metrics.json", answer, answer_from, previous)
    detected, why = detect_task(con, source, answer)
    return Scoring(detected, why, answer, answer_from, previous)
