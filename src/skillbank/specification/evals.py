"""The shape of a skill's evals/evals.json: agent tasks graded by checks a program runs on what the agent left.

The public bank's fields (id, question, expected_skill, expected_script, ground_truth, expected_behavior) plus
`checks` (machine checks over the workspace and the transcript), `setup` (how a fresh workspace is built) and
`fixtures` (a known-good and a known-bad workspace, built from the setup by steps, so every eval is shown able
to fail). This model is the contract: `skillbank schemas generate` writes schemas/evals.schema.json from it,
`skillbank validate` checks every evals.json against that schema, and skillbank.evals implements each kind.
Strings in checks and steps may name `{workspace}` (the workspace's absolute path) and `{bank}` (the bank's).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

MODEL_SKILL = "tao-finetune-cosmos-reason"
LAUNCHED = ("submitted", "running", "succeeded", "failed", "cancelled", "unknown")  # a job record that ran or was handed to an engine
CODE_SUFFIXES = (".py", ".sh", ".bash", ".js", ".ts", ".rb", ".pl", ".ipynb")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---- values a check compares with, or an answer step writes -------------------------------------------


class Source(_Strict):
    """A value: a literal, a dotted key of a file (JSON / YAML / TOML), or a dotted key of a skillbank
    command's --json output (run in the workspace when the check or step runs)."""

    value: Any = Field(None, description="a literal value")
    path: str | None = Field(None, description="a file, relative to the workspace (a glob: the newest match)")
    args: list[str] | None = Field(None, description="skillbank arguments (without `skillbank`), e.g. [\"score\", \"--results-dir\", \"r\", \"--json\"]")
    key: str | None = Field(None, description="dotted key into the file or the command's JSON (list items by index: trials.0.value)")

    @model_validator(mode="after")
    def _one(self) -> Source:
        given = [name for name in ("path", "args") if getattr(self, name) is not None] + (["value"] if "value" in self.model_fields_set else [])
        if len(given) != 1:
            raise ValueError(f"a source is exactly one of value, path or args (got {', '.join(given) or 'none'})")
        return self


# ---- checks -------------------------------------------------------------------------------------------


class _Check(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="names the check in grade output and in fixtures.bad_fails")
    note: str = Field("", description="why the check matters (shown when it fails)")


class FileCheck(_Check):
    """A file (glob) exists, or with exists false, none does."""
    kind: Literal["file"]
    path: str
    exists: bool = True


class ParsesCheck(_Check):
    """A file exists and parses (format from the suffix unless given)."""
    kind: Literal["parses"]
    path: str
    format: Literal["yaml", "json", "toml", "jsonl", "parquet"] | None = None


class KeyCheck(_Check):
    """A dotted key of a YAML / JSON / TOML file: equals a value, is one of several, lies in [min, max], contains
    or starts with a text. `equals: null` checks that the key is null or absent."""
    kind: Literal["key"]
    path: str
    key: str
    equals: Any = None
    one_of: list[Any] | None = None
    min: float | None = None
    max: float | None = None
    contains: str | None = None
    startswith: str | None = None

    @model_validator(mode="after")
    def _something(self) -> KeyCheck:
        if not ({"equals", "one_of", "min", "max", "contains", "startswith"} & self.model_fields_set):
            raise ValueError("a key check needs equals, one_of, min / max, contains or startswith")
        return self


class RecordsCheck(_Check):
    """A JSON array (or JSONL) of records: every record has these keys (non-null); its length."""
    kind: Literal["records"]
    path: str
    require: list[str] = []
    count: int | None = None
    min_count: int | None = None


class TextCheck(_Check):
    """A file's text (path "@answer": the agent's answer) matches every regex of `matches` and none of `absent`."""
    kind: Literal["text"]
    path: str
    matches: list[str] = []
    absent: list[str] = []


class UnchangedCheck(_Check):
    """An input the setup wrote has the bytes it had after setup (inputs are never modified)."""
    kind: Literal["unchanged"]
    path: str


class CodeLinesCheck(_Check):
    """No code file the agent wrote or changed (after setup) has more than `max` lines: the bank's commands,
    not hand-written converters."""
    kind: Literal["code_lines"]
    max: int = Field(ge=0)
    suffixes: list[str] = list(CODE_SUFFIXES)
    exclude: list[str] = Field([], description="globs (relative to the workspace) left out, e.g. a bank copy a maintainer edits")


class SkillbankCheck(_Check):
    """Run the real skillbank command (a subprocess, in the workspace) and compare its exit code; `matches`:
    regexes its stdout + stderr must match."""
    kind: Literal["skillbank"]
    args: list[str]
    exit: int = 0
    matches: list[str] = []


class PreflightCheck(_Check):
    """`skillbank preflight --skill S --action A --spec FILE ARGS...` exits as expected (0: ready to launch)."""
    kind: Literal["preflight"]
    spec: str
    action: str = "train"
    skill: str = MODEL_SKILL
    args: list[str] = []
    exit: int = 0


class JobCheck(_Check):
    """Job records (a glob of <results_dir>/jobs/*.json): at least one has a status of `status` (and the platform),
    and none has a status of `forbid` (by default: any launched state, so "rendered and not submitted")."""
    kind: Literal["job"]
    records: str = "**/jobs/*.json"
    status: list[str] = ["rendered"]
    platform: str | None = None
    forbid: list[str] = list(LAUNCHED)


class RanCheck(_Check):
    """The transcript has a skillbank invocation matching `argv` (fnmatch patterns, `a|b` for either): the first
    matches the command, each other one appears among its arguments in any order (a pattern with spaces,
    `--max-trials 6`, matches consecutive arguments; `--flag=value` counts as `--flag value`); none of
    `without` appears; and (when given) it exited with `exit`."""
    kind: Literal["ran"]
    argv: list[str] = Field(min_length=1)
    without: list[str] = []
    exit: int | None = None


class NotRanCheck(_Check):
    """No skillbank invocation of the transcript matches (the same matching as `ran`; a call with -h / --help runs
    nothing and counts for neither)."""
    kind: Literal["not_ran"]
    argv: list[str] = Field(min_length=1)
    without: list[str] = []
    exit: int | None = None


class OrderCheck(_Check):
    """An invocation matching `first` comes before the first one matching `then` (both ran)."""
    kind: Literal["order"]
    first: list[str] = Field(min_length=1)
    then: list[str] = Field(min_length=1)


class NumberCheck(_Check):
    """A number in the agent's answer (on a line matching `near`) equals `expected` within `tolerance`
    (absolute) or `rel` (relative); `percent`: 100 x the value is accepted too (0.95 written as 95%)."""
    kind: Literal["number"]
    expected: Source
    near: str | None = None
    tolerance: float = 0.0
    rel: float = 0.0
    percent: bool = False


class AnyCheck(_Check):
    """At least one of several checks passes (other ways to do the same thing)."""
    kind: Literal["any"]
    checks: list[Check] = Field(min_length=2)


Check = Annotated[
    Union[FileCheck, ParsesCheck, KeyCheck, RecordsCheck, TextCheck, UnchangedCheck, CodeLinesCheck, SkillbankCheck,
          PreflightCheck, JobCheck, RanCheck, NotRanCheck, OrderCheck, NumberCheck, AnyCheck],
    Field(discriminator="kind"),
]
AnyCheck.model_rebuild()


# ---- steps: the setup of a workspace, and the fixtures built on it ---------------------------------------


class DemoDatasetStep(_Strict):
    """The synthetic demo dataset (`skillbank make-demo-dataset --cache`): out/train, out/val."""
    kind: Literal["demo_dataset"]
    out: str
    records: int = Field(24, ge=6)
    seed: int = 0


class TinyModelStep(_Strict):
    """The tiny offline Qwen-VL (`skillbank make-tiny-model --cache`)."""
    kind: Literal["tiny_model"]
    out: str
    family: Literal["qwen2_5_vl", "qwen3_vl"] = "qwen2_5_vl"
    seed: int = 0


class WriteStep(_Strict):
    """A file: `text`, or `json` (any JSON value), or `lines` lines of filler code (a hand-written script)."""
    kind: Literal["write"]
    path: str
    text: str | None = None
    json_value: Any = Field(None, alias="json")
    lines: int | None = None
    append: bool = False

    @model_validator(mode="after")
    def _one(self) -> WriteStep:
        given = [n for n, v in (("text", self.text), ("lines", self.lines)) if v is not None] + (["json"] if "json_value" in self.model_fields_set else [])
        if len(given) != 1:
            raise ValueError(f"a write step has exactly one of text, json or lines (got {', '.join(given) or 'none'})")
        return self


class EditStep(_Strict):
    """Set or drop dotted keys of a YAML / JSON file; with `records`, of those items of a JSON array."""
    kind: Literal["edit"]
    path: str
    set: dict[str, Any] = {}
    drop: list[str] = []
    records: list[int] | None = None


class ReplaceStep(_Strict):
    """Replace text in a file (the old text must be there)."""
    kind: Literal["replace"]
    path: str
    old: str
    new: str


class RemoveStep(_Strict):
    kind: Literal["remove"]
    path: str


class CopyStep(_Strict):
    kind: Literal["copy"]
    source: str
    to: str


class ResultsStep(_Strict):
    """An evaluation's results.json written from an annotations file: every answer right but `wrong` (record
    indexes, answered wrongly) and `empty` (answered with nothing)."""
    kind: Literal["results"]
    annotations: str
    out: str
    wrong: list[int] = []
    empty: list[int] = []


class StudyStep(_Strict):
    """An Optuna study (SQLite) with finished trials: what `skillbank automl --status` reads."""
    kind: Literal["study"]
    out: str = Field(description="the study folder (study.db inside)")
    name: str
    metric: str = "accuracy"
    direction: Literal["maximize", "minimize"] = "maximize"
    max_trials: int | None = None
    trials: list[dict[str, Any]] = Field(description="{state: COMPLETE | PRUNED | FAIL, value, params: {dotted key: value}, reason}")


class BankStep(_Strict):
    """A copy of the bank (its sources, skills, schemas and tests: the skills link to tests, so `skillbank validate`
    passes in the copy) for maintainer tasks: every skillbank command of the eval (the agent's and the checks') runs
    from the copy."""
    kind: Literal["bank"]
    out: str = "bank"


class SkillbankStep(_Strict):
    """Run skillbank in the workspace (in a fixture: through the recording shim, as an agent would)."""
    kind: Literal["skillbank"]
    args: list[str]
    exit: int = 0
    cwd: str = "."
    stdout: str | None = Field(None, description="write the command's stdout to this file (the agent's `> FILE`)")


class TranscriptStep(_Strict):
    """Append a transcript entry as if the agent had run it (a fixture's invocation too costly to run)."""
    kind: Literal["transcript"]
    args: list[str]
    exit: int = 0


class AnswerStep(_Strict):
    """Write the agent's answer (answer.md): `text` with {value} replaced by `value` (x `scale` + `offset`,
    rounded to `digits`)."""
    kind: Literal["answer"]
    text: str
    value: Source | None = None
    scale: float = 1.0
    offset: float = 0.0
    digits: int = 4
    append: bool = False


Step = Annotated[
    Union[DemoDatasetStep, TinyModelStep, WriteStep, EditStep, ReplaceStep, RemoveStep, CopyStep, ResultsStep, StudyStep,
          BankStep, SkillbankStep, TranscriptStep, AnswerStep],
    Field(discriminator="kind"),
]


class Fixtures(_Strict):
    """The known-good workspace (setup + `good`, the steps a good agent takes) and the known-bad one (`bad`
    applied to the good one); `bad_fails` lists exactly the checks the bad one fails."""
    good: list[Step]
    bad: list[Step] = Field(min_length=1)
    bad_fails: list[str] = Field(min_length=1)


class Eval(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    question: str = Field(description="what a user would say to the agent; paths are relative to the workspace")
    expected_skill: str
    expected_script: str | None = Field(None, description="the command an agent is expected to run, e.g. `skillbank plan`")
    ground_truth: str
    expected_behavior: list[str] = Field(min_length=1)
    requires: list[str] = Field([], description="skillbank commands the eval needs; until each exists it is listed as pending")
    setup: list[Step] = []
    checks: list[Check] = Field(min_length=1)
    fixtures: Fixtures

    @model_validator(mode="after")
    def _ids(self) -> Eval:
        ids = [c.id for c in walk(self.checks)]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"check ids must be unique: {', '.join(twice)}")
        unknown = [i for i in self.fixtures.bad_fails if i not in ids]
        if unknown:
            raise ValueError(f"fixtures.bad_fails names checks that do not exist: {', '.join(unknown)}")
        return self


def walk(checks: list[Any]) -> list[Any]:
    """Every check, those inside `any` included."""
    out = []
    for check in checks:
        out.append(check)
        if isinstance(check, AnyCheck):
            out += walk(check.checks)
    return out


EVALS = TypeAdapter(list[Eval])


def json_schema() -> dict[str, Any]:
    """The JSON Schema of an evals.json (a JSON array of evals, as the public bank's)."""
    schema = EVALS.json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "skillbank://schemas/evals.schema.json",
        "title": "A skill's agent evals (evals/evals.json)",
        "description": " ".join((__doc__ or "").split()),
        **schema,
    }
