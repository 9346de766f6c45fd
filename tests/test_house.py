"""The house rules of src/skillbank (docs/development.md): floors that imports only go down, checked file by
file from the import graph (lazy imports inside functions included), no circle between files or folders,
argparse only in the commands package, small modules."""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "skillbank"
MAX_LINES = 600
# Lowest first; a module imports only from its own floor or below (docs/development.md says why each room is where it is).
FLOORS = [
    {"__init__", "errors", "atomic", "paths", "hashing", "filecache", "redaction", "compat", "scoring", "procs"},  # ground
    {"specification", "modelref", "skillinfo"},  # the contract: spec models, model references, skill metadata
    {"data", "runs", "recipe", "assets", "models"},  # shared: records, run layout and arithmetic, recipes, model facts
    {"training", "evaluation", "routing", "generate", "export"},  # engines
    {"preflight", "planning", "intake", "gaps", "comparison", "validate", "quantize"},  # checks and estimates
    {"automl", "deft", "platform", "reporting", "demo"},  # loops and jobs
    {"commands", "cli", "__main__"},  # the command line: argparse and the orchestration that ties rooms together
]
FLAG_ROOMS = {"commands", "cli"}  # where argparse may be imported


def _modules() -> dict[str, Path]:
    """skillbank.x.y -> its file (a package is its __init__.py)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()
# folders without an __init__.py (namespace packages: training/, training/local/) are modules too, with no file
PACKAGES = {".".join(path.relative_to(PACKAGE.parent).parts) for path in PACKAGE.rglob("*") if path.is_dir() and any(path.glob("*.py"))}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(room: str) -> int:
    for level, rooms in enumerate(FLOORS):
        if room in rooms:
            return level
    raise AssertionError(f"src/skillbank/{room}: on no floor; add it to FLOORS here and to the floors in docs/development.md")


def _resolve(name: str) -> str:
    """The module an import names: skillbank.x.y, else its nearest package."""
    while name not in MODULES and name not in PACKAGES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


@cache
def _tree(module: str) -> ast.AST:
    return ast.parse(MODULES[module].read_text())


@cache
def _imports(module: str) -> tuple[tuple[int, str], ...]:
    return _imports_in(_tree(module), module)


def _imports_in(tree: ast.AST, module: str) -> tuple[tuple[int, str], ...]:
    """(line, module) of every skillbank import of a module, lazy ones inside functions included;
    `from skillbank.x import name` names skillbank.x.name when that is a module, else skillbank.x."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "skillbank":
            found += [(node.lineno, _resolve(f"{node.module}.{alias.name}")) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, _resolve(alias.name)) for alias in node.names if alias.name.split(".")[0] == "skillbank"]
    return tuple((line, target) for line, target in found if target != module)


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_room_is_on_a_floor():
    for module in MODULES:
        _floor(_room(module))


def test_imports_only_go_down_a_floor():
    upward = [f"{_where(module, line)} imports {target} (floor {_floor(_room(target))} > {_floor(_room(module))}): "
              f"move it down, or the importing code up into {_room(target)}'s floor"
              for module in MODULES for line, target in _imports(module) if _floor(_room(target)) > _floor(_room(module))]
    assert not upward, "imports that run up a floor:\n" + "\n".join(upward)


def test_no_circle_between_files():
    graph = {module: {target for _, target in _imports(module)} for module in MODULES}
    circles = []
    for component in _cycles(graph):
        members = set(component)
        edges = [f"    {_where(module, line)} imports {target}" for module in component for line, target in _imports(module) if target in members]
        circles.append(f"  {' <-> '.join(component)}: cut one of these imports (move what it takes to a module both can import):\n" + "\n".join(edges))
    assert not circles, "files that import each other in a circle:\n" + "\n".join(circles)


def test_no_circle_between_folders():
    graph: dict[str, set[str]] = defaultdict(set)
    for module in MODULES:
        graph[_room(module)] |= {_room(target) for _, target in _imports(module) if _room(target) != _room(module)}
    circles = []
    for component in _cycles(graph):
        members = set(component)
        edges = [f"    {_where(module, line)} imports {target}" for module in MODULES if _room(module) in members
                 for line, target in _imports(module) if _room(target) in members and _room(target) != _room(module)]
        circles.append(f"  {' <-> '.join(component)}:\n" + "\n".join(edges))
    assert not circles, "folders that import each other in a circle:\n" + "\n".join(circles)


def test_argparse_only_in_the_commands_package():
    found = []
    for module in MODULES:
        if _room(module) in FLAG_ROOMS:
            continue
        for node in ast.walk(_tree(module)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module] if isinstance(node, ast.ImportFrom) else []
            if any(name and name.split(".")[0] == "argparse" for name in names):
                found.append(f"{_where(module, node.lineno)} imports argparse: parse the flags in skillbank/commands/ and pass typed values down")
    assert not found, "\n".join(found)


def _defined(module: str) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in _tree(module).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If):  # `if __name__ == "__main__":` blocks and the like
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def test_every_import_names_a_module_or_what_it_defines():
    """A moved module leaves no import of its old path behind (lazy imports fail only when their code runs)."""
    missing = []
    for module in MODULES:
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] == "skillbank":
                if node.module not in MODULES and node.module not in PACKAGES:
                    missing.append(f"{_where(module, node.lineno)}: no module {node.module}")
                    continue
                defined = _defined(node.module) if node.module in MODULES else set()
                missing += [f"{_where(module, node.lineno)}: {node.module} has no {alias.name}" for alias in node.names
                            if f"{node.module}.{alias.name}" not in MODULES.keys() | PACKAGES and alias.name not in defined]
            elif isinstance(node, ast.Import):
                missing += [f"{_where(module, node.lineno)}: no module {alias.name}" for alias in node.names
                            if alias.name.split(".")[0] == "skillbank" and alias.name not in MODULES.keys() | PACKAGES]
    assert not missing, "imports of what does not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("a, b", [("evaluation", "training"), ("training", "evaluation")])
def test_evaluation_and_training_do_not_import_each_other(a, b):
    crossing = [f"{_where(module, line)} {target}" for module in MODULES if _room(module) == a
                for line, target in _imports(module) if _room(target) == b]
    assert not crossing, "\n".join(crossing)


def test_no_module_over_600_lines():
    long = [f"{path.relative_to(PACKAGE)}: {n} lines" for path in MODULES.values() if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, "split these by what flows through them:\n" + "\n".join(long)


def test_no_package_is_named_like_a_test_folder():
    assert not [p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name in ("spec", "specs", "test", "tests")]


def test_the_checks_see_a_circle_and_an_upward_import():
    """The graph walk itself: a circle of two files is found, and a lazy import inside a function counts."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    source = "def f():\n    from skillbank.runs import layout\n    from skillbank.errors import InputError\n    import skillbank.data.chat\n"
    assert _imports_in(ast.parse(source), "skillbank.x") == ((2, "skillbank.runs.layout"), (3, "skillbank.errors"), (4, "skillbank.data.chat"))
