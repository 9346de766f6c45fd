"""Generated files that only a heavy library can compute: cosmos-rl's defaults for `spec --from`
(cosmos_rl) and the meta-device parameter counts of the bundled model configs (torch + transformers).

`skillbank schemas generate [--check]` covers them beside the schemas, but it is agent-facing and must
not import those libraries: each snapshot is computed in a child process
(`python -m skillbank.generate.snapshots MODULE:FUNCTION OUT` writes its text to OUT), the children at once, and
only where its libraries are importable; elsewhere the file is reported as not checked.

A snapshot found fresh (or just written) is remembered in the file cache (skillbank.filecache, kind
"snapshot", keyed by the snapshot file's path, size and mtime) with a digest of everything it is
computed from: the libraries' versions, the library files that define it and our source files. A later
run with the same digest starts no child (a cold check costs the children's imports, 5-15 s; a warm
one a few milliseconds of hashing).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from skillbank import atomic
from skillbank.filecache import FileCache
from skillbank.hashing import sha256_many

PACKAGE = Path(__file__).resolve().parents[1]  # src/skillbank


@dataclass(frozen=True)
class Snapshot:
    name: str
    path: Path
    producer: str  # "module:function" returning the file's text
    needs: tuple[str, ...]  # modules that must be importable to compute it
    versions: tuple[str, ...]  # distributions whose versions it depends on
    sources: tuple[str, ...]  # globs under src/skillbank it is computed from
    library: tuple[str, str] | None = None  # (package, glob inside it): the library's files that define it


SNAPSHOTS = (
    Snapshot("cosmos_rl_defaults", PACKAGE / "specification" / "cosmos_rl_defaults.json", "skillbank.training.cosmos_rl.defaults:snapshot_text",
             needs=("cosmos_rl",), versions=("cosmos-rl", "pydantic"),
             sources=("specification/*.py", "training/cosmos_rl/defaults.py", "generate/snapshots.py"), library=("cosmos_rl", "policy/config/**/*.py")),
    Snapshot("plan_param_counts", PACKAGE / "models" / "configs" / "counts.json", "skillbank.models.params:counts_text",
             needs=("torch", "transformers"), versions=("torch", "transformers", "peft"),
             sources=("models/params.py", "models/configs/*.json", "modelref.py", "generate/snapshots.py")),
)


def shown(path: Path) -> str:
    """A snapshot's name as the repository has it (src/skillbank/...), wherever the package is installed."""
    try:
        return f"src/skillbank/{path.resolve().relative_to(PACKAGE).as_posix()}"
    except ValueError:
        return str(path)


@dataclass
class Status:
    snapshot: Snapshot
    state: str  # fresh | stale | written | not_checked | failed
    why: str = ""


def importable(module: str) -> bool:
    """Found on the path, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def digest(snap: Snapshot) -> str:
    """What the snapshot is computed from, hashed: a change to any of it makes the cache miss."""
    files = sorted(str(p) for pattern in snap.sources for p in PACKAGE.glob(pattern) if p.resolve() != snap.path.resolve())
    if snap.library is not None:
        found = importlib.util.find_spec(snap.library[0])
        for root in (found.submodule_search_locations or []) if found else []:
            files += sorted(str(p) for p in Path(root).glob(snap.library[1]))
    hashes = sha256_many(files)
    inputs = {"versions": {d: _version(d) for d in snap.versions}, "files": {f: hashes.get(f) for f in files}, "python": sys.version_info[:2]}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _child_env() -> dict[str, str]:
    """The child imports this skillbank, wherever the parent found it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _compute(snaps: list[Snapshot]) -> dict[str, tuple[str | None, str]]:
    """{name: (text or None, why)}: each snapshot's text from its own child process, all at once."""
    out: dict[str, tuple[str | None, str]] = {}
    with tempfile.TemporaryDirectory(prefix="skillbank-snapshots-") as tmp:
        procs = {}
        try:
            for snap in snaps:
                target, log = Path(tmp) / snap.name, Path(tmp) / f"{snap.name}.stderr"
                argv = [sys.executable, "-m", "skillbank.generate.snapshots", snap.producer, str(target)]
                with open(log, "w") as err:  # a file, not a pipe: the libraries' chatter never blocks a child
                    procs[snap.name] = (subprocess.Popen(argv, env=_child_env(), stdout=subprocess.DEVNULL, stderr=err), target, log)
            for name, (proc, target, log) in procs.items():
                proc.wait()
                if proc.returncode == 0 and target.is_file():
                    out[name] = (target.read_text(encoding="utf-8"), "")
                else:
                    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
                    out[name] = (None, f"its generator failed: {(lines or [f'exit {proc.returncode}'])[-1]}")
        finally:
            for proc, _, _ in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return out


def run(*, write: bool) -> list[Status]:
    """Each snapshot's state: written (write=True) or stale when it differs, fresh, not_checked where its
    libraries are missing, failed when its child failed."""
    statuses: dict[str, Status] = {}
    todo: list[Snapshot] = []
    cache = FileCache("snapshot")
    digests: dict[str, str] = {}
    for snap in SNAPSHOTS:
        missing = [m for m in snap.needs if not importable(m)]
        if missing:
            statuses[snap.name] = Status(snap, "not_checked", f"needs {', '.join(missing)}, not importable here")
            continue
        digests[snap.name] = digest(snap)
        if snap.path.is_file() and cache.get(str(snap.path)) == digests[snap.name]:
            statuses[snap.name] = Status(snap, "fresh", "cached: same inputs as when last found fresh")
        else:
            todo.append(snap)
    computed = _compute(todo) if todo else {}
    for snap in todo:
        text, why = computed[snap.name]
        if text is None:
            statuses[snap.name] = Status(snap, "failed", why)
            continue
        current = snap.path.read_text(encoding="utf-8") if snap.path.is_file() else None
        if current == text:
            statuses[snap.name] = Status(snap, "fresh")
        elif write:
            atomic.write_text(snap.path, text)
            statuses[snap.name] = Status(snap, "written")
        else:
            statuses[snap.name] = Status(snap, "stale")
            continue
        cache.put(str(snap.path), digests[snap.name])
    cache.close()
    return [statuses[snap.name] for snap in SNAPSHOTS]


def _main(argv: list[str]) -> int:
    """The child: compute one snapshot's text into a file (its libraries print what they like)."""
    producer, out = argv
    module, function = producer.split(":")
    text = getattr(importlib.import_module(module), function)()
    Path(out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
