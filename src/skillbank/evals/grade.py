"""Grade one workspace against one eval: every check, one line each, passed only when all pass."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.evals.catalog import Entry
from skillbank.evals.checks import CHECKS, Grading
from skillbank.evals.workspace import Workspace


@dataclass
class Result:
    id: str
    kind: str
    passed: bool
    why: str
    note: str = ""


@dataclass
class Grade:
    skill: str
    eval: str
    workspace: str
    results: list[Result]
    transcripts: list[str]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> list[str]:
        return [r.id for r in self.results if not r.passed]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "skill": self.skill, "eval": self.eval, "workspace": self.workspace, "passed": self.passed,
                "failed": self.failed, "transcripts": self.transcripts, "checks": [asdict(r) for r in self.results]}

    def lines(self) -> list[str]:
        out = [f"{'PASS' if r.passed else 'FAIL'} {r.id} ({r.kind}): {r.why}" + (f" -- {r.note}" if r.note and not r.passed else "")
               for r in self.results]
        out.append(f"{self.skill}/{self.eval}: {sum(r.passed for r in self.results)}/{len(self.results)} checks passed"
                   + ("" if self.passed else f"; failed: {', '.join(self.failed)}"))
        return out


def grade(entry: Entry, workspace: Path, transcripts: list[Path] | None = None, runs: dict | None = None) -> Grade:
    """`runs`: command results shared with another grade of the same workspace (checks.Grading)."""
    root = Path(workspace)
    if not root.is_dir():
        raise InputError(f"{root}: no such workspace folder", where="--workspace", fix="the folder the agent worked in")
    for path in transcripts or []:
        if not Path(path).is_file():
            raise InputError(f"{path}: no such transcript file", where="--transcript", fix="the agent's transcript (JSONL or text)")
    g = Grading(Workspace(root, entry, [Path(p).resolve() for p in transcripts or []]), {} if runs is None else runs)
    results = []
    for check in entry.eval.checks:
        try:
            passed, why = CHECKS[check.kind](check, g)
        except Exception as exc:  # a check that cannot run is a failed check, said as such: never a crash of the grader
            passed, why = False, f"the check could not run: {type(exc).__name__}: {exc}"
        results.append(Result(check.id, check.kind, passed, why, check.note))
    return Grade(entry.skill, entry.eval.id, str(g.ws.root), results, g.transcript.files)
