#!/usr/bin/env bash
# The one command to run on a lent GPU machine (docs/gpu-check.md): what the image has, the wheels
# carried in .gpu-wheels/ (benchmarks/gpu_wheels.py --download .gpu-wheels), then the check, stopped
# at 470 s so it ends inside 8 minutes. Writes $OUT/gpu_check.json (OUT defaults to the repository).
# Extra arguments go to benchmarks/gpu_check.py.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-.}"
PY="${PYTHON:-python3}"
"$PY" - <<'PYEOF'
import importlib, sys
print("python", sys.version.split()[0])
for name in ("torch", "transformers", "peft", "torchvision", "PIL", "pydantic", "av"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as exc:  # noqa: BLE001
        print(name, "missing:", type(exc).__name__, exc)
import torch
print("cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
PYEOF
wheels=()
for whl in .gpu-wheels/*.whl; do
  [ -e "$whl" ] || continue
  case "$(basename "$whl")" in
    torchvision-*) "$PY" -c "import torchvision" 2>/dev/null && { echo "image has torchvision: $whl not installed"; continue; } ;;
  esac
  wheels+=("$whl")
done
if [ "${#wheels[@]}" -gt 0 ]; then
  "$PY" -m pip install --no-index --no-deps --quiet "${wheels[@]}" || { echo "installing the carried wheels failed" >&2; exit 3; }
fi
timeout 470 "$PY" benchmarks/gpu_check.py --out "$OUT/gpu_check.json" "$@"
