#!/usr/bin/env bash
# Set up a fresh machine: .venv/ in the checkout with the CPU torch first, then everything else
# under constraints.txt, cosmos-rl without its CUDA stack, and the torchvision operator shim.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "skillbank needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip
"${pip[@]}" torch==2.13.0
"${pip[@]}" -c constraints.txt -e ".[dev]"
# cosmos-rl as is would pull a CUDA torch and the NVIDIA stack: take the package alone, then the
# light dependencies its config model and launcher import. Left out on purpose: torchao (its CUDA
# kernels fail to load on CPU, noisily, whenever transformers imports it) and the deprecated
# `pynvml` shim (nvidia-ml-py provides the module; the shim warns on every torch import).
"${pip[@]}" -c constraints.txt --no-deps cosmos-rl==0.4.7
"${pip[@]}" -c constraints.txt fastapi uvicorn "datasets>=4.4.1" math_verify nest_asyncio toml \
  StrEnum redis msgpack boto3 cloudpickle click rich blobfile accelerate "tensordict==0.7.2" \
  "nvidia-ml-py>=13.590.48" "zmq>=0.0.0" "pybind11[global]" "diffusers>=0.36.0"
# torchvision 0.28 from the registry is a CUDA build: register its operator schemas on CPU-only
# hosts, lazily, the first time torchvision is imported (see src/skillbank/compat/torchvision_shim.py).
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp src/skillbank/compat/torchvision_shim.py "$site/_skillbank_torchvision_shim.py"
echo "import _skillbank_torchvision_shim; _skillbank_torchvision_shim.install()" > "$site/_skillbank_torchvision_shim.pth"
.venv/bin/python -c 'import torchvision.transforms.v2, transformers, cosmos_rl.policy.config' >/dev/null 2>&1 \
  || { echo "setup: the torch / torchvision / cosmos-rl stack does not import" >&2; exit 1; }
echo "setup: ok ($(.venv/bin/skillbank --version))"
