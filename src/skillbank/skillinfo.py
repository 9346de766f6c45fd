"""Reading a skill's references/skill_info.yaml (light: yaml only, no pydantic)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from skillbank.errors import InputError
from skillbank.paths import skill_dir


@cache
def skill_info(skill: str) -> dict[str, Any]:
    path = skill_dir(skill) / "references" / "skill_info.yaml"
    if not path.is_file():
        raise InputError("the skill has no references/skill_info.yaml", where=str(path), fix="add it (see skills/models/*/references/skill_info.yaml)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"cannot parse skill_info.yaml: {exc}", where=str(path)) from None
    return data


def template_path(skill: str, action: str) -> Path:
    return skill_dir(skill) / "references" / f"spec_template_{action}.yaml"


def schema_path(skill: str, action: str) -> Path:
    return skill_dir(skill) / "schemas" / f"{action}.schema.json"
