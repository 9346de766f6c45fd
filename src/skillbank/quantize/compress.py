"""FP8_DYNAMIC, W8A16 and W4A16 through compressed-tensors, the format vLLM loads natively.

Why compressed-tensors and not llm-compressor or torchao (measured on this project's stack):
- llm-compressor writes this same format, but no release fits torch 2.13 + transformers 4.57
  (0.11 caps torch <= 2.11; 0.12+ needs transformers 5; pip resolves to 0.6 and downgrades
  transformers to 4.51, which has no Qwen3-VL). compressed-tensors itself installs cleanly.
- torchao's checkpoints hold tensor subclasses that vLLM loads only for some configs, and its
  FP8 / int4 kernels need a GPU even to quantize.
The schemes are compressed-tensors' presets (the names llm-compressor uses). Weight scales come from
each weight's min / max (per output channel for FP8_DYNAMIC and W8A16, per group of 128 inputs for
W4A16): round-to-nearest, what llm-compressor's QuantizationModifier does, so no scheme needs
calibration data. Activations of FP8_DYNAMIC are quantized per token at run time. Modules in `ignore`
(the vision tower and lm_head by default) stay in the model's dtype.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillbank.errors import InputError
from skillbank.export import output

if TYPE_CHECKING:
    from skillbank.specification.actions import QuantizeSpec

MANIFEST = "quantize_manifest.json"
TARGETS = ["Linear"]


@dataclass
class QuantizeResult:
    output_dir: Path
    manifest: dict[str, Any]
    quantized: list[str]
    notes: list[str]


def _weight_range(weight, args):
    """min / max of the weight in the scheme's granularity (tensor, output channel, or input group)."""
    strategy = str(getattr(args.strategy, "value", args.strategy))
    w = weight.detach().float()
    if strategy == "group":
        grouped = w.reshape(w.shape[0], -1, args.group_size)
        return grouped.amin(-1), grouped.amax(-1)
    if strategy == "channel":
        return w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    return w.amin(), w.amax()


def _indivisible(model, scheme) -> list[str]:
    """Linear layers a grouped scheme cannot cover (input features not a multiple of the group)."""
    import torch

    group = getattr(scheme.weights, "group_size", None)
    if not group or group <= 0:
        return []
    return [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m.in_features % group]


def calibrate_weights(model) -> list[str]:
    """Set weight_scale / weight_zero_point of every quantized module from its weight; freeze it."""
    from compressed_tensors.quantization import QuantizationStatus
    from compressed_tensors.quantization.utils import calculate_qparams

    done = []
    for name, module in model.named_modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is None or scheme.weights is None:
            continue
        low, high = _weight_range(module.weight, scheme.weights)
        scale, zero = calculate_qparams(low, high, scheme.weights)
        module.weight_scale.data = scale.to(module.weight_scale.dtype).reshape(module.weight_scale.shape)
        module.weight_zero_point.data = zero.to(module.weight_zero_point.dtype).reshape(module.weight_zero_point.shape)
        module.quantization_status = QuantizationStatus.FROZEN
        done.append(name)
    return done


MIN_COMPRESSED_TENSORS = (0, 16)


def require_compressed_tensors() -> None:
    """compressed-tensors >= 0.16 (skillbank's `quantize` extra): the GPU training stack leaves it at
    vLLM's 0.13.0 pin, so say where quantize runs instead of failing on a missing preset."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("compressed-tensors")
    except PackageNotFoundError:
        found = None
    parts = tuple(int(p) for p in (found or "0").split(".")[:2] if p.isdigit())
    if found is None or parts < MIN_COMPRESSED_TENSORS:
        raise InputError(
            f"skillbank quantize needs compressed-tensors >= 0.16, this environment has {found or 'none'}",
            where="compressed-tensors",
            fix="pip install 'skillbank[quantize]' in an environment without vLLM (the CPU setup, bash scripts/setup.sh, has it); "
                "the GPU stack keeps vLLM's compressed-tensors 0.13.0 for GRPO rollouts",
        )


def quantize(spec: "QuantizeSpec", *, overwrite: bool = False) -> QuantizeResult:
    """Quantize spec.model_path into spec.output_dir (staged, then renamed; a non-empty folder needs overwrite)."""
    require_compressed_tensors()
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationStatus, apply_quantization_config, preset_name_to_scheme
    from transformers import AutoModelForImageTextToText, AutoProcessor

    src = Path(spec.model_path).expanduser().resolve() if spec.model_path else None
    if src is None or not (src / "config.json").is_file():
        raise InputError(
            f"model_path is not a Hugging Face model folder: {spec.model_path!r}",
            where="model_path",
            fix="pass a run's safetensors/step_N or an exported folder (skillbank export)",
        )
    if json.loads((src / "config.json").read_text(encoding="utf-8")).get("quantization_config"):
        raise InputError("the model is already quantized", where="model_path", fix="quantize the unquantized export")
    notes: list[str] = []
    if spec.calibration_annotation_path:
        notes.append(
            f"calibration set not used: {spec.scheme} here is data-free (min/max round-to-nearest); "
            "GPTQ-style calibration needs llm-compressor, which does not install beside transformers 4.57 + torch 2.13"
        )
    model = AutoModelForImageTextToText.from_pretrained(src, dtype="auto", low_cpu_mem_usage=True)
    scheme = preset_name_to_scheme(spec.scheme, TARGETS)
    ignore = list(spec.ignore)
    odd = _indivisible(model, scheme)
    if odd:
        ignore += odd
        notes.append(f"{len(odd)} Linear layer(s) left unquantized: input features not a multiple of {scheme.weights.group_size}")
    config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=ignore, quantization_status=QuantizationStatus.INITIALIZED)
    with torch.no_grad():
        apply_quantization_config(model, config)
        done = calibrate_weights(model)
        if not done:
            raise InputError("no Linear layer matched the scheme (everything is in ignore?)", where="ignore", fix="remove entries from ignore")
        compressor = ModelCompressor.from_pretrained_model(model)
        compressor.compress_model(model)
    with output.staged_folder(spec.output_dir, overwrite=overwrite) as out:
        model.save_pretrained(out, safe_serialization=True)
        compressor.update_config(str(out))
        AutoProcessor.from_pretrained(src).save_pretrained(out)
        for name in ("generation_config.json", "chat_template.jinja", "chat_template.json"):
            if (src / name).is_file() and not (out / name).exists():
                (out / name).write_bytes((src / name).read_bytes())
        from skillbank import recipe

        found = recipe.read(src)  # the quantized folder keeps how the weights were trained
        if found is not None:
            recipe.write(out, {**found.recipe, "chat_template_sha256": recipe.chat_template_digest(out) or found.recipe.get("chat_template_sha256")})
        fmt = json.loads((out / "config.json").read_text(encoding="utf-8"))["quantization_config"]["format"]
        info = {"source": str(src), "scheme": spec.scheme, "format": fmt, "quant_method": "compressed-tensors",
                "quantized_modules": len(done), "ignore": spec.ignore, "notes": notes}
        output.write_manifest(out, MANIFEST, info)
    final = Path(spec.output_dir).expanduser().resolve()
    return QuantizeResult(final, json.loads((final / MANIFEST).read_text(encoding="utf-8")), done, notes)
