"""Errors meant for the person or agent reading them: what is wrong, where, and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InputError(Exception):
    """Bad input: the CLI prints it without a traceback and exits 2 (nothing was launched)."""

    message: str
    where: str = ""
    fix: str = ""

    def __str__(self) -> str:
        parts = [f"{self.where}: {self.message}" if self.where else self.message]
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "\n  ".join(parts)


class RunError(Exception):
    """A run that started and failed (exit 1)."""


FIX = "; fix: "  # where a warning's text turns from what is wrong to what to do (one per fix)


def warning(what: str, *fixes: str) -> str:
    """A warning as JSON documents carry it: one string, `<what>; fix: <fix>` for each fix (`warning_lines` shows it)."""
    return what + "".join(FIX + fix for fix in fixes if fix)


def warning_lines(text: str) -> list[str]:
    """A warning for a person: `warning: <what>`, then one indented `fix: <what to do>` line per fix. Commands print
    these on stdout before their closing `next:` line (under --json the warnings stay in the document)."""
    what, *fixes = text.split(FIX)
    return [f"warning: {what}", *(f"  fix: {fix}" for fix in fixes)]
