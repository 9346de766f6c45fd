"""The evaluate action: the seed's flat TOML (dataset, model, task, evaluation, vision, generation,
metrics, results, num_gpus, results_dir)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from skillbank.spec.base import Section
from skillbank.spec.meta import param, rule_error

TASK_TYPES = ("", "its_directionality")


class EvalDatasetSpec(Section):
    annotation_path: str = param("", "LLaVA annotations.json of the evaluation set (id, video, video_fps, conversations).")
    media_dir: str = param("", "Folder the records' video paths are relative to (empty: the annotation file's folder).")
    system_prompt: str = param("You are a helpful assistant. Answer the question about the video with a short answer.", "System prompt; keep answers short and constrained so exact match works.")


class EvalModelSpec(Section):
    model_name: str = param("hf_model://nvidia/Cosmos-Reason2-8B", "Model: an HF folder, a run's safetensors/step_N folder, hf_model://owner/repo or an HF id.", popular=True)
    enable_lora: bool = param(False, "model_name is a LoRA adapter folder; it is applied to base_model_path.")
    base_model_path: str = param("", "Base model of a LoRA adapter (required when enable_lora).")
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = param("auto", "Weights dtype; auto picks bfloat16 on GPU, float32 on CPU.")

    @model_validator(mode="after")
    def _lora_needs_base(self) -> "EvalModelSpec":
        if self.enable_lora and not self.base_model_path:
            raise rule_error("base_model_path", "enable_lora needs model.base_model_path (the base model the adapter was trained on)")
        return self


class EvalTaskSpec(Section):
    type: Literal[TASK_TYPES] = param("", "\"\": general evaluator (yes/no binary metrics when every answer is yes/no, else exact match); \"its_directionality\": left/right/straight.")


class EvaluationSpec(Section):
    batch_size: int = param(8, "Samples per batched generate call.", ge=1)
    seed: int = param(1, "Seed for sampling (greedy decoding ignores it).", ge=0)
    limit: int | None = param(None, "Evaluate only the first N records (smoke tests).", ge=1)


class EvalVisionSpec(Section):
    exclusive = (("fps", "num_frames"),)
    fps: float | None = param(2.0, "Frames sampled per second. Exactly one of fps / num_frames.", gt=0, le=60)
    num_frames: int | None = param(None, "Fixed frames per video. Exactly one of fps / num_frames.", ge=2)
    total_pixels: int | None = param(None, "Pixel budget per video over all frames; null uses the processor's.", ge=1)
    max_pixels: int | None = param(None, "Pixel cap per frame; null uses the processor's.", ge=1)



class GenerationSpec(Section):
    max_tokens: int = param(16, "Max new tokens; short constrained answers need few.", ge=1)
    temperature: float = param(0.0, "0 is greedy decoding (reproducible).", ge=0, le=2)
    top_p: float = param(1.0, "Nucleus sampling (temperature > 0).", gt=0, le=1)
    repetition_penalty: float = param(1.0, "Penalty on repeated tokens.", gt=0)


class MetricsSpec(Section):
    primary: Literal["accuracy", "f1", "balanced_accuracy"] = param("accuracy", "The metric that ranks checkpoints and AutoML trials.")


class ResultsSpec(Section):
    save_individual: bool = param(True, "Write results.json with every {video_id, question, gt, response}.")


class EvaluateSpec(Section):
    """Evaluate config of tao-finetune-cosmos-reason: the flat TOML of the seed's evaluator."""

    dataset: EvalDatasetSpec = param(default_factory=EvalDatasetSpec, description="Evaluation data.")
    model: EvalModelSpec = param(default_factory=EvalModelSpec, description="Model to evaluate.")
    task: EvalTaskSpec = param(default_factory=EvalTaskSpec, description="Task type and metrics family.")
    evaluation: EvaluationSpec = param(default_factory=EvaluationSpec, description="Batching and limits.")
    vision: EvalVisionSpec = param(default_factory=EvalVisionSpec, description="Video sampling.")
    generation: GenerationSpec = param(default_factory=GenerationSpec, description="Decoding.")
    metrics: MetricsSpec = param(default_factory=MetricsSpec, description="Metric selection.")
    results: ResultsSpec = param(default_factory=ResultsSpec, description="What to write.")
    num_gpus: int = param(1, "GPUs for evaluation (0 runs on CPU).", ge=0)
    results_dir: str = param("./results/evaluate", "Writes results.json and metrics.json here.")
