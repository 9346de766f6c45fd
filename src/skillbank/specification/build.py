"""The spec builder: template (or an existing spec file) -> dataset root -> overrides -> validated spec
(what `skillbank spec` does)."""

from __future__ import annotations

import copy
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from skillbank.errors import InputError
from skillbank.skillinfo import skill_info, template_path
from skillbank.specification.overrides import apply_overrides, resolve_all
from skillbank.specification.keys import find_field
from skillbank.specification.learning_rate import apply_lora_default
from skillbank.specification.registry import spec_model, spec_models
from skillbank.specification.validation import validate

USER_SET = "user_set"  # the spec's list of the dotted keys the user set (--set, a shorthand), kept by spec --from


@dataclass
class BuiltSpec:
    spec: BaseModel
    applied: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    explicit: set[str] = field(default_factory=set)  # dotted keys the user set (--set, a shorthand, or the --from file): never fitted


def load_template(skill: str, action: str) -> dict[str, Any]:
    path = template_path(skill, action)
    if not path.is_file():
        raise InputError(f"no spec template for action {action}", where=str(path), fix="run `skillbank schemas generate`")
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


NOT_ANNOTATIONS = ("import.json", "metrics.json", "results.json", "best_checkpoint.json")  # what skillbank writes beside data


def _other_json(base: Path) -> list[str]:
    """JSON files in a dataset folder besides annotations.json (a user's own annotation file is a trap there)."""
    return sorted(p.name for p in base.glob("*.json") if p.name != "annotations.json" and p.name not in NOT_ANNOTATIONS)[:5]


def _annotation_file(annotations: str | Path, base: Path | None) -> Path:
    """--annotations FILE: a path, or a file name inside the dataset root."""
    given = Path(annotations).expanduser()
    for candidate in ([base / given] if base is not None and not given.is_absolute() else []) + [given]:
        if candidate.is_file():
            return candidate.resolve()
    where = f"{given} (nor {base / given})" if base is not None and not given.is_absolute() else str(given)
    raise InputError(f"annotation file not found: {where}", where="--annotations",
                     fix="pass a LLaVA annotations file: a path, or a file name inside --dataset-root DIR")


def dataset_root_overrides(skill: str, action: str, root: str | Path | None, annotations: str | Path | None = None
                           ) -> tuple[dict[str, str], list[str]]:
    """Map a dataset root (and an annotation file) onto spec keys through skill_info's data_sources for
    this action; return the overrides and notes for the user.

    A root with train/ and val/ subfolders (like `skillbank make-demo-dataset` writes) feeds
    train_datasets from DIR/train and eval_dataset from DIR/val; otherwise DIR feeds the action's
    primary source, and for train no validation keys are set. `annotations` (--annotations FILE: a
    path, or a file name in DIR) is that source's annotation file instead of DIR/annotations.json, the
    clips still relative to DIR (no root: the file's folder). A root that is itself a .json file is
    taken the same way (the file, and its folder as the root).
    """
    base = Path(root).expanduser().resolve() if root is not None else None
    if base is not None and base.is_file() and base.suffix == ".json" and annotations is None:
        base, annotations = base.parent, base
    file = _annotation_file(annotations, base) if annotations is not None else None
    if base is None and file is not None:
        base = file.parent
    if base is None or not base.is_dir():
        raise InputError(f"dataset root is not a folder: {base}", where="--dataset-root",
                         fix="pass the folder holding annotations.json, or --annotations FILE")
    sources = skill_info(skill).get("data_sources", {}).get(action)
    if not sources:
        raise InputError(f"action {action} takes no dataset root", where="--dataset-root", fix="set the paths with --set")
    split = file is None and (base / "train" / "annotations.json").is_file()
    roots: dict[str, Path] = (
        {"train_datasets": base / "train", "eval_dataset": base / ("val" if (base / "val").is_dir() else "train")}
        if split
        else {}
    )
    primary = next(iter(sources.values()))["source"]
    roots.setdefault(primary, base)
    others = _other_json(base)
    if not split and file is None and not (base / "annotations.json").is_file():
        held = f" (it holds {', '.join(others)})" if others else ""
        raise InputError(f"no annotations.json in {base}{held}", where="--dataset-root",
                         fix=(f"pass --annotations {others[0]} beside --dataset-root {base} to use that file" if others else
                              "pass a folder with annotations.json (or train/ and val/ subfolders), or --annotations FILE"))
    notes = []
    if file is None and not split and others:
        notes.append(f"--dataset-root read {base / 'annotations.json'}; {base} also holds {', '.join(others)}: "
                     "pass --annotations FILE to use another file")
    out = {}
    for key, rule in sources.items():
        source_root = roots.get(rule["source"])
        if source_root is None:
            continue
        if file is not None and rule["source"] == primary and rule["path"].endswith("/annotations.json"):
            out[key] = file.as_posix()
        else:
            out[key] = rule["path"].format(root=source_root.as_posix())
    return out, notes


def shorthand_keys(skill: str, action: str) -> dict[str, str]:
    """{shorthand: dotted key} of one action (skill_info.yaml spec_shorthand_keys.<action>)."""
    return dict((skill_info(skill).get("spec_shorthand_keys") or {}).get(action) or {})


def _paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys a spec file names, down to its leaves."""
    out = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        out += _paths(value, f"{path}.") if isinstance(value, dict) and value else [path]
    return out


def infer_action(skill: str, data: dict[str, Any], *, where: str) -> str:
    """The action whose spec model has every key the file names (and, among several, the one the
    file validates against)."""
    models = spec_models(skill)
    keys = _paths(data)
    fits = [a for a, m in models.items() if all(_names_a_field(m, k) for k in keys)]
    if len(fits) > 1:
        valid = [a for a in fits if _validates(models[a], data)]
        fits = valid if len(valid) == 1 else fits
    if len(fits) == 1:
        return fits[0]
    what = f"it fits the {' and the '.join(fits)} specs alike" if fits else f"its keys match no spec of {skill} ({', '.join(models)})"
    raise InputError(f"cannot tell the action of this spec: {what}", where=where, fix=f"pass --action ({', '.join(fits or models)})")


def _names_a_field(model: type[BaseModel], key: str) -> bool:
    """The key is a field, or lies inside a field whose value is a mapping (rl's train.train_policy.reward_function.exact_match)."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        found = find_field(model, ".".join(parts[:end]))
        if found is not None:
            return end == len(parts) or typing.get_origin(found[2].annotation) is dict
    return False


def _validates(model: type[BaseModel], data: dict[str, Any]) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


def resolve_assignments(skill: str, action: str, assignments: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """--set KEY=VALUE texts as {dotted key: raw value}, the action's shorthands resolved (an unknown key: InputError)."""
    return resolve_all(spec_model(skill, action), assignments, shorthand_keys(skill, action))


def with_assignments(skill: str, action: str, data: dict[str, Any], assignments: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A spec dict (not validated: preflight reports what is wrong) with --set applied, as `skillbank spec` applies it; (data, notes)."""
    out = copy.deepcopy(data)
    notes = apply_overrides(spec_model(skill, action), out, resolve_assignments(skill, action, assignments))
    return out, notes


def build_spec(
    skill: str,
    action: str,
    assignments: list[str] = (),
    *,
    dataset_root: str | Path | None = None,
    base: dict[str, Any] | None = None,
    source: str | None = None,
    annotations: str | Path | None = None,
) -> BuiltSpec:
    """`base` (a spec file's dict, `source` its name) or the action's template, with the dataset root (and
    its annotation file, `annotations`) and the --set overrides applied (shorthands of this action
    resolved), validated. A train spec that turns LoRA on without a learning rate of the user's gets
    LoRA's (specification.learning_rate)."""
    model = spec_model(skill, action)
    data = copy.deepcopy(base) if base is not None else load_template(skill, action)
    overrides: dict[str, Any] = {}
    root_notes: list[str] = []
    if dataset_root is not None or annotations is not None:
        mapped, root_notes = dataset_root_overrides(skill, action, dataset_root, annotations)
        overrides.update(mapped)
    resolved = resolve_assignments(skill, action, assignments)
    assigned = list(resolved)
    overrides.update(resolved)
    notes = root_notes + apply_overrides(model, data, overrides)
    if action == "train":
        notes += apply_lora_default(data, set_now=set(overrides), base=base)
    if USER_SET in model.model_fields:  # what the user chose, recorded in the spec: AutoML leaves it out of its search
        data[USER_SET] = sorted({*(data.get(USER_SET) or []), *assigned} - {USER_SET})
    spec = validate(model, data, source=source or f"{skill}/{action} spec")
    explicit = set(overrides) | (set(_paths(base)) if base is not None else set())
    return BuiltSpec(spec=spec, applied=overrides, notes=notes, explicit=explicit)
