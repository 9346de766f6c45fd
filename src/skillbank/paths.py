"""Where the bank lives: the folder holding config.json and skills/ (SKILLBANK_ROOT overrides)."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from skillbank.errors import InputError


@cache
def bank_root() -> Path:
    env = os.environ.get("SKILLBANK_ROOT")
    candidates = [Path(env)] if env else [*Path(__file__).resolve().parents, *Path.cwd().resolve().parents]
    if not env:
        candidates.insert(0, Path.cwd().resolve())
    for folder in candidates:
        if (folder / "skills").is_dir() and (folder / "config.json").is_file():
            return folder
    raise InputError(
        "cannot find the skill bank (a folder with config.json and skills/)",
        fix="run from the skillbank checkout or set SKILLBANK_ROOT to it",
    )


def skills_dir() -> Path:
    return bank_root() / "skills"


def skill_dir(skill: str) -> Path:
    """The folder of a skill by name, searched under skills/<category>/<name>."""
    matches = sorted(p for p in skills_dir().glob(f"*/{skill}") if (p / "SKILL.md").is_file())
    if not matches:
        known = sorted(p.parent.name for p in skills_dir().glob("*/*/SKILL.md"))
        raise InputError(f"unknown skill {skill!r}", where="--skill", fix=f"one of: {', '.join(known)}")
    return matches[0]


def cache_dir() -> Path:
    """Where built assets (tiny models, demo datasets) are cached between runs."""
    return Path(os.environ.get("SKILLBANK_CACHE", Path.home() / ".cache" / "skillbank"))


def child_env() -> dict[str, str]:
    """This process's environment for a child Python process that imports this skillbank, wherever the parent found it."""
    package = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(package.parent), *filter(None, [env.get("PYTHONPATH")])])
    return env
