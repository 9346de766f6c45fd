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
