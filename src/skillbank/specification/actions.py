"""The smaller actions of the model skill: inference, quantize, export."""

from __future__ import annotations

from typing import Literal

from skillbank.specification.base import Section
from skillbank.specification.meta import ModelRefStr, PathStr, param
from skillbank.specification.pathmap import PathsSpec


class InferenceSpec(Section):
    """Inference spec: one video and prompt, or a batch over an annotation file."""

    exclusive = (("fps", "num_frames"),)
    exclusive_may_be_unset = True
    model_path: ModelRefStr = param("hf_model://nvidia/Cosmos-Reason2-8B", "Model folder (a run's safetensors/step_N), hf_model://owner/repo or HF id.", popular=True)
    video: PathStr = param("", "One video file (single mode).")
    prompt: str = param("", "The question (single mode).")
    annotation_path: PathStr = param("", "LLaVA annotations for batch mode (instead of video + prompt).")
    media_dir: PathStr = param("", "Media folder of batch mode (empty: the annotation file's folder).")
    system_prompt: str | None = param(None, "System prompt; null: the model's recipe (skillbank_recipe.json), else a short-answer prompt. Batch mode: a record whose conversations open with its own system turn keeps that one.")
    fps: float | None = param(None, "Frames per second; at most one of fps / num_frames. Both null: the model's recipe, else fps 2. A value that differs from the recipe's is a warning.", gt=0, le=60)
    num_frames: int | None = param(None, "Fixed frames per video; at most one of fps / num_frames (both null: the model's recipe, else fps).", ge=2)
    max_tokens: int = param(64, "Max new tokens.", ge=1)
    temperature: float = param(0.0, "0 is greedy.", ge=0, le=2)
    batch_size: int = param(8, "Batch size of batch mode.", ge=1)
    results_dir: PathStr = param("./results/inference", "Where batch mode writes results.json.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this spec was written with (`skillbank spec --path-map`); applied where its LOCAL folders exist.")



class QuantizeSpec(Section):
    """Quantize spec: FP8 dynamic or weight-only int8 / int4 of a trained model."""

    model_path: ModelRefStr = param("", "Model folder to quantize (a run's safetensors/step_N or an exported folder).", popular=True)
    scheme: Literal["FP8_DYNAMIC", "W8A16", "W4A16"] = param("FP8_DYNAMIC", "FP8 dynamic (no calibration), or weight-only int8 / int4.", popular=True)
    calibration_annotation_path: PathStr = param("", "LLaVA annotations for a calibrated (GPTQ) W4A16: not used today: every scheme rounds to nearest from the weights' own min / max (references/export-and-quantize.md); preflight warns when set.")
    calibration_media_dir: PathStr = param("", "Media folder of the calibration set (empty: the annotation file's folder).")
    num_calibration_samples: int = param(64, "Calibration samples (not used today: see calibration_annotation_path).", ge=1)
    ignore: list[str] = param(default_factory=lambda: ["lm_head", "re:.*visual.*"], description="Modules left unquantized (the vision tower and lm_head by default).")
    output_dir: PathStr = param("./results/quantize", "Writes the quantized HF folder here.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this spec was written with (`skillbank spec --path-map`); applied where its LOCAL folders exist.")


class ExportSpec(Section):
    """Export spec: a checkpoint or LoRA adapter to a Hugging Face safetensors folder."""

    source: ModelRefStr = param("", "A run's checkpoint step folder, a safetensors/step_N folder, or a LoRA adapter folder.", popular=True)
    base_model_path: ModelRefStr = param("", "Base model of a LoRA adapter (merged into it).")
    merge_lora: bool = param(True, "Merge the LoRA adapter into the base weights.")
    dtype: Literal["bfloat16", "float16", "float32"] = param("bfloat16", "dtype of the exported weights.")
    output_dir: PathStr = param("./results/export", "Writes a Hugging Face safetensors folder with the processor and a manifest of file hashes.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this spec was written with (`skillbank spec --path-map`); applied where its LOCAL folders exist.")
