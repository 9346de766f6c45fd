"""Findings and the report: what is wrong, where, and how to fix it; one table or one JSON document.

Every finding belongs to one group, named by its check's prefix: spec (spec.*), data (annotations.*,
media.*, vision.*, cache.*) or env (env.*: token, redis-server, GPUs, disk, model). Spec and data
are the same wherever they are checked; the environment is the machine's. When the job runs
elsewhere (`runs_on="node"`: a dry run, Slurm, Docker), env findings get severity "node" ("check on
the node"): they do not fail the report, and the job runs the env checks as its first step there.

Findings of one check on one file are capped (`CAP` shown, then one line counting the rest), so a
million-record file with the same defect everywhere still gives a report a person can read.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillbank.errors import InputError

Severity = Literal["error", "warning", "node"]
Group = Literal["spec", "data", "env"]
RunsOn = Literal["here", "node"]
GROUPS: tuple[Group, ...] = ("spec", "data", "env")
RUNS_ON: tuple[RunsOn, ...] = ("here", "node")
PREFIX_GROUP: dict[str, Group] = {"spec": "spec", "annotations": "data", "media": "data", "vision": "data", "cache": "data", "env": "env"}
GROUP_TITLES = {
    "spec": "spec: the spec's rules, parallel sizes, steps per rank, data paths",
    "data": "data: every annotation record, media files, the vision-token budget, example caches",
    "env": "env: HF_TOKEN, redis-server, GPUs, free disk at the output folder, the model",
}
NODE = "check on the node"  # how a "node" finding reads in text
ALWAYS = "spec.schema"  # reported whatever --only says: nothing is checked on a spec that does not load
CAP = 20
SHOWN_ERRORS = 8  # errors a failed gate lists in its message; `skillbank preflight` shows them all
_RANK = {"warning": 0, "node": 1, "error": 2}


def group_of(check: str) -> Group:
    """The group of a check, from its name's prefix (the one place that decides it)."""
    try:
        return PREFIX_GROUP[check.split(".", 1)[0]]
    except KeyError:
        raise ValueError(f"check {check!r} belongs to no group: name it {', '.join(p + '.*' for p in PREFIX_GROUP)}") from None


def parse_groups(values: Iterable[str] | None) -> frozenset[Group]:
    """--only values (repeated, or comma lists) as a set of groups; none given means every group."""
    wanted = {v.strip() for value in values or () for v in str(value).split(",") if v.strip()}
    unknown = sorted(wanted - set(GROUPS))
    if unknown:
        raise InputError(f"unknown check group(s) {', '.join(map(repr, unknown))}", where="--only", fix=f"use {', '.join(GROUPS)} (repeat --only or separate with commas)")
    return frozenset(wanted or GROUPS)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    message: str
    fix: str = ""
    where: str = ""
    group: Group = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "group", group_of(self.check))


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def on_node(self) -> list[Finding]:
        """Environment findings of a job that runs elsewhere: to check on the node (its first step does)."""
        return [f for f in self.findings if f.severity == "node"]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [asdict(f) for f in self.findings], "stats": self.stats}

    def summary(self) -> dict[str, Any]:
        """What a command that ran preflight as its gate reports about it (counts include capped findings)."""
        return {
            "ok": self.ok,
            "errors": self.stats.get("errors", len(self.errors)),
            "warnings": self.stats.get("warnings", len(self.warnings)),
            "runs_on": self.stats.get("runs_on", "here"),
            "check_on_node": [finding_line(f) for f in self.on_node],
            "warning_findings": [asdict(f) for f in self.warnings],  # each as `skillbank preflight --json` lists it
        }

    def require_ok(self, *, skill: str, action: str, spec_path: str | Path, outcome: str = "nothing was launched") -> None:
        """The gate of train, demo and submit: raise one InputError listing the first errors, so each
        command stops before it launches anything and says the same thing the same way."""
        if self.ok:
            return
        errors = self.errors
        lines = [finding_line(f) for f in errors[:SHOWN_ERRORS]]
        if len(errors) > SHOWN_ERRORS:
            lines.append(f"... and {len(errors) - SHOWN_ERRORS} more")
        raise InputError(
            f"preflight found {self.summary()['errors']} error(s); {outcome}:\n    " + "\n    ".join(lines),
            where=str(spec_path),
            fix=f"fix them, then see every finding with `skillbank preflight --skill {skill} --action {action} --spec {spec_path}`",
        )


def finding_line(f: Finding | dict[str, Any]) -> str:
    """One finding on one line (check, where, message, fix): how a gate's errors, its node checks and a dry run's
    warnings read. A dict: a finding as the JSON holds it (asdict, with its group)."""
    if isinstance(f, dict):
        f = Finding(f["check"], f["severity"], f["message"], f.get("fix", ""), f.get("where", ""))
    where = f" at {f.where}" if f.where else ""
    fix = f" (fix: {f.fix})" if f.fix else ""
    return f"{f.check}{where}: {f.message}{fix}"


class Findings:
    """Collects findings, keeping the first CAP per (check, group) and counting the rest.

    `only`: the check groups wanted (others are dropped; spec.schema always counts). `runs_on`:
    "node" turns env errors and warnings into "node" findings, which do not fail the report."""

    def __init__(self, cap: int = CAP, *, runs_on: RunsOn = "here", only: Iterable[Group] | None = None) -> None:
        self.cap = cap
        self.runs_on = runs_on
        self.only: frozenset[Group] = frozenset(only or GROUPS)
        self.items: list[Finding] = []
        self._shown: dict[tuple[str, str], int] = {}
        self._hidden: dict[tuple[str, str], tuple[int, Severity]] = {}
        self._last: dict[tuple[str, str], int] = {}
        self.totals: dict[str, int] = {"error": 0, "warning": 0, "node": 0}  # shown or not

    def wants(self, group: Group) -> bool:
        return group in self.only

    def add(self, check: str, severity: Severity, message: str, fix: str = "", where: str = "", *, group: str = "") -> None:
        kind = group_of(check)
        if kind not in self.only and check != ALWAYS:
            return
        if kind == "env" and self.runs_on == "node":
            severity = "node"
        self.totals[severity] += 1
        key = (check, group)
        if self._shown.get(key, 0) >= self.cap:
            count, worst = self._hidden.get(key, (0, severity))
            self._hidden[key] = (count + 1, max(worst, severity, key=_RANK.__getitem__))
            return
        self._shown[key] = self._shown.get(key, 0) + 1
        self._last[key] = len(self.items)
        self.items.append(Finding(check, severity, message, fix, where))

    def error(self, check: str, message: str, fix: str = "", where: str = "", *, group: str = "") -> None:
        self.add(check, "error", message, fix, where, group=group)

    def warning(self, check: str, message: str, fix: str = "", where: str = "", *, group: str = "") -> None:
        self.add(check, "warning", message, fix, where, group=group)

    def finish(self) -> list[Finding]:
        """The findings, with one summary line per capped (check, group) after its last shown one."""
        out = list(self.items)
        for key in sorted(self._hidden, key=lambda k: self._last[k], reverse=True):
            (check, group), (hidden, severity) = key, self._hidden[key]
            shown = self._shown[key]
            summary = Finding(
                check,
                severity,
                f"... and {hidden:,} more {check} finding(s) like the above ({shown + hidden:,} in all; first {shown} shown)",
                "fix the ones shown (the rest are likely the same defect), then run preflight again",
                group,
            )
            out.insert(self._last[key] + 1, summary)
        return out


def gate_lines(summary: dict[str, Any], label: str = "  preflight  : ", item: str = "  warning    : ") -> list[str]:
    """A gate's summary (Report.summary) in a dry run's text: the counts, then each warning as `finding_line`
    words it, so a count is never shown without what it counts (a capped check's "... and N more" line included)."""
    head = f"{label}{summary.get('errors', 0)} error(s), {summary.get('warnings', 0)} warning(s)"
    return [head, *(item + finding_line(f) for f in summary.get("warning_findings", []))]


def _severity(f: Finding) -> str:
    return NODE if f.severity == "node" else f.severity


def render_table(report: Report, width: int | None = None) -> str:
    """A readable table grouped by spec, data and env: check, severity, where, message (with its
    fix), then a one-line summary."""
    width = width or max(100, shutil.get_terminal_size((120, 20)).columns)
    rows = [(f.check, _severity(f), f.where) for f in report.findings]
    w_check = max([len("CHECK"), *(len(r[0]) for r in rows)])
    w_sev = max([len("SEVERITY"), *(len(r[1]) for r in rows)])
    w_where = min(48, max([len("WHERE"), *(len(r[2]) for r in rows)]))
    indent = w_check + w_sev + w_where + 6
    text_width = max(40, width - indent)
    lines = []
    if report.findings:
        lines.append(f"{'CHECK':<{w_check}}  {'SEVERITY':<{w_sev}}  {'WHERE':<{w_where}}  MESSAGE / FIX")
    for group in GROUPS:
        found = [f for f in report.findings if f.group == group]
        if not found:
            continue
        title = GROUP_TITLES[group]
        if any(f.severity == "node" for f in found):
            title += f" ({NODE}: the job checks it there as its first step)"
        lines.append(f"[{title}]")
        for f in found:
            where = f.where if len(f.where) <= w_where else "..." + f.where[-(w_where - 3):]
            body = textwrap.wrap(f.message, text_width) or [""]
            if f.fix:
                body += textwrap.wrap(f"fix: {f.fix}", text_width)
            lines.append(f"{f.check:<{w_check}}  {_severity(f):<{w_sev}}  {where:<{w_where}}  {body[0]}")
            lines.extend(" " * indent + b for b in body[1:])
    lines.append(summary_line(report))
    return "\n".join(lines)


def summary_line(report: Report) -> str:
    n_err = report.stats.get("errors", len(report.errors))
    n_warn = report.stats.get("warnings", len(report.warnings))
    n_node = report.stats.get("node", len(report.on_node))
    records = report.stats.get("records", {})
    counted = ", ".join(f"{n:,} {name}" for name, n in records.items())
    seconds = report.stats.get("seconds")
    took = f" in {seconds:.2f} s" if isinstance(seconds, (int, float)) else ""
    data = f"; records checked: {counted}" if counted else ""
    node = f", {n_node} to {NODE}" if n_node else ""
    only = report.stats.get("only")
    scope = f" ({'+'.join(only)} only)" if only and len(only) < len(GROUPS) else ""
    if not report.ok:
        verdict = "NOT ok to launch: fix the errors (nothing was launched)"
    elif report.stats.get("runs_on") == "node":
        verdict = "ok to launch there: the job checks the environment on the node as its first step"
    else:
        verdict = "ok to launch"
    return f"preflight{scope}: {n_err} error(s), {n_warn} warning(s){node}{data}{took} -> {verdict}"
