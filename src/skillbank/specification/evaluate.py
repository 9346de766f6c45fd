"""The evaluate action: the seed's flat TOML (dataset, model, task, evaluation, vision, generation,
metrics, results, num_gpus, results_dir)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from skillbank.scoring.answers import ANSWER_TYPES, TASK_TYPES  # the answer rules own both (a light module: duckdb loads inside its queries)
from skillbank.specification.base import Section
from skillbank.specification.meta import ModelRefStr, PathStr, param, rule_error
from skillbank.specification.pathmap import PathsSpec


# Default prompts (dataset.system_prompt null), per evaluation.answer_type and, for reasoning, per model
# family (config.json model_type): what the models were trained and evaluated with.
SHORT_SYSTEM_PROMPT = "You are a helpful assistant. Answer the question about the video with a short answer."
COSMOS_REASON1_REASONING = (  # cosmos-reason1 prompts/reasoning.yaml: the system prompt
    "Answer the question with provided options in the following format:\n<think>\nyour reasoning\n</think>\n\n"
    "<answer>\nyour answer\n</answer>."
)
COSMOS_REASON2_SYSTEM = "You are a helpful assistant."  # cosmos_reason2_utils.text.SYSTEM_PROMPT
COSMOS_REASON2_REASONING = (  # cosmos_reason2_utils.text.REASONING_PROMPT: appended to the question after a blank line
    "Answer the question using the following format:\n\n<think>\nYour reasoning.\n</think>\n\n"
    "Write your final answer immediately after the </think> tag."
)


PROMPT_FAMILY_CHOICES = ("auto", "cosmos-reason1", "cosmos-reason2")
DEFAULT_FPS = 2.0  # vision.fps when neither the spec nor the model's recipe sets the sampling


def reasoning_prompt(prompt_family: str, system_prompt: str | None) -> tuple[str, str]:
    """(system prompt, text appended to each question) of a reasoning evaluation.

    cosmos-reason2 appends its reasoning instruction to the question (its evaluator does), after the
    given system prompt or its own; cosmos-reason1's instruction is the system prompt, and follows the
    question instead when a system prompt is given. A given prompt that already asks for <think> keeps
    its own instruction (nothing is appended): a custom prompt never silently drops the format.
    """
    asks_format = system_prompt is not None and "<think>" in system_prompt
    if prompt_family == "cosmos-reason2":
        return (system_prompt or COSMOS_REASON2_SYSTEM), ("" if asks_format else "\n\n" + COSMOS_REASON2_REASONING)
    if system_prompt is None:
        return COSMOS_REASON1_REASONING, ""
    return system_prompt, ("" if asks_format else "\n\n" + COSMOS_REASON1_REASONING)


def default_prompt(answer_type: str, prompt_family: str, system_prompt: str | None = None) -> tuple[str, str]:
    """(system prompt, question suffix): short answers use the given prompt or the short-answer one;
    reasoning gets the prompt family's instruction (reasoning_prompt)."""
    if answer_type != "reasoning":
        return (SHORT_SYSTEM_PROMPT if system_prompt is None else system_prompt), ""
    return reasoning_prompt(prompt_family, system_prompt)


class EvalDatasetSpec(Section):
    annotation_path: PathStr = param("", "LLaVA annotations.json of the evaluation set (id, video, video_fps, conversations).")
    media_dir: PathStr = param("", "Folder the records' video paths are relative to (empty: the annotation file's folder).")
    system_prompt: str | None = param(None, "System prompt; null: the model's recipe (skillbank_recipe.json: the prompt it was trained with), else the answer type's default (short: a short-answer prompt; reasoning: evaluation.prompt_family's). With answer_type reasoning, the family's reasoning instruction follows the question unless this prompt already asks for <think>. A record whose conversations open with its own system turn keeps that one.")


class EvalModelSpec(Section):
    model_name: ModelRefStr = param("hf_model://nvidia/Cosmos-Reason2-8B", "Model: an HF folder, a run's safetensors/step_N folder (a whole model, or the LoRA adapter a LoRA run exports), hf_model://owner/repo or an HF id.", popular=True)
    enable_lora: bool = param(False, "model_name is a LoRA adapter folder, applied to its base model and merged in memory (a folder with adapter_config.json is read as one without this).")
    base_model_path: ModelRefStr = param("", "Base model of a LoRA adapter; empty: the adapter's own base_model_name_or_path (adapter_config.json) where it is on this machine or the hub, else its skillbank_recipe.json's base_model.")
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = param("auto", "Weights dtype; auto picks bfloat16 on GPU, float32 on CPU.")


class EvalTaskSpec(Section):
    type: Literal[TASK_TYPES] = param("", "\"\": general evaluator (yes/no binary metrics per family whose answers are all yes/no, else exact match); \"its_directionality\": left/right/straight; \"mcq\": multiple choice, options A) ... in the question, answer a letter or the option's text.")


class EvaluationSpec(Section):
    answer_type: Literal[ANSWER_TYPES] | None = param(None, "\"short\": the response is the answer; \"reasoning\": <think>...</think> then the answer, extracted before scoring (the seed's reasoning evaluation). null: the model's recipe, else short. Picks the defaults of dataset.system_prompt and the null generation settings.", popular=True)
    prompt_family: Literal[PROMPT_FAMILY_CHOICES] = param("auto", "Whose reasoning instruction answer_type reasoning uses: \"cosmos-reason1\" (a <think>/<answer> system prompt), \"cosmos-reason2\" (an instruction after the question), \"auto\": by the checkpoint's config.json model_type (qwen3* is cosmos-reason2, else cosmos-reason1). A family that is not the checkpoint's is a warning. Recorded in metrics.json generation.prompt_family.")
    engine: Literal["transformers", "vllm"] = param("transformers", "Generation engine: transformers (CPU or GPU), or vLLM (GPU, vllm installed; same results format; not run in skillbank's CPU tests).")
    batch_size: int = param(8, "Samples per batched generate call (transformers engine).", ge=1)
    seed: int = param(1, "Seed for sampling (greedy decoding ignores it); retry pass k uses seed + k.", ge=0)
    limit: int | None = param(None, "Evaluate only the first N records (smoke tests).", ge=1)
    exclude_training_overlap: bool = param(False, "Leave out of the scores (and results.json) every item that shares content with the model's training data (its recipe's training_data: the same clip bytes, or the same question and answer about a clip): metrics.json training_overlap lists them either way, and says so when the training data is not on this machine.")


class EvalVisionSpec(Section):
    exclusive = (("fps", "num_frames"),)
    exclusive_may_be_unset = True
    fps: float | None = param(None, f"Frames sampled per second; at most one of fps / num_frames. Both null: the model's recipe (how it was trained), else fps {DEFAULT_FPS}. A value that differs from the recipe's is a warning.", gt=0, le=60)
    num_frames: int | None = param(None, "Fixed frames per video; at most one of fps / num_frames (both null: the model's recipe, else fps).", ge=2)
    total_pixels: int | None = param(None, "Pixel budget per video over all frames; null: the model's recipe (training's budget), else the processor's.", ge=1)
    max_pixels: int | None = param(None, "Pixel cap per frame; null: the model's recipe, else the processor's.", ge=1)



# What the null generation settings become, per evaluation.answer_type: short answers decode greedily
# in a few tokens; reasoning follows the seed's evaluation config (cosmos-reason's vLLM path: top_p 0.95).
ANSWER_DEFAULTS: dict[str, dict[str, float | int]] = {
    "short": {"max_tokens": 16, "temperature": 0.0, "top_p": 1.0, "max_retries": 0},
    "reasoning": {"max_tokens": 1024, "temperature": 0.6, "top_p": 0.95, "max_retries": 10},
}
RETRY_TOKENS = 256  # retry pass k: max_tokens + RETRY_TOKENS * k (the seed's evaluator)
RETRY_TEMPERATURE_STEP, RETRY_TEMPERATURE_CAP = 0.05, 0.9  # ... and temperature + 0.05 * k, at most 0.9


def _by_answer_type(key: str) -> str:
    return f"null: {ANSWER_DEFAULTS['short'][key]} for short answers, {ANSWER_DEFAULTS['reasoning'][key]} for reasoning"


class GenerationSpec(Section):
    max_tokens: int | None = param(None, f"Max new tokens ({_by_answer_type('max_tokens')}).", ge=1)
    temperature: float | None = param(None, f"Sampling temperature, 0 is greedy decoding ({_by_answer_type('temperature')}).", ge=0, le=2)
    top_p: float | None = param(None, f"Nucleus sampling when temperature > 0 ({_by_answer_type('top_p')}).", gt=0, le=1)
    top_k: int = param(0, "Keep the k most likely tokens when sampling; 0: off (as the seed's vLLM call).", ge=0)
    repetition_penalty: float = param(1.0, "Divides the logits of tokens already in the prompt or the answer (1: off; transformers and vLLM alike).", gt=0)
    presence_penalty: float = param(0.0, "Subtracted from the logits of tokens already generated (OpenAI / vLLM semantics; 0: off).", ge=-2, le=2)
    frequency_penalty: float = param(0.0, "Subtracted once per earlier occurrence of a token in the answer (OpenAI / vLLM semantics; 0: off).", ge=-2, le=2)
    max_retries: int | None = param(None, f"Regenerate the responses the scorer cannot read (empty, no answer, no label), up to this many passes, stopping at the first pass that fixes none; pass k adds {RETRY_TOKENS}*k tokens and {RETRY_TEMPERATURE_STEP}*k temperature (at most {RETRY_TEMPERATURE_CAP}) ({_by_answer_type('max_retries')}).", ge=0)

    def resolved(self, answer_type: str) -> dict[str, float | int]:
        """Every setting with its null replaced by the answer type's default."""
        values = self.model_dump()
        return {key: ANSWER_DEFAULTS[answer_type][key] if value is None else value for key, value in values.items()}


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
    num_gpus: int = param(1, "GPUs for evaluation (0 runs on CPU; the vLLM engine uses them as tensor parallel size).", ge=0)
    results_dir: PathStr = param("./results/evaluate", "Writes results.json and metrics.json here.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this spec was written with (`skillbank spec --path-map`); applied where its LOCAL folders exist.")

    @model_validator(mode="after")
    def _vllm_runs_whole_models(self) -> "EvaluateSpec":
        if self.evaluation.engine == "vllm" and self.model.enable_lora:
            raise rule_error("evaluation.engine", "the vllm engine evaluates whole models, not LoRA adapters: "
                             "use engine transformers (merges the adapter in memory) or evaluate the merged export (skillbank export)")
        if self.evaluation.engine == "vllm" and self.num_gpus == 0:
            raise rule_error("evaluation.engine", "the vllm engine runs on GPUs: set num_gpus >= 1, or use engine transformers on CPU")
        return self
