"""Each check returns a list of "path: problem" strings; an empty list is a pass."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import yaml

from skillbank.paths import bank_root
from skillbank.specification.keys import find_field
from skillbank.specification.registry import SPEC_MODELS
from skillbank.validate.frontmatter import problems as frontmatter_problems

# `path/like/this.md` in backticks or a markdown link target; placeholders (<x>, {x}, *) are skipped
_PATHS = re.compile(r"`([A-Za-z0-9_.\-/]+\.(?:md|yaml|yml|json|py|toml|sh))`|\]\(([^)#\s]+)\)")
BANK_LEVEL = ("skills/", "schemas/", "references/", "workflow/", "scripts/", "config.json", "src/", "docs/", "benchmarks/")


def skill_folders() -> list[Path]:
    return sorted(p.parent for p in (bank_root() / "skills").glob("*/*/SKILL.md"))


def _rel(path: Path) -> str:
    return path.relative_to(bank_root()).as_posix()


def frontmatter() -> list[str]:
    return [f"{_rel(f / 'SKILL.md')}: {p}" for f in skill_folders() for p in frontmatter_problems(f / "SKILL.md")]


def links() -> list[str]:
    """Every relative path named in a SKILL.md or a reference exists (in the skill, else in the bank)."""
    found = []
    for folder in skill_folders():
        docs = [folder / "SKILL.md", *sorted((folder / "references").glob("*.md"))]
        for doc in docs:
            for match in _PATHS.finditer(doc.read_text(encoding="utf-8")):
                target = match.group(1) or match.group(2)
                first = target.split("/", 1)[0]
                if "/" not in target or "://" in target or target.startswith(("/", "~")) or first.isupper():
                    continue  # a bare file name, a URL, an absolute path or a placeholder such as DIR/...
                bases = [doc.parent, folder, bank_root()]
                if not any((base / target).exists() for base in bases):
                    found.append(f"{_rel(doc)}: names {target}, which does not exist")
    return found


def depth() -> list[str]:
    """References stay one level deep: no folders inside references/."""
    return [f"{_rel(p)}: references/ must be flat (one level deep)" for f in skill_folders() for p in (f / "references").glob("*/")
            if p.is_dir()]


def manifests() -> list[str]:
    found = []
    for skill, actions in SPEC_MODELS.items():
        folder = bank_root() / "skills" / "models" / skill
        manifest_path = folder / "schemas" / "manifest.json"
        if not manifest_path.is_file():
            found.append(f"{_rel(manifest_path)}: missing (run `skillbank schemas generate`)")
            continue
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if set(manifest.get("actions", {})) != set(actions):
            found.append(f"{_rel(manifest_path)}: actions {sorted(manifest.get('actions', {}))} != spec models {sorted(actions)}")
        for action, entry in manifest.get("actions", {}).items():
            for key in ("path", "spec_template"):
                if not (folder / entry.get(key, "")).is_file():
                    found.append(f"{_rel(manifest_path)}: actions.{action}.{key} {entry.get(key)} does not exist")
        info = yaml.safe_load((folder / "references" / "skill_info.yaml").read_text(encoding="utf-8"))
        found += _skill_info_keys(folder, skill, info)
    return found


def _skill_info_keys(folder: Path, skill: str, info: dict) -> list[str]:
    """Every spec key skill_info.yaml names exists in that action's spec model."""
    where = _rel(folder / "references" / "skill_info.yaml")
    models = SPEC_MODELS[skill]
    named: list[tuple[str, str, str]] = []  # (action, key, context)
    named += [("train", info[k], k) for k in ("gpu_spec_key", "node_spec_key") if k in info]
    for action, entry in (info.get("actions") or {}).items():
        for section in ("inputs", "outputs"):
            named += [(action, key, f"actions.{action}.{section}") for key in (entry.get(section) or {})]
    for group in ("data_sources", "spec_params"):
        for action, keys in (info.get(group) or {}).items():
            named += [(action, key, f"{group}.{action}") for key in keys]
    for action, keys in (info.get("spec_shorthand_keys") or {}).items():
        if not isinstance(keys, dict):
            named.append((action, "", f"spec_shorthand_keys.{action} (must map shorthand -> dotted key per action)"))
            continue
        named += [(action, key, f"spec_shorthand_keys.{action}.{short}") for short, key in keys.items()]
    found = []
    for action, key, context in named:
        if action not in models:
            found.append(f"{where}: {context} names action {action}, which has no spec model")
        elif find_field(models[action], key) is None:
            found.append(f"{where}: {context} names {key}, which is not a key of the {action} spec")
    return found


def registry() -> list[str]:
    """config.json and the plugin manifests list exactly the bank's skill folders."""
    root = bank_root()
    on_disk = {f.name: _rel(f) for f in skill_folders()}
    found = []
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    listed = {s["name"]: s["path"] for s in config.get("skills", [])}
    if listed != on_disk:
        found.append(f"config.json: skills {sorted(listed.items())} != folders {sorted(on_disk.items())}")
    for manifest in (".claude-plugin/plugin.json", ".codex-plugin/plugin.json", ".claude-plugin/marketplace.json"):
        path = root / manifest
        if not path.is_file():
            found.append(f"{manifest}: missing")
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        skills = data.get("skills")
        if skills is None and "plugins" in data:
            skills = [s for plugin in data["plugins"] for s in plugin.get("skills", [])]
        paths = {str(s).removeprefix("./").rstrip("/") for s in skills or []}
        if paths != set(on_disk.values()):
            found.append(f"{manifest}: skills {sorted(paths)} != folders {sorted(on_disk.values())}")
    return found


INDEX = "skills/README.md"  # the bank's skills, one line each, with what to open first
POINTERS = ("README.md", ".claude-plugin/plugin.json", ".claude-plugin/marketplace.json", ".codex-plugin/plugin.json")
_LINKS = re.compile(r"\]\(([^)#\s]+)\)")


def index() -> list[str]:
    """skills/README.md links every skill of config.json (its SKILL.md), every link resolves, and the README
    and the plugin manifests point to it."""
    root = bank_root()
    path = root / INDEX
    if not path.is_file():
        return [f"{INDEX}: missing (the bank's skills, one line each, with what to open first)"]
    targets = _LINKS.findall(path.read_text(encoding="utf-8"))
    found = [f"{INDEX}: links {t}, which does not exist" for t in targets if "://" not in t and not (path.parent / t).exists()]
    linked = {(path.parent / t).resolve() for t in targets if "://" not in t}
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    for skill in config.get("skills", []):
        if (root / skill["path"] / "SKILL.md").resolve() not in linked:
            found.append(f"{INDEX}: names no link to {skill['name']} ({skill['path']}/SKILL.md), a skill of config.json")
    for pointer in POINTERS:
        file = root / pointer
        if file.is_file() and INDEX not in file.read_text(encoding="utf-8"):
            found.append(f"{pointer}: does not point to {INDEX}")
    return found


def generated() -> list[str]:
    from skillbank.generate.bank import all_outputs, stale

    found = [f"{_rel(p)}: stale (run `skillbank schemas generate`)" for p in stale(all_outputs())]
    for status in snapshot_statuses():
        if status.state == "stale":
            found.append(f"{_package_rel(status.snapshot.path)}: stale (run `skillbank schemas generate`)")
        elif status.state == "failed":
            found.append(f"{_package_rel(status.snapshot.path)}: not checked, {status.why}")
    return found


@cache
def snapshot_statuses() -> list:
    """The generated snapshots that need cosmos-rl or torch, checked in child processes (skillbank.generate.snapshots)."""
    from skillbank.generate import snapshots

    return snapshots.run(write=False)


def not_checked() -> list[str]:
    """Generated files this machine cannot check (their libraries are not importable here)."""
    return [f"{_package_rel(s.snapshot.path)}: not checked ({s.why})" for s in snapshot_statuses() if s.state == "not_checked"]


def _package_rel(path: Path) -> str:
    from skillbank.generate.snapshots import shown

    return shown(path)


def models() -> list[str]:
    """The model table (skillbank.models.table): every entry parses and names its config, a family cosmos-rl trains,
    a config the bank can read (skillbank.models.add.config_problems) and a counts.json row of that config."""
    from skillbank.models import table
    from skillbank.models.add import config_problems
    from skillbank.models.params import signature
    from skillbank.training.cosmos_rl.family import FAMILIES

    try:
        entries = table.all_entries()
    except ValueError as exc:
        return [str(exc)]
    found = []
    for e in entries:
        where = _package_rel(e.path)
        if e.family not in FAMILIES:
            found.append(f"{where}: family {e.family!r} is not one cosmos-rl trains ({', '.join(FAMILIES)})")
        found += [f"{where}: {problem}" for problem in config_problems(e.config)]
        if e.config.get("model_type") != e.family:
            found.append(f"{where}: family {e.family!r} but its config's model_type is {e.config.get('model_type')!r}")
        row = e.count
        if row is None or row.get("signature") != signature(e.config):
            found.append(f"{_package_rel(table.COUNTS_FILE)}: no count of {e.id}'s config (run `skillbank schemas generate`)")
    return found


def evals() -> list[str]:
    """Every skill ships BENCHMARK.md and evals/evals.json, valid against schemas/evals.schema.json (generated from
    specification/evals.py) and the model's rules (check ids unique, fixtures.bad_fails naming checks); every
    expected_skill is a skill of the bank; eval ids are unique across the bank."""
    from jsonschema import Draft202012Validator
    from pydantic import ValidationError

    from skillbank.specification.evals import EVALS

    validator = Draft202012Validator(json.loads((bank_root() / "schemas" / "evals.schema.json").read_text(encoding="utf-8")))
    names = {f.name for f in skill_folders()}
    seen: dict[str, str] = {}
    found = []
    for folder in skill_folders():
        path = folder / "evals" / "evals.json"
        where = _rel(path)
        if not (folder / "BENCHMARK.md").is_file():
            found.append(f"{_rel(folder / 'BENCHMARK.md')}: missing (every skill states how a real agent did on its evals: "
                         "`skillbank evals run`, docs/development.md, \"Agent evals\")")
        if not path.is_file():
            found.append(f"{where}: missing (every skill ships agent evals: docs/development.md, \"Agent evals\")")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            found.append(f"{where}: not JSON: {exc}")
            continue
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        found += [f"{where}: {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}" for e in errors[:5]]
        try:
            items = EVALS.validate_python(data)
        except ValidationError as exc:  # the rules a schema cannot state, and a sharper message for what it can
            found += [f"{where}: {'.'.join(map(str, err['loc']))}: {err['msg']}" for err in exc.errors()[:5]]
            continue
        for item in items:
            if item.expected_skill not in names:
                found.append(f"{where}: {item.id}: expected_skill {item.expected_skill} is not a skill of the bank")
            if item.id in seen:
                found.append(f"{where}: {item.id}: the id is also an eval of {seen[item.id]} (ids are unique across the bank)")
            seen[item.id] = folder.name
    return found


CHECKS = {"frontmatter": frontmatter, "links": links, "depth": depth, "manifests": manifests, "registry": registry, "index": index, "models": models,
          "generated": generated, "evals": evals}
