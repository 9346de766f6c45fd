"""The GPU stack of `bash scripts/setup.sh --gpu` (and of the Dockerfile) resolves, checked without a GPU.

CI cannot install or run CUDA, so pip's own resolver resolves requirements-gpu.txt together with
skillbank (metadata only: `pip install --dry-run --ignore-installed --report`, nothing is installed):
a pin that conflicts with another, with cosmos-rl's real dependencies or with skillbank's own fails
here. This needs the package registry (CI reaches it); when it cannot be reached the test FAILS and
says so, because an unresolved GPU pin is an unchecked one. It takes about 60 s on 2 busy cores.
What it cannot show (it waits for a GPU node): that the wheels install, that torch sees the GPU,
that flash-attn builds against that torch, and that cosmos-rl trains.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements-gpu.txt"
UNREACHABLE = ("NewConnectionError", "Temporary failure in name resolution", "Max retries exceeded", "Could not fetch URL", "Network is unreachable")


def _pins() -> dict[str, str]:
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][^\s#;]*)", line.strip())
        if m:
            out[_norm(m.group(1))] = m.group(2)
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _skillbank_metadata_copy(tmp: Path) -> Path:
    """A copy with skillbank's metadata (pyproject, README, the package marker): resolving it builds
    no wheel inside the checkout."""
    proj = tmp / "skillbank"
    (proj / "src" / "skillbank").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, proj / name)
    shutil.copy(ROOT / "src" / "skillbank" / "__init__.py", proj / "src" / "skillbank" / "__init__.py")
    return proj


def _pip(*argv: str, timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        err = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("WARNING: Location"))[-3000:]
        if any(s in proc.stderr for s in UNREACHABLE):
            raise AssertionError(f"the package registry cannot be reached, so the GPU pins were not resolved:\n{err}")
        raise AssertionError(f"`pip {' '.join(argv[:2])} ...` failed (exit {proc.returncode}):\n{err}")
    return proc


def test_gpu_stack_resolves_with_skillbank(tmp_path):
    report = tmp_path / "report.json"
    started = time.monotonic()
    # Metadata of the two source distributions (skillbank, zmq) built with this venv's setuptools:
    # a fresh isolated build environment for each costs ~40% of the run on 2 busy cores.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    _pip(
        "install", "--dry-run", "--ignore-installed", "--quiet", "--disable-pip-version-check", *isolation,
        "--report", str(report), "-r", str(REQUIREMENTS), str(_skillbank_metadata_copy(tmp_path)), timeout=600,
    )
    elapsed = time.monotonic() - started
    items = json.loads(report.read_text())["install"]
    resolved = {_norm(i["metadata"]["name"]): i["metadata"] for i in items}
    # Every exact pin of the file is what pip picked.
    pins = _pins()
    assert {"torch", "torchvision", "torchao", "cosmos-rl", "transformers", "vllm"} <= set(pins)
    for name, version in pins.items():
        assert resolved[name]["version"] == version, (name, resolved[name]["version"], version)
    # cosmos-rl with its real dependencies this time (the CPU setup takes it alone, --no-deps).
    cosmos = resolved["cosmos-rl"]
    for req in cosmos["requires_dist"]:
        if "extra ==" in req:
            continue
        dep = _norm(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0])
        assert dep in resolved, f"cosmos-rl needs {req!r}, which the GPU stack leaves out"
    # The registry's torch for Linux x86_64 at this pin is a CUDA build (its NVIDIA runtime wheels come along).
    assert any(r.startswith("nvidia-cuda-runtime") for r in resolved["torch"]["requires_dist"]), "torch pin is not a CUDA build"
    assert any(name.startswith("nvidia-cuda-runtime") for name in resolved)
    # vLLM, which cosmos-rl's GRPO rollout workers import, is in the set with its own compressed-tensors pin:
    # skillbank's quantize (compressed-tensors >= 0.16) is an extra the GPU stack does not install.
    assert "skillbank" in resolved and resolved["vllm"]["version"] == pins["vllm"]
    assert not any(r.startswith("compressed-tensors") and "extra ==" not in r for r in resolved["skillbank"]["requires_dist"])
    assert elapsed < 300, f"resolving the GPU stack took {elapsed:.0f} s"


def test_flash_attn_pin_is_exact_and_published():
    """flash-attn builds against the installed torch, so setup.sh installs it after the stack from the
    file's `# after-torch:` line; the registry must have that exact release."""
    [line] = [ln for ln in REQUIREMENTS.read_text().splitlines() if ln.startswith("# after-torch:")]
    pin = line.split(":", 1)[1].strip()
    name, _, version = pin.partition("==")
    assert name == "flash-attn" and re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", version), pin
    out = _pip("index", "versions", name, "--disable-pip-version-check", timeout=120).stdout
    assert version in re.split(r"[,\s]+", out.split("Available versions:", 1)[1]), out[:500]
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "sed -n 's/^# after-torch: *//p' requirements-gpu.txt" in setup and "--no-build-isolation" in setup


def test_setup_script_options_answer_without_installing(tmp_path):
    """`--help` and a wrong option return before anything is created or installed."""
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts" / "setup.sh")
    done = subprocess.run(["bash", str(copy / "scripts" / "setup.sh"), "--help"], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and "--gpu" in done.stdout and "--no-cuda-check" in done.stdout
    bad = subprocess.run(["bash", str(copy / "scripts" / "setup.sh"), "--gpus"], capture_output=True, text=True, timeout=20)
    assert bad.returncode == 2 and "unknown option --gpus" in bad.stderr
    assert not (copy / ".venv").exists()
