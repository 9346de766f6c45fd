"""The check kinds of specification/evals.py, one function each: (check, grading) -> (passed, why).

Each reads what the agent left (files, the answer, the transcript) or runs the real skillbank in the
workspace; `why` says what was found, so a failed line tells the reader what to look at. Nothing here
imports torch: `skillbank evals grade` is agent-facing.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from skillbank.evals.transcript import Invocation, Transcript, normalise
from skillbank.evals.workspace import MISSING, Workspace, dig
from skillbank.hashing import sha256_file
from skillbank.specification import evals as spec

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_PARSE_ERRORS = (OSError, ValueError, yaml.YAMLError, tomllib.TOMLDecodeError)


@dataclass
class Grading:
    """What every check of one grade shares: the workspace and the transcript, read once; each command run once.
    `runs` may be shared between grades (a fixture graded good, then bad): a command's result is reused only
    while every file of the workspace but the answer is as it was (same paths, sizes and mtimes)."""
    ws: Workspace
    runs: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    @cached_property
    def transcript(self) -> Transcript:
        return self.ws.transcript()

    @cached_property
    def fingerprint(self) -> tuple[Any, ...]:
        return self.ws.fingerprint()

    def cli(self, args: list[str]):
        key = (str(self.ws.root), tuple(args), self.fingerprint)
        if key not in self.runs:
            self.runs[key] = self.ws.run_cli(args)
        return self.runs[key]


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def _newest(g: Grading, pattern: str) -> Path | None:
    found = g.ws.glob(pattern)
    return found[-1] if found else None


# ---- files ----------------------------------------------------------------------------------------------


def file_check(c: spec.FileCheck, g: Grading) -> tuple[bool, str]:
    found = g.ws.glob(c.path)
    if c.exists:
        return bool(found), f"{len(found)} match(es): {', '.join(g.ws.rel(p) for p in found[:3])}" if found else f"{c.path}: nothing there"
    return not found, f"{c.path}: none, as asked" if not found else f"{c.path} exists: {', '.join(g.ws.rel(p) for p in found[:3])}"


def parses_check(c: spec.ParsesCheck, g: Grading) -> tuple[bool, str]:
    path = _newest(g, c.path)
    if path is None:
        return False, f"{c.path}: no such file"
    try:
        g.ws.load(path, c.format)
    except _PARSE_ERRORS as exc:
        return False, f"{g.ws.rel(path)} does not parse: {str(exc).splitlines()[0][:200]}"
    return True, f"{g.ws.rel(path)} parses"


def _loaded(g: Grading, pattern: str) -> tuple[Any, str]:
    path = _newest(g, pattern)
    if path is None:
        return MISSING, f"{pattern}: no such file"
    try:
        return g.ws.load(path), g.ws.rel(path)
    except _PARSE_ERRORS as exc:
        return MISSING, f"{g.ws.rel(path)} does not parse: {str(exc).splitlines()[0][:200]}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _equal(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, bool) or isinstance(found, bool):
        return found is wanted
    if isinstance(wanted, (int, float)):
        number = _number(found)
        return number is not None and math.isclose(number, float(wanted), rel_tol=1e-9, abs_tol=1e-12)
    return found == wanted


def key_check(c: spec.KeyCheck, g: Grading) -> tuple[bool, str]:
    data, where = _loaded(g, c.path)
    if data is MISSING:
        return False, where
    found = dig(data, c.key, MISSING)
    shown = "absent" if found is MISSING else _shown(found)
    head = f"{where} {c.key} = {shown}"
    if "equals" in c.model_fields_set:
        if c.equals is None:
            return found is MISSING or found is None, head + (", wanted null" if found not in (MISSING, None) else "")
        if not _equal(found, c.equals):
            return False, f"{head}, wanted {_shown(c.equals)}"
    if found is MISSING:
        return False, head
    if c.one_of is not None and not any(_equal(found, w) for w in c.one_of):
        return False, f"{head}, wanted one of {_shown(c.one_of)}"
    if c.min is not None or c.max is not None:
        number = _number(found)
        if number is None or (c.min is not None and number < c.min) or (c.max is not None and number > c.max):
            return False, f"{head}, wanted within [{c.min}, {c.max}]"
    text = str(found)
    if c.contains is not None and g.ws.expand(c.contains) not in text:
        return False, f"{head}, wanted it to contain {g.ws.expand(c.contains)!r}"
    if c.startswith is not None and not text.startswith(g.ws.expand(c.startswith)):
        return False, f"{head}, wanted it to start with {g.ws.expand(c.startswith)!r}"
    return True, head


def records_check(c: spec.RecordsCheck, g: Grading) -> tuple[bool, str]:
    data, where = _loaded(g, c.path)
    if data is MISSING:
        return False, where
    if not isinstance(data, list):
        return False, f"{where} is not a list of records"
    for i, rec in enumerate(data):
        missing = [k for k in c.require if dig(rec, k, None) is None] if isinstance(rec, dict) else list(c.require)
        if missing:
            return False, f"{where}: record {i} lacks {', '.join(missing)}"
    if c.count is not None and len(data) != c.count:
        return False, f"{where}: {len(data)} records, wanted {c.count}"
    if c.min_count is not None and len(data) < c.min_count:
        return False, f"{where}: {len(data)} records, wanted at least {c.min_count}"
    return True, f"{where}: {len(data)} records" + (f", each with {', '.join(c.require)}" if c.require else "")


def _text(g: Grading, path: str) -> tuple[str | None, str]:
    if path == "@answer":
        return g.ws.answer()
    found = _newest(g, path)
    if found is None:
        return None, f"{path}: no such file"
    return found.read_text(encoding="utf-8", errors="replace"), g.ws.rel(found)


def text_check(c: spec.TextCheck, g: Grading) -> tuple[bool, str]:
    text, where = _text(g, c.path)
    if text is None:
        return False, where
    missing = [p for p in c.matches if not re.search(g.ws.expand(p), text, re.M)]
    present = [p for p in c.absent if re.search(g.ws.expand(p), text, re.M)]
    if missing or present:
        return False, "; ".join([f"{where} lacks /{p}/" for p in missing] + [f"{where} has /{p}/" for p in present])
    return True, f"{where}: " + ", ".join([f"has /{p}/" for p in c.matches] + [f"no /{p}/" for p in c.absent])


def unchanged_check(c: spec.UnchangedCheck, g: Grading) -> tuple[bool, str]:
    setup = g.ws.setup_record()
    if setup is None:
        return False, "the workspace was not prepared by `skillbank evals prepare` (no .skillbank-eval/setup.json)"
    rel = g.ws.expand(c.path)
    before = setup["files"].get(rel)
    if before is None:
        return False, f"{rel}: the setup did not write it"
    path = g.ws.root / rel
    if not path.is_file():
        return False, f"{rel}: removed"
    now = sha256_file(path)
    return now == before, f"{rel}: " + ("as the setup left it" if now == before else "modified (inputs are never modified: write a new file)")


def code_lines_check(c: spec.CodeLinesCheck, g: Grading) -> tuple[bool, str]:
    setup = g.ws.setup_record()
    if setup is None:
        return False, "the workspace was not prepared by `skillbank evals prepare` (no .skillbank-eval/setup.json)"
    before = setup["files"]
    over = []
    suffixes = {s.lower() for s in c.suffixes}
    for rel, digest in g.ws.files(lambda name: Path(name).suffix.lower() in suffixes).items():
        if before.get(rel) == digest:
            continue
        if any(fnmatch.fnmatch(rel, g.ws.expand(pattern)) for pattern in c.exclude):
            continue
        lines = (g.ws.root / rel).read_text(encoding="utf-8", errors="replace").count("\n")
        if lines > c.max:
            over.append(f"{rel} ({lines} lines)")
    return not over, f"code written over {c.max} lines: {', '.join(over)}" if over else f"no code file over {c.max} lines written"


# ---- the real command line ------------------------------------------------------------------------------


def _run(g: Grading, args: list[str], exit_code: int, matches: list[str]) -> tuple[bool, str]:
    proc = g.cli(args)
    shown = "skillbank " + shlex.join(g.ws.expand(a) for a in args)
    output = proc.stdout + proc.stderr
    last = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "")
    if proc.returncode != exit_code:
        return False, f"`{shown}` exited {proc.returncode}, wanted {exit_code}: {last[:300]}"
    missing = [p for p in matches if not re.search(g.ws.expand(p), output, re.M)]
    if missing:
        return False, f"`{shown}` output lacks " + ", ".join(f"/{p}/" for p in missing)
    return True, f"`{shown}` exited {exit_code}" + (f": {last[:200]}" if last else "")


def skillbank_check(c: spec.SkillbankCheck, g: Grading) -> tuple[bool, str]:
    return _run(g, c.args, c.exit, c.matches)


def preflight_check(c: spec.PreflightCheck, g: Grading) -> tuple[bool, str]:
    if _newest(g, c.spec) is None:
        return False, f"{c.spec}: no such file"
    return _run(g, ["preflight", "--skill", c.skill, "--action", c.action, "--spec", c.spec, *c.args], c.exit, [])


def job_check(c: spec.JobCheck, g: Grading) -> tuple[bool, str]:
    records = []
    for path in g.ws.glob(c.records):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "status" in data and "platform" in data:
            records.append((g.ws.rel(path), data))
    if not records:
        return False, f"no job record at {c.records}"
    launched = [f"{rel} ({d['status']})" for rel, d in records if d["status"] in c.forbid]
    if launched:
        return False, f"a job was launched: {', '.join(launched)}"
    good = [rel for rel, d in records if d["status"] in c.status and (c.platform is None or d["platform"] == c.platform)]
    if not good:
        seen = ", ".join(f"{rel} ({d['platform']}, {d['status']})" for rel, d in records)
        return False, f"no {c.platform or ''} job record with status {'/'.join(c.status)}: {seen}".replace("no  job", "no job")
    return True, f"{', '.join(good[:3])}: {'/'.join(c.status)}" + (f" on {c.platform}" if c.platform else "")


# ---- the transcript -------------------------------------------------------------------------------------


def _fits(token: str, pattern: str) -> bool:
    return any(fnmatch.fnmatchcase(token, alternative) for alternative in pattern.split("|"))


def _window(tokens: tuple[str, ...], pattern: str) -> bool:
    """`pattern` (words separated by spaces: consecutive arguments) matches somewhere in tokens."""
    words = list(normalise(pattern.split()))
    return any(all(_fits(tokens[i + j], w) for j, w in enumerate(words)) for i in range(len(tokens) - len(words) + 1))


def matches(inv: Invocation, argv: list[str], without: list[str], exit_code: int | None, expand: Callable[[str], str]) -> bool:
    """The first pattern matches the command; each other pattern (`--flag value`: consecutive arguments) appears
    among its arguments, in any order; none of `without` appears."""
    patterns = [expand(p) for p in argv]
    if not inv.argv or not _fits(inv.argv[0], patterns[0]):
        return False
    if not all(_window(inv.argv[1:], p) for p in patterns[1:]):
        return False
    if any(_fits(token, expand(p)) for token in inv.argv for p in without):
        return False
    return exit_code is None or inv.exit == exit_code


def _describe(argv: list[str], without: list[str], exit_code: int | None) -> str:
    text = "skillbank " + " ".join(argv) + (f" without {' '.join(without)}" if without else "")
    return text + (f" exiting {exit_code}" if exit_code is not None else "")


HELP_FLAGS = frozenset({"-h", "--help"})


def _hits(c: spec.RanCheck | spec.NotRanCheck, g: Grading) -> list[Invocation]:
    """The matching calls; a call with -h / --help runs nothing (reading help is what agents should do), so it neither
    satisfies `ran` nor fails `not_ran`."""
    return [inv for inv in g.transcript.invocations
            if not HELP_FLAGS & set(inv.argv) and matches(inv, c.argv, c.without, c.exit, g.ws.expand)]


def _no_transcript(g: Grading) -> str | None:
    return None if g.transcript.files else f"no transcript (neither {g.ws.rel(g.ws.transcript_path)} nor --transcript FILE)"


def ran_check(c: spec.RanCheck, g: Grading) -> tuple[bool, str]:
    if (why := _no_transcript(g)) is not None:
        return False, why
    hits = _hits(c, g)
    what = _describe(c.argv, c.without, c.exit)
    if hits:
        return True, f"ran {what}: skillbank {shlex.join(hits[0].argv)}"[:400]
    return False, f"never ran {what} ({len(g.transcript.invocations)} skillbank call(s) in the transcript)"


def not_ran_check(c: spec.NotRanCheck, g: Grading) -> tuple[bool, str]:
    if (why := _no_transcript(g)) is not None:
        return False, why
    hits = _hits(c, g)
    what = _describe(c.argv, c.without, c.exit)
    if hits:
        return False, f"ran {what}: skillbank {shlex.join(hits[0].argv)}"[:400]
    return True, f"did not run {what}"


def order_check(c: spec.OrderCheck, g: Grading) -> tuple[bool, str]:
    if (why := _no_transcript(g)) is not None:
        return False, why
    calls = g.transcript.invocations
    first = next((i for i, inv in enumerate(calls) if matches(inv, c.first, [], None, g.ws.expand)), None)
    then = next((i for i, inv in enumerate(calls) if matches(inv, c.then, [], None, g.ws.expand)), None)
    a, b = _describe(c.first, [], None), _describe(c.then, [], None)
    if first is None or then is None:
        return False, f"never ran {a if first is None else b}"
    return first < then, f"{a} (call {first + 1}) " + ("before" if first < then else "after") + f" {b} (call {then + 1})"


# ---- the answer -----------------------------------------------------------------------------------------


def numbers_in(text: str) -> list[float]:
    found = []
    for token in _NUMBER.findall(text):
        try:
            found.append(float(token.replace(",", "")))
        except ValueError:
            continue
    return found


def number_check(c: spec.NumberCheck, g: Grading) -> tuple[bool, str]:
    expected, where = g.ws.value(c.expected, run=g.cli)
    wanted = _number(expected) if expected is not MISSING else None
    if wanted is None:
        return False, f"no reference number: {where}"
    text, source = g.ws.answer()
    if text is None:
        return False, source
    lines = [line for line in text.splitlines() if c.near is None or re.search(c.near, line, re.I)]
    if not lines:
        return False, f"{source}: no line mentions /{c.near}/"
    scales = (1.0, 100.0) if c.percent else (1.0,)
    found = numbers_in("\n".join(lines))
    for number in found:
        for scale in scales:
            if abs(number - wanted * scale) <= max(c.tolerance * scale, c.rel * abs(wanted * scale)) + 1e-12:
                return True, f"{source} says {number:g}; {where} = {wanted:g}"
    near = f" on lines with /{c.near}/" if c.near else ""
    return False, f"{source}{near} says {', '.join(f'{n:g}' for n in found[:6]) or 'no number'}; {where} = {wanted:g} (tolerance {c.tolerance:g}, rel {c.rel:g})"


def any_check(c: spec.AnyCheck, g: Grading) -> tuple[bool, str]:
    whys = []
    for inner in c.checks:
        ok, why = CHECKS[inner.kind](inner, g)
        if ok:
            return True, f"{inner.id}: {why}"
        whys.append(f"{inner.id}: {why}")
    return False, " | ".join(whys)


CHECKS: dict[str, Callable[[Any, Grading], tuple[bool, str]]] = {
    "file": file_check, "parses": parses_check, "key": key_check, "records": records_check, "text": text_check,
    "unchanged": unchanged_check, "code_lines": code_lines_check, "skillbank": skillbank_check, "preflight": preflight_check,
    "job": job_check, "ran": ran_check, "not_ran": not_ran_check, "order": order_check, "number": number_check, "any": any_check,
}
