#!/usr/bin/env bash
# Set up a machine.
#   bash scripts/setup.sh          CPU (what CI runs): .venv/ with the CPU torch first, then everything
#                                  else under constraints.txt, cosmos-rl without its CUDA stack, the
#                                  torchvision operator shim, and the engines the tests start for real
#                                  (scripts/engines.sh: Debian's postgresql, slurm-wlm and munge when
#                                  missing and running as root; no service is left running).
#   bash scripts/setup.sh --gpu    a GPU training node: .venv/ with the CUDA stack of requirements-gpu.txt
#                                  (CUDA torch, cosmos-rl with its real dependencies) and skillbank,
#                                  flash-attn built against that torch, redis-server, then a check that
#                                  torch sees CUDA, cosmos-rl's config imports, vLLM (GRPO rollouts) is
#                                  installed and redis-server runs. Not `skillbank quantize` (its extra
#                                  needs compressed-tensors >= 0.16; vLLM pins 0.13.0): quantize on the CPU setup.
#                                  --no-cuda-check: the same without asking for a GPU (image builds).
set -euo pipefail
mode=cpu cuda_check=1
for arg in "$@"; do
  case "$arg" in
    --gpu) mode=gpu ;;
    --no-cuda-check) cuda_check=0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "setup: unknown option $arg (use --gpu, --no-cuda-check)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "skillbank needs Python >= 3.11")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip
if [ "$mode" = gpu ]; then
  # 1. The CUDA stack and skillbank, resolved together from the one pin file.
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -f "$site/_skillbank_torchvision_shim.pth" "$site/_skillbank_torchvision_shim.py"  # CPU-only shim
  "${pip[@]}" -r requirements-gpu.txt -e ".[dev]"
  # 2. flash-attn against that torch: its setup downloads the matching prebuilt wheel, or compiles
  #    (needs the nvcc of a CUDA 12.x toolkit, like torch's 12.8 build; can take an hour).
  "${pip[@]}" setuptools wheel packaging psutil ninja
  fa=$(sed -n 's/^# after-torch: *//p' requirements-gpu.txt)
  echo "setup: $fa (built against the torch above)"
  "${pip[@]}" --no-build-isolation "$fa"
  # 3. redis-server (cosmos-rl's controller starts it): apt-get where root, else conda.
  if command -v redis-server >/dev/null 2>&1; then
    echo "setup: redis-server already on PATH: $(command -v redis-server)"
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: redis-server from apt-get (running as root)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  elif command -v conda >/dev/null 2>&1; then
    echo "setup: redis-server from conda-forge into .venv/redis (not root), linked into .venv/bin"
    conda create -y -q -p .venv/redis -c conda-forge redis-server >/dev/null
    ln -sf "$PWD/.venv/redis/bin/redis-server" .venv/bin/redis-server
  else
    echo "setup: no redis-server on PATH, not root (apt-get) and no conda: install redis-server by hand" >&2
    exit 1
  fi
  # 4. The check: a CUDA torch that sees a GPU (unless --no-cuda-check), cosmos-rl's config, redis-server.
  SKILLBANK_CUDA_CHECK=$cuda_check .venv/bin/python - <<'PY'
import importlib.util, os, sys
import torch
import cosmos_rl.policy.config  # noqa: F401
if torch.version.cuda is None:
    sys.exit(f"setup: torch {torch.__version__} is a CPU build; requirements-gpu.txt asks for the CUDA one")
print(f"setup: torch {torch.__version__} (CUDA {torch.version.cuda}), cosmos-rl config imports")
if os.environ["SKILLBANK_CUDA_CHECK"] == "1":
    if not torch.cuda.is_available():
        sys.exit("setup: torch cannot see a GPU (driver, CUDA_VISIBLE_DEVICES?); --no-cuda-check skips this")
    import flash_attn  # noqa: F401
    print(f"setup: {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}; flash-attn imports")
elif importlib.util.find_spec("flash_attn") is None:
    sys.exit("setup: flash-attn is not installed")
if importlib.util.find_spec("vllm") is None:
    sys.exit("setup: vllm is not installed (requirements-gpu.txt pins it: cosmos-rl's GRPO rollout workers import it)")
print("setup: vllm installed (GRPO rollouts)")
PY
  PATH="$PWD/.venv/bin:$PATH" redis-server --version
  echo "setup: ok, GPU stack ($(.venv/bin/skillbank --version))"
  exit 0
fi
"${pip[@]}" torch==2.13.0
"${pip[@]}" -c constraints.txt -e ".[dev,quantize]"
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
bash scripts/engines.sh
echo "setup: ok ($(.venv/bin/skillbank --version))"
