"""The house rules of src/skillbank: floors that imports only go down, small modules (docs/development.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "skillbank"
MAX_LINES = 600
# Lowest first; a module imports only from its own floor or below. Commands (command.py, *_command.py, cli) are above all.
FLOORS = [
    {"__init__", "errors", "atomic", "paths", "hashing", "filecache", "redaction", "__version__", "compat", "scoring"},
    {"specification", "modelref", "skillinfo", "procs"},
    {"data", "runs", "recipe", "assets", "models"},
    {"preflight", "planning", "evaluation", "training", "gaps", "deft", "automl", "platform", "intake", "routing",
     "generate", "export", "quantize", "validate", "demo", "reporting", "comparison"},
]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _room(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _floor(room: str) -> int:
    for level, rooms in enumerate(FLOORS):
        if room in rooms:
            return level
    raise AssertionError(f"src/skillbank/{room}: on no floor; add it to FLOORS here and to docs/development.md")


def _is_command(path: Path) -> bool:
    return path.name in ("command.py", "cli.py", "__main__.py") or path.name.endswith("_command.py")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every skillbank import of a module, lazy ones inside functions included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("skillbank."):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("skillbank.")]
    return found


def test_every_room_is_on_a_floor():
    for path in _modules():
        if not _is_command(path):
            _floor(_room(path))


def test_imports_only_go_down_a_floor():
    upward = []
    for path in _modules():
        if _is_command(path):
            continue
        here = _floor(_room(path))
        for line, module in _imports(path):
            target = module.split(".")[1]
            if _floor(target) > here:
                upward.append(f"{path.relative_to(PACKAGE)}:{line} imports {module}")
    assert not upward, "imports that run up a floor:\n" + "\n".join(upward)


@pytest.mark.parametrize("a, b", [("evaluation", "training"), ("training", "evaluation")])
def test_evaluation_and_training_do_not_import_each_other(a, b):
    crossing = [f"{path.relative_to(PACKAGE)}:{line} {module}" for path in (PACKAGE / a).rglob("*.py")
                for line, module in _imports(path) if module.split(".")[1] == b]
    assert not crossing, "\n".join(crossing)


def test_no_module_over_600_lines():
    long = [f"{path.relative_to(PACKAGE)}: {n} lines" for path in _modules()
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, "split these by what flows through them:\n" + "\n".join(long)


def test_no_package_is_named_like_a_test_folder():
    assert not [p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name in ("spec", "specs", "test", "tests")]
