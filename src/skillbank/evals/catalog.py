"""Every skill's evals/evals.json, read and validated against the contract (skillbank.specification.evals)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from skillbank.errors import InputError
from skillbank.paths import bank_root
from skillbank.specification.evals import EVALS, BankStep, Eval

EVALS_FILE = Path("evals") / "evals.json"


@dataclass(frozen=True)
class Entry:
    skill: str
    folder: Path  # the skill's folder
    eval: Eval

    @property
    def key(self) -> str:
        return f"{self.skill}/{self.eval.id}"

    def missing(self, commands: set[str]) -> list[str]:
        """The skillbank commands this eval requires that do not exist yet (it is pending until they do)."""
        return [c for c in self.eval.requires if c not in commands]

    @property
    def bank_copy(self) -> str | None:
        """The workspace folder of the bank copy a maintainer eval works in (None: the bank itself)."""
        return next((step.out for step in self.eval.setup if isinstance(step, BankStep)), None)


def skill_folders(root: Path | None = None) -> list[Path]:
    return sorted(p.parent for p in ((root or bank_root()) / "skills").glob("*/*/SKILL.md"))


def read_file(path: Path) -> list[Eval]:
    """One evals.json, validated; InputError naming the eval and the field on a bad one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read it as JSON: {exc}", where=str(path), fix="fix the file (a JSON array of evals)") from None
    try:
        return EVALS.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{path}: {first['msg']} at {where}", where=f"{path}:{where}",
                         fix="see schemas/evals.schema.json (`skillbank validate` checks every evals.json)") from None


def load(skill: str | None = None, root: Path | None = None) -> list[Entry]:
    """Every eval of every skill (or of one), in skill order then file order."""
    folders = skill_folders(root)
    if skill is not None:
        folders = [f for f in folders if f.name == skill]
        if not folders:
            known = ", ".join(f.name for f in skill_folders(root))
            raise InputError(f"unknown skill {skill!r}", where="--skill", fix=f"one of: {known}")
    out = []
    for folder in folders:
        path = folder / EVALS_FILE
        if path.is_file():
            out += [Entry(folder.name, folder, e) for e in read_file(path)]
    return out


def find(skill: str | None, eval_id: str, root: Path | None = None) -> Entry:
    """The eval `eval_id` (of `skill`, or of whichever skill has it)."""
    matches = [e for e in load(skill, root) if e.eval.id == eval_id]
    if not matches:
        raise InputError(f"no eval {eval_id!r}" + (f" in {skill}" if skill else ""), where="--eval",
                         fix="`skillbank evals list` lists them")
    if len(matches) > 1:
        raise InputError(f"eval {eval_id!r} is in {len(matches)} skills", where="--eval", fix="name the skill with --skill")
    return matches[0]
