"""Findings and the report: what is wrong, where, and how to fix it; one table or one JSON document.

Findings of one check on one file are capped (`CAP` shown, then one line counting the rest), so a
million-record file with the same defect everywhere still gives a report a person can read.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillbank.errors import InputError

Severity = Literal["error", "warning"]
CAP = 20
SHOWN_ERRORS = 8  # errors a failed gate lists in its message; `skillbank preflight` shows them all


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    message: str
    fix: str = ""
    where: str = ""


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

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "findings": [asdict(f) for f in self.findings], "stats": self.stats}

    def summary(self) -> dict[str, Any]:
        """What a command that ran preflight as its gate reports about it (counts include capped findings)."""
        return {"ok": self.ok, "errors": self.stats.get("errors", len(self.errors)), "warnings": self.stats.get("warnings", len(self.warnings))}

    def require_ok(self, *, skill: str, action: str, spec_path: str | Path, outcome: str = "nothing was launched") -> None:
        """The gate of train, demo and submit: raise one InputError listing the first errors, so each
        command stops before it launches anything and says the same thing the same way."""
        if self.ok:
            return
        errors = self.errors
        lines = [_line(f) for f in errors[:SHOWN_ERRORS]]
        if len(errors) > SHOWN_ERRORS:
            lines.append(f"... and {len(errors) - SHOWN_ERRORS} more")
        raise InputError(
            f"preflight found {self.summary()['errors']} error(s); {outcome}:\n    " + "\n    ".join(lines),
            where=str(spec_path),
            fix=f"fix them, then see every finding with `skillbank preflight --skill {skill} --action {action} --spec {spec_path}`",
        )


def _line(f: Finding) -> str:
    where = f" at {f.where}" if f.where else ""
    fix = f" (fix: {f.fix})" if f.fix else ""
    return f"{f.check}{where}: {f.message}{fix}"


class Findings:
    """Collects findings, keeping the first CAP per (check, group) and counting the rest."""

    def __init__(self, cap: int = CAP) -> None:
        self.cap = cap
        self.items: list[Finding] = []
        self._shown: dict[tuple[str, str], int] = {}
        self._hidden: dict[tuple[str, str], tuple[int, Severity]] = {}
        self._last: dict[tuple[str, str], int] = {}
        self.totals: dict[str, int] = {"error": 0, "warning": 0}  # shown or not

    def add(self, check: str, severity: Severity, message: str, fix: str = "", where: str = "", *, group: str = "") -> None:
        self.totals[severity] += 1
        key = (check, group)
        if self._shown.get(key, 0) >= self.cap:
            count, worst = self._hidden.get(key, (0, severity))
            self._hidden[key] = (count + 1, "error" if "error" in (worst, severity) else "warning")
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


def render_table(report: Report, width: int | None = None) -> str:
    """A readable table: check, severity, where, message (with its fix), then a one-line summary."""
    width = width or max(100, shutil.get_terminal_size((120, 20)).columns)
    rows = [(f.check, f.severity, f.where) for f in report.findings]
    w_check = max([len("CHECK"), *(len(r[0]) for r in rows)])
    w_sev = len("SEVERITY")
    w_where = min(48, max([len("WHERE"), *(len(r[2]) for r in rows)]))
    indent = w_check + w_sev + w_where + 6
    text_width = max(40, width - indent)
    lines = []
    if report.findings:
        lines.append(f"{'CHECK':<{w_check}}  {'SEVERITY':<{w_sev}}  {'WHERE':<{w_where}}  MESSAGE / FIX")
        for f in report.findings:
            where = f.where if len(f.where) <= w_where else "..." + f.where[-(w_where - 3):]
            body = textwrap.wrap(f.message, text_width) or [""]
            if f.fix:
                body += textwrap.wrap(f"fix: {f.fix}", text_width)
            lines.append(f"{f.check:<{w_check}}  {f.severity:<{w_sev}}  {where:<{w_where}}  {body[0]}")
            lines.extend(" " * indent + b for b in body[1:])
    lines.append(summary_line(report))
    return "\n".join(lines)


def summary_line(report: Report) -> str:
    n_err = report.stats.get("errors", len(report.errors))
    n_warn = report.stats.get("warnings", len(report.warnings))
    records = report.stats.get("records", {})
    counted = ", ".join(f"{n:,} {name}" for name, n in records.items())
    seconds = report.stats.get("seconds")
    took = f" in {seconds:.2f} s" if isinstance(seconds, (int, float)) else ""
    data = f"; records checked: {counted}" if counted else ""
    verdict = "ok to launch" if report.ok else "NOT ok to launch: fix the errors (nothing was launched)"
    return f"preflight: {n_err} error(s), {n_warn} warning(s){data}{took} -> {verdict}"
