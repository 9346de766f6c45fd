"""Agent Skills frontmatter (agentskills.io): the keys, lengths and block-style YAML skills-ref accepts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ALLOWED_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_BODY_LINES = 500


def split(text: str) -> tuple[str, str] | None:
    """(frontmatter, body) of a SKILL.md, or None when it has no leading --- block."""
    match = re.match(r"^---\n(.*?)\n---\n?(.*)$", text, re.S)
    return (match.group(1), match.group(2)) if match else None


def problems(skill_md: Path) -> list[str]:
    text = skill_md.read_text(encoding="utf-8")
    parts = split(text)
    if parts is None:
        return ["SKILL.md must start with a --- frontmatter block"]
    head, body = parts
    found = []
    for number, line in enumerate(head.splitlines(), 1):
        value = line.split(":", 1)[1].strip() if ":" in line else ""
        if value[:1] in ("[", "{"):
            found.append(f"frontmatter line {number}: flow-style {value[:1]}...: write lists and maps in block style (strictyaml rejects flow style)")
    try:
        data: Any = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        return [f"frontmatter does not parse: {exc}"]
    if not isinstance(data, dict):
        return ["frontmatter must be a mapping"]
    for key in sorted(set(data) - ALLOWED_KEYS):
        found.append(f"frontmatter key {key!r} is not allowed (only {', '.join(sorted(ALLOWED_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not NAME.match(name) or len(name) > 64:
        found.append("name must be <= 64 chars of a-z, 0-9 and single hyphens")
    elif name != skill_md.parent.name:
        found.append(f"name {name!r} must equal the folder name {skill_md.parent.name!r}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        found.append("description is required (what the skill does and when to use it)")
    elif len(description) > 1024:
        found.append(f"description is {len(description)} chars (max 1024)")
    if len(str(data.get("compatibility", ""))) > 500:
        found.append("compatibility is over 500 chars")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        found.append("metadata must map strings to strings (quote numbers)")
    lines = body.count("\n") + 1
    if lines >= MAX_BODY_LINES:
        found.append(f"body is {lines} lines (keep it under {MAX_BODY_LINES}; push detail into references/)")
    return found
