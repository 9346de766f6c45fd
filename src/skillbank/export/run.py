"""Export one source to a Hugging Face safetensors folder (model + processor + export_manifest.json).

LoRA adapters are merged with peft (`merge_and_unload`: W + scale * B @ A in each adapted Linear),
in float32, then cast to the requested dtype, so the merged model computes what base + adapter
computes. A Hugging Face folder is loaded and re-saved (this also proves it loads). Nothing under
the source is modified; the output is built in a temporary sibling and renamed into place.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillbank.errors import InputError
from skillbank.export import output
from skillbank.export.sources import Source, is_hf_folder, resolve
from skillbank.modelref import lora_config

if TYPE_CHECKING:
    from skillbank.specification.actions import ExportSpec

MANIFEST = "export_manifest.json"


@dataclass
class ExportResult:
    output_dir: Path
    source: Source
    manifest: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _load_model(folder: str | Path, dtype):
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype, low_cpu_mem_usage=True)


def _processor_from(*folders: str | Path):
    """The processor of the first folder that has one (the tokenizer alone as a fallback)."""
    from transformers import AutoProcessor

    candidates = [Path(f) for f in folders if f]
    for names in (("preprocessor_config.json", "processor_config.json"), ("tokenizer_config.json",)):
        for folder in candidates:
            if any((folder / name).is_file() for name in names):
                return AutoProcessor.from_pretrained(folder)
    return None


def _base_of(adapter: Path, given: str) -> str:
    if given:
        base = Path(given).expanduser()
        if not (base / "config.json").is_file():
            raise InputError(f"base model folder has no config.json: {base}", where="base_model_path", fix="pass the Hugging Face folder the adapter was trained on")
        return str(base.resolve())
    config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    base = str(config.get("base_model_name_or_path") or "")
    if base and (Path(base) / "config.json").is_file():
        return base
    raise InputError(
        f"the adapter's base model {base!r} is not a local folder",
        where="base_model_path",
        fix="pass base_model_path (--base-model) = the Hugging Face folder the adapter was trained on",
    )


def _set_config_dtype(config, dtype) -> None:
    """config.json says the dtype at the top and in each sub-config (text, vision); dtype="auto" reads them."""
    for cfg in [config, *(getattr(config, name, None) for name in getattr(config, "sub_configs", {}))]:
        if cfg is not None:
            cfg.dtype = dtype


def _save(model, processor, out: Path, dtype, extra_from: list[Path]) -> None:
    model = model.to(dtype)
    _set_config_dtype(model.config, dtype)
    model.save_pretrained(out, safe_serialization=True)
    if processor is not None:
        processor.save_pretrained(out)
    for folder in extra_from:  # generation_config.json etc. that a re-save may not carry
        for name in ("generation_config.json", "chat_template.json", "chat_template.jinja"):
            if (folder / name).is_file() and not (out / name).exists():
                shutil.copy2(folder / name, out / name)


def _carry_recipe(src: Source, out: Path, notes: list[str]) -> str | None:
    """The exported folder keeps the source's recipe (skillbank.recipe): the source folder's file, else
    the one its run folder's spec gives (a cosmos-rl step, rank shards); the template digest and
    model_type are the output's. Returns where it came from (None: the source has no recipe)."""
    from skillbank import recipe

    found = recipe.read(src.given) or recipe.read(src.path)
    if found is None and src.run_dir is not None:
        built = recipe.from_run(src.run_dir, src.step, model_dir=out)
        found = recipe.Found(built, f"{src.run_dir} (the run's spec)") if built is not None else None
    if found is None:
        notes.append(f"the source carries no {recipe.RECIPE_FILE}: evaluate will use its defaults unless the spec sets vision and prompt")
        return None
    doc = {**found.recipe, "model_type": recipe.model_type_of(out) or found.recipe.get("model_type"),
           "chat_template_sha256": recipe.chat_template_digest(out) or found.recipe.get("chat_template_sha256")}
    recipe.write(out, doc)
    return found.source


def export(spec: "ExportSpec", *, overwrite: bool = False) -> ExportResult:
    """Export spec.source into spec.output_dir (staged, then renamed; a non-empty folder needs overwrite)."""
    import torch

    dtype = getattr(torch, spec.dtype)
    src = resolve(spec.source)
    notes = list(src.notes)
    info: dict[str, Any] = {"source": str(src.given), "source_kind": src.kind, "read_from": str(src.path), "dtype": spec.dtype, "step": src.step}
    with output.staged_folder(spec.output_dir, overwrite=overwrite) as out, tempfile.TemporaryDirectory(prefix="skillbank-export-") as work:
        if src.kind == "checkpoint-shards":
            from skillbank.export.shards import checkpoint_to_hf

            src.path = checkpoint_to_hf(src.path, Path(work), src.step or 0, base_model=spec.base_model_path)
            info["converted_from_shards"] = True
        if src.kind == "lora-adapter":
            base = _base_of(src.path, spec.base_model_path)
            info.update(base_model=base, merged_lora=spec.merge_lora)
            processor = _processor_from(src.path, base)
            if spec.merge_lora:
                from peft import PeftModel

                model = PeftModel.from_pretrained(_load_model(base, torch.float32), src.path, config=lora_config(src.path)).merge_and_unload()
                _save(model, processor, out, dtype, [src.path, Path(base)])
            else:
                shutil.copytree(src.path, out, dirs_exist_ok=True)
                if processor is not None:
                    processor.save_pretrained(out)
                notes.append("merge_lora is false: the adapter is copied as is (load it with peft on top of base_model)")
        else:
            if not is_hf_folder(src.path):
                raise InputError(f"{src.path} holds no Hugging Face model", where="source")
            _save(_load_model(src.path, dtype), _processor_from(src.path), out, dtype, [src.path])
        info["recipe"] = _carry_recipe(src, out, notes)
        info["notes"] = notes
        output.write_manifest(out, MANIFEST, info)
    final = Path(spec.output_dir).expanduser().resolve()
    return ExportResult(final, src, json.loads((final / MANIFEST).read_text(encoding="utf-8")), notes)
