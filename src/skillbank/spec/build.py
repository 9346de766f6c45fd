"""The spec builder: template -> dataset root -> overrides -> validated spec (what `skillbank spec` does)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from skillbank.errors import InputError
from skillbank.skillinfo import skill_info, template_path
from skillbank.spec.overrides import apply_overrides, parse_assignment, resolve_key
from skillbank.spec.registry import spec_model
from skillbank.spec.validation import validate


@dataclass
class BuiltSpec:
    spec: BaseModel
    applied: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def load_template(skill: str, action: str) -> dict[str, Any]:
    path = template_path(skill, action)
    if not path.is_file():
        raise InputError(f"no spec template for action {action}", where=str(path), fix="run `skillbank schemas generate`")
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def dataset_root_overrides(skill: str, action: str, root: str | Path) -> dict[str, str]:
    """Map a dataset root onto spec keys through skill_info's data_sources for this action.

    A root with train/ and val/ subfolders (like `skillbank make-demo-dataset` writes) feeds
    train_datasets from DIR/train and eval_dataset from DIR/val; otherwise DIR feeds the
    action's primary source, and for train no validation keys are set.
    """
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        raise InputError(f"dataset root is not a folder: {base}", where="--dataset-root", fix="pass the folder holding annotations.json")
    sources = skill_info(skill).get("data_sources", {}).get(action)
    if not sources:
        raise InputError(f"action {action} takes no dataset root", where="--dataset-root", fix="set the paths with --set")
    split = (base / "train" / "annotations.json").is_file()
    roots: dict[str, Path] = (
        {"train_datasets": base / "train", "eval_dataset": base / ("val" if (base / "val").is_dir() else "train")}
        if split
        else {}
    )
    primary = next(iter(sources.values()))["source"]
    roots.setdefault(primary, base)
    if not split and not (base / "annotations.json").is_file():
        raise InputError(f"no annotations.json in {base}", where="--dataset-root", fix="pass a folder with annotations.json (or train/ and val/ subfolders)")
    out = {}
    for key, rule in sources.items():
        source_root = roots.get(rule["source"])
        if source_root is not None:
            out[key] = rule["path"].format(root=source_root.as_posix())
    return out


def build_spec(
    skill: str,
    action: str,
    assignments: list[str] = (),
    *,
    dataset_root: str | Path | None = None,
    base: dict[str, Any] | None = None,
) -> BuiltSpec:
    model = spec_model(skill, action)
    data = base if base is not None else load_template(skill, action)
    shorthands = skill_info(skill).get("spec_shorthand_keys", {}) or {}
    overrides: dict[str, Any] = {}
    if dataset_root is not None:
        overrides.update(dataset_root_overrides(skill, action, dataset_root))
    for text in assignments:
        key, value = parse_assignment(text)
        overrides[resolve_key(model, key, shorthands)] = value
    notes = apply_overrides(model, data, overrides)
    spec = validate(model, data, source=f"{skill}/{action} spec")
    return BuiltSpec(spec=spec, applied=overrides, notes=notes)
