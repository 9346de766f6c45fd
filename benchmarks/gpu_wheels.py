"""The wheels a lent GPU machine needs to run benchmarks/gpu_check.py, computed from this venv.

The machine's image has torch, transformers and peft (with what they require); nothing outside it can
be reached, so whatever else the check imports travels as wheels in a folder carried with the
repository (64 MiB at most, the whole carry). docs/gpu-check.md shows the commands.

- image: the requirement closure of torch, transformers and peft, read from this venv's metadata;
- the set: SEEDS (what skillbank imports on the check's path beyond the image; --verify proves it
  enough) closed under their requirements, minus the image. torchvision is in it because the Qwen-VL
  video processors import it; skip it (--no-torchvision) when the image has one: a torchvision wheel
  must be the build of the image's torch (torch 2.10 <-> torchvision 0.25, 2.13 <-> 0.28);
- sizes: each wheel estimated here by deflating its installed files (a wheel is that zip);
- --verify: runs `gpu_check.py --cpu --tiny` with every other installed distribution hidden (a sitecustomize
  wraps the import finders so their modules are not found, in every process the check starts), offline;
- --download DIR: fetches the real wheels (`pip download --no-deps --only-binary=:all:` at this venv's
  versions, for --python-version / --platform: the GPU machine's Python, not necessarily this one's)
  and checks their total against 64 MiB (exit 1 over it).

    .venv/bin/python benchmarks/gpu_wheels.py [--verify] [--download .gpu-wheels] [--python-version 3.11]
        [--torchvision VERSION | --no-torchvision]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
IMAGE = ("torch", "transformers", "peft")
SEEDS = ("pydantic", "tomli-w", "av", "torchvision")
LIMIT_MIB = 64.0
HIDER = '''
import json, os, re, sys
_HIDDEN = frozenset(json.loads(os.environ.get("GPU_WHEELS_HIDDEN", "[]")))
_HIDDEN_DISTS = frozenset(json.loads(os.environ.get("GPU_WHEELS_HIDDEN_DISTS", "[]")))
def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
class _Absent:
    # Wraps each finder: a hidden distribution's modules are not found at all (find_spec None), as if not installed.
    def __init__(self, finder):
        self.finder = finder
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _HIDDEN or not hasattr(self.finder, "find_spec"):
            return None
        return self.finder.find_spec(name, path, target)
    def find_distributions(self, *args, **kwargs):
        found = getattr(self.finder, "find_distributions", lambda *a, **k: [])(*args, **kwargs)
        return [d for d in found if _norm(d.metadata["Name"] or "") not in _HIDDEN_DISTS]
    def invalidate_caches(self):
        getattr(self.finder, "invalidate_caches", lambda: None)()
import importlib.machinery
sys.meta_path[:] = [_Absent(f) if f is importlib.machinery.PathFinder else f for f in sys.meta_path]  # site-packages is PathFinder's
'''


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, metadata.Distribution]:
    return {norm(d.metadata["Name"]): d for d in metadata.distributions()}


def closure(names: tuple[str, ...] | list[str], dists: dict[str, metadata.Distribution]) -> set[str]:
    """The names and everything they require (markers evaluated here, no extras), as installed."""
    seen: set[str] = set()
    todo = [norm(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in (dists[name].requires or []) if name in dists else []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(norm(req.name))
    return seen


def wheel_set(dists: dict[str, metadata.Distribution], *, torchvision: bool) -> list[str]:
    seeds = [s for s in SEEDS if torchvision or s != "torchvision"]
    return sorted(closure(seeds, dists) - closure(IMAGE, dists))


def estimated_mib(dist: metadata.Distribution) -> float:
    """The installed files deflated into one zip: about the wheel's size."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in dist.files or []:
            path = Path(dist.locate_file(file))
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, str(file))
    return buffer.tell() / 2**20


def hidden_modules(keep: set[str]) -> list[str]:
    """Top-level modules of installed distributions outside `keep` (skillbank's own stay)."""
    out = []
    for module, owners in metadata.packages_distributions().items():
        if module.startswith("_skillbank") or module == "skillbank":
            continue
        if all(norm(o) not in keep for o in owners):
            out.append(module)
    return sorted(out)


def verify(keep: set[str], work: Path) -> int:
    site = work / "site"
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(HIDER)
    hidden = hidden_modules(keep)
    env = {**os.environ, "GPU_WHEELS_HIDDEN": json.dumps(hidden), "GPU_WHEELS_HIDDEN_DISTS": json.dumps(sorted(set(installed()) - keep)),
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    print(f"verify: gpu_check.py --cpu --tiny with {len(hidden)} modules of other distributions hidden", file=sys.stderr)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--cpu", "--tiny", "--out", str(work / "check.json")],
                          env=env, capture_output=True, text=True)
    doc = json.loads((work / "check.json").read_text()) if (work / "check.json").is_file() else {}
    failed = {k: v.get("error") for k, v in doc.get("phases", {}).items() if not v.get("ok")}
    print(json.dumps({"verified": proc.returncode == 0, "failed_phases": failed}, indent=2))
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
    return proc.returncode


def download(names: list[str], dists: dict[str, metadata.Distribution], folder: Path, python: str, platforms: list[str],
             versions: dict[str, str]) -> float:
    pins = [f"{dists[n].metadata['Name']}=={versions.get(n) or dists[n].version.split('+')[0]}" for n in names]
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", python,
            *[arg for p in platforms for arg in ("--platform", p)], "-d", str(folder), *pins]
    print(" ".join(argv), file=sys.stderr)
    subprocess.run(argv, check=True)
    return sum(f.stat().st_size for f in folder.glob("*.whl")) / 2**20


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--verify", action="store_true", help="run the CPU rehearsal with only the image and the set importable")
    p.add_argument("--download", type=Path, metavar="DIR", help="fetch the real wheels into DIR and check their total")
    p.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}", help="the GPU machine's Python (default: this one's)")
    p.add_argument("--platform", action="append", help="pip --platform tags (default manylinux_2_28_x86_64 and older manylinux tags)")
    p.add_argument("--no-torchvision", action="store_true", help="the image has a torchvision built for its torch")
    p.add_argument("--torchvision", metavar="VERSION", help="the torchvision of the image's torch (default: this venv's)")
    args = p.parse_args()
    dists = installed()
    names = wheel_set(dists, torchvision=not args.no_torchvision)
    rows = [(n, dists[n].version, estimated_mib(dists[n])) for n in names]
    total = sum(r[2] for r in rows)
    print(f"image (not carried): {', '.join(sorted(closure(IMAGE, dists)))}")
    print(f"{'wheel':22} {'version':14} {'~MiB':>7}")
    for name, version, mib in rows:
        print(f"{name:22} {version:14} {mib:7.1f}")
    print(f"{'total (estimated)':37} {total:7.1f}  (a carry holds at most {LIMIT_MIB:.0f} MiB)")
    code = 0
    if args.verify:
        keep = closure(IMAGE, dists) | set(names)
        with tempfile.TemporaryDirectory() as tmp:
            code = verify(keep, Path(tmp))
    if args.download:
        platforms = args.platform or ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
        real = download(names, dists, args.download, args.python_version, platforms, {"torchvision": args.torchvision} if args.torchvision else {})
        print(f"downloaded: {real:.1f} MiB in {args.download}")
        code = code or (1 if real > LIMIT_MIB else 0)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
