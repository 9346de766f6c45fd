"""The rl action: GRPO (reinforcement learning) of Cosmos-Reason through cosmos-rl, after SFT.

Nested as cosmos-rl's TOML is, with `train.train_policy.type = "grpo"` (the train action keeps its
own `type = "sft"` rule: the two never share a model). A policy (FSDP over policy.parallelism) trains
on rollouts that a separate vLLM engine (rollout.num_gpus GPUs, tensor parallel rollout.tp_size)
samples, rollout.n_generation per prompt; the rewards score each sample against the record's
reference answer. Values whose cosmos-rl default surprises (policy tp 2, kl_beta 0, 16 samples per
prompt, 20 warm-up steps, compile on) are set here explicitly. The start is a parent SFT job's
export; a base model is allowed with a preflight warning.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from skillbank.scoring.answers import ANSWER_TYPES, TASK_TYPES  # the answer rules own both (a light module)
from skillbank.specification.base import Section
from skillbank.specification.meta import ModelRefStr, PathStr, param, rule_error
from skillbank.specification.pathmap import PathsSpec
from skillbank.specification.train import MIN_MODEL_MAX_LENGTH, DatasetPathsSpec, LoggingSpec, VisionSpec

# exact_match: skillbank's answer rules (skillbank.scoring.answers, the evaluator's), on the extracted
# answer; format, single_choice, boxed_math: cosmos-rl 0.4.7's own reward functions.
REWARDS = ("exact_match", "format", "single_choice", "boxed_math")
RewardName = Literal[REWARDS]
FORMAT_PATTERN = "<think>\\n...\\n</think>\\n\\n<answer>\\n...\\n</answer>"  # what cosmos-rl's format reward accepts, whole response
MIN_RECOMMENDED_GPUS = 4  # the published GRPO recipes: policy FSDP plus a tensor-parallel rollout engine


class RlCheckpointSpec(Section):
    enable_checkpoint: bool = param(True, "Save checkpoints. cosmos-rl defaults to false, which saves nothing and exports no safetensors.")
    save_freq: int = param(20, "Save every N policy steps.", ge=1)
    save_mode: Literal["async", "sync"] = param("async", "Write checkpoints in the background (async) or block training (sync).")
    max_keep: int = param(5, "Keep the newest N checkpoints (and safetensors exports); -1 keeps all.", ge=-1)
    export_safetensors: bool = param(True, "Export a Hugging Face safetensors folder with each checkpoint (what evaluate reads).")

    @model_validator(mode="after")
    def _max_keep_not_zero(self) -> "RlCheckpointSpec":
        if self.max_keep == 0:
            raise rule_error("max_keep", "max_keep 0 would delete every checkpoint; use -1 to keep all or N >= 1")
        return self


class GrpoPolicySpec(Section):
    type: Literal["grpo"] = param("grpo", "Training type: GRPO. SFT is the train action.")
    reward_function: dict[RewardName, float] = param(
        default_factory=lambda: {"exact_match": 0.9, "format": 0.1},
        description="Rewards and their weights, summed per sample. exact_match: the extracted answer equals the reference "
        "(skillbank's answer rules, as evaluate scores: custom.answer_type extraction, custom.task_type labels); "
        f"format: the whole response is {FORMAT_PATTERN} (cosmos-rl's; needs answer_type reasoning); "
        "single_choice: the <answer> text (else the response) equals the reference, case-insensitive (cosmos-rl's); "
        "boxed_math: the \\boxed{} answer is mathematically equal (cosmos-rl's).",
        popular=True,
        examples=[{"exact_match": 0.9, "format": 0.1}, {"single_choice": 1.0}],
    )
    kl_beta: float = param(0.01, "KL penalty towards the starting policy. cosmos-rl defaults to 0 (no reference model loaded); 0.01 is typical.", ge=0, le=1,
                           automl="enabled", search=(0.0, 0.1), popular=True)
    temperature: float = param(1.0, "Sampling temperature of the rollouts (GRPO needs varied samples to compare).", gt=0, le=2)
    epsilon_low: float = param(0.2, "Lower clip of the policy ratio.", gt=0, lt=1)
    epsilon_high: float = param(0.2, "Upper clip of the policy ratio (DAPO suggests 0.28).", gt=0, lt=1)
    mini_batch: int = param(2, "Samples per forward/backward on one policy rank. Lower it on OOM.", ge=1, automl="disabled")
    dataloader_num_workers: int = param(0, "Data loader worker processes of the controller.", ge=0)
    dataloader_seed: int = param(0, "Seed for prompt shuffling.", ge=0)

    @model_validator(mode="after")
    def _rewards_score_something(self) -> "GrpoPolicySpec":
        if not self.reward_function:
            raise rule_error("reward_function", 'reward_function is empty: name at least one reward, e.g. {"exact_match": 1.0}')
        if any(w < 0 for w in self.reward_function.values()) or sum(self.reward_function.values()) <= 0:
            raise rule_error("reward_function", "reward weights must be >= 0 with a positive sum")
        return self


class RlTrainSection(Section):
    epoch: int = param(1, "Passes over the prompts.", ge=1, le=100, automl="enabled", search=(1, 5), popular=True)
    train_batch_per_replica: int = param(32, "Rollout samples per policy step on each policy replica (prompts x n_generation), split over its data-parallel ranks. Must be a multiple of policy.parallelism.dp_shard_size x train_policy.mini_batch (cosmos-rl asserts it on the GPUs).", ge=1, automl="disabled", popular=True)
    max_num_steps: int | None = param(None, "Stop after this many policy steps (smoke tests); null trains all epochs.", ge=1)
    output_dir: PathStr = param("./results/rl", "Run folder: checkpoints go to <output_dir>/<timestamp>/checkpoints/step_N, exports to .../safetensors/step_N.")
    seed: int = param(42, "Random seed.", ge=0)
    optm_name: Literal["AdamW", "Adam"] = param("AdamW", "Optimizer.")
    optm_lr: float = param(1e-6, "Peak learning rate. GRPO wants it small (1e-6); SFT's 1e-5 destabilises it.", gt=0, le=1e-3, automl="enabled", search=(1e-7, 1e-5), log=True, popular=True)
    optm_weight_decay: float = param(0.01, "Decoupled weight decay.", ge=0, le=1)
    optm_warmup_steps: float = param(0.03, "Linear warm-up from 0 to optm_lr (cosmos-rl's ramp: the first step runs at 0): a fraction of total steps (rounded down) when < 1, else a step count (cosmos-rl defaults to 20 steps).", ge=0)
    optm_grad_norm_clip: float = param(1.0, "Clip the global gradient norm to this value.", gt=0)
    param_dtype: Literal["bfloat16", "float16", "float32"] = param("bfloat16", "Compute dtype of forward/backward.")
    ckpt: RlCheckpointSpec = param(default_factory=RlCheckpointSpec, description="Checkpointing.")
    train_policy: GrpoPolicySpec = param(default_factory=GrpoPolicySpec, description="GRPO: rewards, KL penalty, clipping.")


class RlParallelismSpec(Section):
    tp_size: int = param(1, "Tensor parallel size of the policy. cosmos-rl defaults to 2; 1 is right for FSDP.", ge=1)
    dp_shard_size: int = param(4, "FSDP shards of the policy: its GPUs (with tp 1).", ge=1, popular=True)


class RlPolicySpec(Section):
    model_name_or_path: ModelRefStr = param("", "Starting checkpoint (required; preflight errors while empty): a parent SFT job's export (<output_dir>/<timestamp>/safetensors/step_N), "
                                    "or a base model (hf_model://owner/repo, HF id; preflight warns: RL from a base model rarely follows the answer format).", popular=True)
    model_max_length: int = param(MIN_MODEL_MAX_LENGTH, "Max tokens per sample (prompt with video + response). Below 40960 video samples truncate and break vision-token alignment.", ge=MIN_MODEL_MAX_LENGTH)
    model_gradient_checkpointing: bool = param(True, "Recompute activations in backward to save memory.")
    parallelism: RlParallelismSpec = param(default_factory=RlParallelismSpec, description="Policy parallelism; policy GPUs = tp_size * dp_shard_size.")


class RolloutParallelism(Section):
    tp_size: int = param(2, "Tensor parallel size of one vLLM rollout engine; must divide rollout.num_gpus.", ge=1, popular=True)


class RolloutSpec(Section):
    num_gpus: int = param(4, "GPUs of the rollout engines (replicas = num_gpus / parallelism.tp_size). Total GPUs = policy GPUs + these.", ge=1, popular=True)
    parallelism: RolloutParallelism = param(default_factory=RolloutParallelism, description="Rollout engine parallelism.")
    n_generation: int = param(8, "Samples per prompt (the seeds' num_samples_per_prompt; 2-8 typical; cosmos-rl defaults to 16). GRPO compares them: at least 2.", ge=2, le=64,
                              automl="enabled", search=(2, 16), popular=True)
    max_response_length: int = param(2048, "Max tokens a rollout sample may generate (reasoning needs room to think).", ge=16)
    batch_size: int = param(4, "Prompts per rollout generation call.", ge=1)
    gpu_memory_utilization: float = param(0.8, "Share of each rollout GPU's memory vLLM may take.", gt=0, le=1)
    backend: Literal["vllm"] = param("vllm", "Rollout engine.")

    @model_validator(mode="after")
    def _tp_divides_gpus(self) -> "RolloutSpec":
        tp = self.parallelism.tp_size
        if self.num_gpus % tp:
            raise rule_error("num_gpus", f"rollout.num_gpus ({self.num_gpus}) must be a multiple of rollout.parallelism.tp_size ({tp}): "
                             f"each vLLM replica takes tp_size GPUs; e.g. num_gpus={max(tp, self.num_gpus - self.num_gpus % tp)}")
        return self

    @property
    def replicas(self) -> int:
        return self.num_gpus // self.parallelism.tp_size


class RlLoggingSpec(LoggingSpec):
    project_name: str = param("cosmos_reason_rl", "Project name (wandb).")


class RlVisionSpec(VisionSpec):
    fps: float | None = param(2.0, "Frames sampled per second of video. Exactly one of fps / nframes.", gt=0, le=60)


class RlCustomSpec(Section):
    train_dataset: DatasetPathsSpec = param(default_factory=DatasetPathsSpec, description="Prompts: LLaVA records whose first answer is the reference the rewards check.")
    vision: RlVisionSpec = param(default_factory=RlVisionSpec, description="Video sampling and pixel budget.")
    answer_type: Literal[ANSWER_TYPES] = param("reasoning", "\"reasoning\": the policy thinks in <think>...</think> and answers in <answer>...</answer>; the answer is extracted before exact_match "
                                                       "(as evaluate does). \"short\": the response is the answer (no format reward).", popular=True)
    task_type: Literal[TASK_TYPES] = param("", "How exact_match reads answers, as evaluate's task.type: \"\" (yes/no when the reference is yes/no, else exact text), \"its_directionality\", \"mcq\".")
    system_prompt: str | None = param(None, f"System prompt; null: answer_type reasoning asks for {FORMAT_PATTERN} (what the format reward checks), short asks for a short answer. "
                                      "A record whose conversations open with its own system turn uses that one instead.")


class RlSpec(Section):
    """RL spec of tao-finetune-cosmos-reason: cosmos-rl GRPO, nested as its TOML."""

    train: RlTrainSection = param(default_factory=RlTrainSection, description="Policy training loop, optimizer and GRPO.")
    rollout: RolloutSpec = param(default_factory=RolloutSpec, description="Rollout engines (vLLM): GPUs, tensor parallelism, samples per prompt.")
    policy: RlPolicySpec = param(default_factory=RlPolicySpec, description="Starting checkpoint, length, policy parallelism.")
    logging: RlLoggingSpec = param(default_factory=RlLoggingSpec, description="Logging.")
    custom: RlCustomSpec = param(default_factory=RlCustomSpec, description="Prompts, vision sampling, answer format (cosmos-rl's free `custom` table).")
    redis: str = param("12800", "Port of the redis-server cosmos-rl's controller starts.")
    results_dir: PathStr = param("./results", "Folder for job records and reports.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this spec was written with (`skillbank spec --path-map`); applied where its LOCAL folders exist.")

    @model_validator(mode="after")
    def _batch_splits_over_ranks_and_mini_batches(self) -> "RlSpec":
        batch, mini, ranks = self.train.train_batch_per_replica, self.train.train_policy.mini_batch, self.policy.parallelism.dp_shard_size
        if batch % (ranks * mini):
            unit = ranks * mini
            raise rule_error("train.train_batch_per_replica", f"train.train_batch_per_replica ({batch}) must be a multiple of policy.parallelism.dp_shard_size ({ranks}) "
                             f"x train.train_policy.mini_batch ({mini}) = {unit}, as cosmos-rl's GRPO worker asserts; e.g. {max(unit, batch - batch % unit)}")
        return self

    @model_validator(mode="after")
    def _format_reward_needs_reasoning(self) -> "RlSpec":
        if "format" in self.train.train_policy.reward_function and self.custom.answer_type != "reasoning":
            raise rule_error("custom.answer_type", f"the format reward scores {FORMAT_PATTERN} responses, but custom.answer_type is "
                             f"{self.custom.answer_type!r}: set custom.answer_type=reasoning or drop format from train.train_policy.reward_function")
        return self

    @property
    def policy_gpus(self) -> int:
        par = self.policy.parallelism
        return par.tp_size * par.dp_shard_size

    @property
    def gpus(self) -> int:
        """GPUs the run takes: the policy's plus the rollout engines'."""
        return self.policy_gpus + self.rollout.num_gpus
