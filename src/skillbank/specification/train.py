"""The train action: cosmos-rl SFT of Cosmos-Reason, nested as cosmos-rl's TOML is.

Defaults follow the seed's critical overrides: the model as hf_model://nvidia/Cosmos-Reason2-8B,
model_max_length 40960, train_policy.type "sft", and a mini_batch that divides the batch. Values
whose cosmos-rl default surprises (tp_size 2, enable_checkpoint false) are set here explicitly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator, model_validator

from skillbank.specification import learning_rate
from skillbank.specification.base import Section
from skillbank.specification.meta import ModelRefStr, PathStr, param, rule_error
from skillbank.specification.pathmap import PathsSpec

MIN_MODEL_MAX_LENGTH = 40960
DEFAULT_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class CheckpointSpec(Section):
    enable_checkpoint: bool = param(True, "Save checkpoints. cosmos-rl defaults to false, which saves nothing and exports no safetensors.")
    save_freq: int | None = param(None, "Save every N optimizer steps; needs save_freq_in_epoch 0 (cosmos-rl and the local backend ignore save_freq while "
                                  "save_freq_in_epoch > 0). null: saves by save_freq_in_epoch. `skillbank plan --time-limit H` suggests N for a job "
                                  "that outlives its time limit.", ge=1)
    save_freq_in_epoch: int = param(1, "Save every N epochs; 0 saves every save_freq steps instead (set save_freq then).", ge=0, depends_on="train.epoch")
    save_mode: Literal["async", "sync"] = param("async", "Write checkpoints in the background (async) or block training (sync).")
    max_keep: int = param(5, "Keep the newest N checkpoints (and safetensors exports); -1 keeps all.", ge=-1)
    export_safetensors: bool = param(True, "Export a Hugging Face safetensors folder with each checkpoint (what evaluate reads).")
    upload_hf: bool = param(False, "Upload the final safetensors export to the Hugging Face Hub as <token's user>/<hf_repo_name>-<run timestamp> (needs HF_TOKEN with write access).")
    hf_repo_name: str = param("cosmos-reason-sft", "Hub repository name, without owner: the token's user is put before it and the run's timestamp after it.", depends_on="train.ckpt.upload_hf")
    upload_s3: Literal[False, True, "final", "all"] = param(False, "Upload to S3: \"final\" (or true) the last checkpoint and export, \"all\" every one, false none. Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_DEFAULT_REGION (AWS_ENDPOINT_URL for S3-compatible stores).")
    s3_bucket: str | None = param(None, "S3 bucket the uploads go to (required with upload_s3).", depends_on="train.ckpt.upload_s3")
    s3_prefix: str = param("outputs", "Key prefix in the bucket: a run's files go to <s3_prefix>/<run timestamp>/{safetensors,checkpoints}/step_N/...", depends_on="train.ckpt.upload_s3")

    @field_validator("upload_s3")
    @classmethod
    def _upload_s3_true_is_final(cls, value: bool | str) -> bool | str:
        return "final" if value is True else value  # cosmos-rl accepts only false, "final" or "all"

    @model_validator(mode="after")
    def _steps_need_save_freq(self) -> "CheckpointSpec":
        if self.save_freq_in_epoch == 0 and self.save_freq is None:
            raise rule_error("save_freq", "save_freq_in_epoch 0 saves every save_freq steps, but save_freq is null; set save_freq=N (steps) or save_freq_in_epoch=N (epochs)")
        return self

    def ignored_save_freq(self) -> str | None:
        """Why save_freq does nothing here (cosmos-rl's SFTPolicyWorker and the local backend both take
        save_freq_in_epoch x steps per epoch while it is > 0), or None: a warning of `spec` and preflight."""
        if self.save_freq is None or self.save_freq_in_epoch == 0 or not self.enable_checkpoint:
            return None
        return (f"train.ckpt.save_freq {self.save_freq} is ignored: save_freq_in_epoch {self.save_freq_in_epoch} saves every "
                f"{self.save_freq_in_epoch} epoch(s) instead (cosmos-rl and the local backend alike)")

    @model_validator(mode="after")
    def _max_keep_not_zero(self) -> "CheckpointSpec":
        if self.max_keep == 0:
            raise rule_error("max_keep", "max_keep 0 would delete every checkpoint; use -1 to keep all or N >= 1")
        return self

    @model_validator(mode="after")
    def _uploads_have_something_to_upload(self) -> "CheckpointSpec":
        if (self.upload_hf or self.upload_s3) and not self.enable_checkpoint:
            key = "upload_hf" if self.upload_hf else "upload_s3"
            raise rule_error(key, f"{key} uploads checkpoints, but enable_checkpoint is false; set enable_checkpoint true or turn the upload off")
        if self.upload_hf and not self.export_safetensors:
            raise rule_error("upload_hf", "upload_hf uploads the safetensors export; set export_safetensors true or upload_hf false")
        if self.upload_hf and ("/" in self.hf_repo_name or not self.hf_repo_name.strip()):
            raise rule_error("hf_repo_name", f"hf_repo_name {self.hf_repo_name!r} must be a bare repository name (the token's user is prefixed), e.g. cosmos-reason-sft")
        if self.upload_s3 and not self.s3_bucket:
            raise rule_error("s3_bucket", f"upload_s3 {self.upload_s3!r} needs s3_bucket (the bucket name, without s3://)")
        return self


class DatasetSplitSpec(Section):
    name: str = param("", "Hugging Face dataset name or local parquet; empty when custom.train_dataset is used.")
    test_size: float | None = param(None, "Validation split taken from train when no val_dataset is given: a fraction in (0, 1) or a record count.", ge=0)


class TrainPolicySpec(Section):
    type: Literal["sft"] = param("sft", "Training type. Must stay \"sft\": without it cosmos-rl silently switches to GRPO (RL).")
    mini_batch: int = param(2, "Samples per forward/backward on one rank (gradient accumulation over train_batch_per_replica / mini_batch). Lower it on OOM.", ge=1, automl="disabled", popular=True)
    dataloader_num_workers: int = param(4, "Data loader worker processes per rank.", ge=0)
    dataloader_seed: int = param(0, "Seed for data shuffling.", ge=0)
    dataset: DatasetSplitSpec = param(default_factory=DatasetSplitSpec, description="Dataset options of cosmos-rl's SFT data config.")


class TrainSection(Section):
    epoch: int = param(3, "Passes over the training set. Published recipes overfit after 1-3 epochs: evaluate every checkpoint.", ge=1, le=1000, automl="default", search=(1, 20), popular=True)
    train_batch_per_replica: int = param(32, "Records per data-parallel rank per optimizer step (the global batch is this x dp_shard_size x dp_replicate_size). Must be a multiple of train_policy.mini_batch.", ge=1, automl="disabled", popular=True)
    max_num_steps: int | None = param(None, "Stop after this many optimizer steps (smoke tests); null trains all epochs.", ge=1)
    output_dir: PathStr = param("./results/train", "Run folder: checkpoints go to <output_dir>/<timestamp>/checkpoints/step_N, exports to .../safetensors/step_N.")
    seed: int = param(42, "Random seed for model init and training.", ge=0)
    optm_name: Literal["AdamW", "Adam"] = param("AdamW", "Optimizer.")
    optm_lr: float = param(
        learning_rate.FULL_LR,
        f"Peak learning rate. {learning_rate.FULL_LR:g} for full fine-tuning; `skillbank spec` sets {learning_rate.LORA_LR:g} when "
        f"policy.lora.enable turns on and you set no rate ({learning_rate.SOURCE}; full: examples/train_full/qwen3vl_full_sft.yaml, "
        f"{learning_rate.FULL_LR:g}). AutoML searches one decade either side of the spec's default (log scale): "
        f"{learning_rate.FULL_LR / 10:g}..{learning_rate.FULL_LR * 10:g} full, {learning_rate.LORA_LR / 10:g}..{learning_rate.LORA_LR * 10:g} LoRA.",
        gt=0, le=1, automl="default", search=(1e-6, 1e-3), log=True, popular=True)
    optm_betas: tuple[float, float] = param((0.9, 0.999), "Adam betas.")
    optm_weight_decay: float = param(0.01, "Decoupled weight decay.", ge=0, le=1, automl="enabled", search=(0.0, 0.1))
    optm_warmup_steps: float = param(0.03, "Linear warm-up from 0 to optm_lr (cosmos-rl's ramp: the first step runs at 0): a fraction of total steps (rounded down) when < 1, else a step count.", ge=0, automl="enabled", search=(0.0, 0.2))
    optm_decay_type: Literal["linear", "sqrt", "cosine", "none"] = param("cosine", "Learning-rate decay after warm-up.", automl="default", option_weights=[0.1, 0.1, 0.4, 0.4])
    optm_min_lr_factor: float = param(0.0, "Floor of the decayed learning rate, as a fraction of optm_lr.", ge=0, le=1)
    optm_grad_norm_clip: float = param(1.0, "Clip the global gradient norm to this value.", gt=0, automl="enabled", search=(0.1, 5.0))
    param_dtype: Literal["bfloat16", "float16", "float32"] = param("bfloat16", "Compute dtype of forward/backward (the local backend uses float32 on CPU).")
    fsdp_reshard_after_forward: Literal["always", "never", "default"] = param(
        "default",
        "FSDP: free each block's gathered weights after its forward and gather them again for the backward (always; default: "
        "the same without pipeline parallelism), or keep them until the backward (never): fewer collectives per step, a full "
        "copy of the weights on every GPU while a step runs.",
    )
    ckpt: CheckpointSpec = param(default_factory=CheckpointSpec, description="Checkpointing.")
    train_policy: TrainPolicySpec = param(default_factory=TrainPolicySpec, description="SFT policy and data loading.")

    @model_validator(mode="after")
    def _batch_divisible_by_mini_batch(self) -> "TrainSection":
        batch, mini = self.train_batch_per_replica, self.train_policy.mini_batch
        if batch % mini:
            raise rule_error(
                "train_batch_per_replica",
                f"train_batch_per_replica ({batch}) must be a multiple of train.train_policy.mini_batch ({mini}); "
                f"for example train_batch_per_replica={max(mini, batch - batch % mini)}",
            )
        return self


class ValidationSpec(Section):
    enable: bool = param(True, "Compute validation loss during training (on custom.val_dataset, else on a split of train).")
    freq_in_epoch: int = param(1, "Validate every N epochs.", ge=1, depends_on="train.epoch")
    batch_size: int = param(8, "Validation batch per rank.", ge=1)


class ParallelismSpec(Section):
    tp_size: int = param(1, "Tensor parallel size. cosmos-rl defaults to 2; 1 is right for FSDP SFT.", ge=1)
    cp_size: int = param(1, "Context parallel size.", ge=1)
    pp_size: int = param(1, "Pipeline parallel size.", ge=1)
    dp_shard_size: int = param(8, "FSDP shards per replica: the GPUs per node (with tp = cp = pp = 1).", ge=1, popular=True)
    dp_replicate_size: int = param(1, "Data-parallel replicas: the node count.", ge=1, popular=True)


class LoraSpec(Section):
    enable: bool = param(False, "Train LoRA adapters instead of all weights.", popular=True)
    r: int = param(16, "LoRA rank.", ge=1, le=256, automl="default", search=(4, 128), math_cond="^ 2", depends_on="policy.lora.enable")
    lora_alpha: float = param(32.0, "LoRA scaling alpha.", gt=0, le=1024, automl="default", search=(4.0, 256.0), depends_on="policy.lora.enable")
    lora_dropout: float = param(0.05, "Dropout on the LoRA path.", ge=0, lt=1, automl="default", search=(0.0, 0.3), depends_on="policy.lora.enable")
    target_modules: list[str] = param(default_factory=lambda: list(DEFAULT_TARGET_MODULES), description="Module names that get adapters.")
    use_rslora: bool = param(False, "Rank-stabilised LoRA scaling (alpha / sqrt(r)).")
    modules_to_save: list[str] | None = param(None, "Modules trained in full beside the adapters.")

    @property
    def scale(self) -> float | None:
        """peft's scaling of the adapters' output: alpha / r, or alpha / sqrt(r) with rsLoRA; None when LoRA is off."""
        if not self.enable:
            return None
        return self.lora_alpha / (self.r**0.5 if self.use_rslora else self.r)


class PolicySpec(Section):
    model_name_or_path: ModelRefStr = param(
        "hf_model://nvidia/Cosmos-Reason2-8B",
        "Model: hf_model://owner/repo (downloaded before launch), an HF id, or a local folder with config.json.",
        popular=True,
    )
    model_max_length: int = param(MIN_MODEL_MAX_LENGTH, "Max tokens per sample. Below 40960 video samples truncate and break vision-token alignment.", ge=MIN_MODEL_MAX_LENGTH, popular=True)
    model_gradient_checkpointing: bool = param(True, "Recompute activations in backward to save memory.")
    enable_liger_fused_cross_entropy: bool = param(
        False,
        "Fuse lm_head and the cross-entropy (liger-kernel's FusedLinearCrossEntropy, cosmos-rl backend): the loss is computed in chunks and the full "
        "vocab x tokens logits are never held, the largest part of memory on long video samples. Needs liger-kernel on the GPU node; the TOML also sets "
        "policy.enable_liger_kernel (liger's RMSNorm / SwiGLU / RoPE kernels). Not with tp_size or cp_size > 1 (cosmos-rl falls back to the unfused loss). "
        "The local backend computes the plain loss.",
    )
    parallelism: ParallelismSpec = param(default_factory=ParallelismSpec, description="Parallelism; GPUs per replica = tp*cp*pp*dp_shard.")
    lora: LoraSpec = param(default_factory=LoraSpec, description="LoRA; emitted to cosmos-rl only when enable is true.")

    @model_validator(mode="after")
    def _fused_loss_without_tp_or_cp(self) -> "PolicySpec":
        par = self.parallelism
        if self.enable_liger_fused_cross_entropy and (par.tp_size > 1 or par.cp_size > 1):
            raise rule_error("enable_liger_fused_cross_entropy", f"enable_liger_fused_cross_entropy needs parallelism.tp_size 1 and cp_size 1 (got {par.tp_size} / {par.cp_size}): "
                             "cosmos-rl falls back to the unfused loss and the memory the plan counted on is not saved; set tp_size=1 and cp_size=1, or turn it off")
        return self


class LoggingSpec(Section):
    logger: list[Literal["console", "wandb"]] = param(default_factory=lambda: ["console"], description="Loggers. Keep console: progress and failures are read from its lines.")
    project_name: str = param("cosmos_reason_sft", "Project name (wandb).")
    experiment_name: str | None = param(None, "Run name; null uses the output folder.")


class DatasetPathsSpec(Section):
    annotation_path: PathStr = param("", "LLaVA annotations.json (a JSON array of records with id, video, video_fps, conversations).")
    media_path: PathStr = param("", "Folder the records' video / image paths are relative to (empty: the annotation file's folder).")


class VisionSpec(Section):
    exclusive = (("fps", "nframes"),)
    fps: float | None = param(2.0, "Frames sampled per second of video. Exactly one of fps / nframes.", gt=0, le=60, automl="default", search=(1.0, 8.0))
    nframes: int | None = param(None, "Fixed frames per video. Exactly one of fps / nframes.", ge=2, le=4096)
    total_pixels: int | None = param(None, "Pixel budget per video over all frames; null derives it from policy.model_max_length (90% of the context).", ge=1)
    max_pixels: int | None = param(None, "Pixel cap per frame; null uses the processor's.", ge=1)



class CustomSpec(Section):
    train_dataset: DatasetPathsSpec = param(default_factory=DatasetPathsSpec, description="Training data.")
    val_dataset: DatasetPathsSpec | None = param(None, "Validation data; null splits train by train.train_policy.dataset.test_size.")
    vision: VisionSpec = param(default_factory=VisionSpec, description="Video sampling and pixel budget.")
    system_prompt: str = param("You are a helpful assistant. Answer the question about the video with a short answer.", "System prompt of every chat; a record whose conversations open with its own system turn uses that one instead.")


class FittedSpec(Section):
    records: int | None = param(None, "Train records (after the validation split) the keys in `ceilings` were fitted to by `skillbank spec`; null: nothing was fitted.", ge=0)
    counted: str = param("", "Where those records were counted: an annotation file on the machine that wrote the spec (under --path-map a "
                         "local copy, often a sample of the node's data), or \"described: --records N\".")
    ceilings: dict[str, int] = param(default_factory=dict, description="Each fitted key's value before fitting (the ceiling, from the template): the "
                                     "spec holds the fitted value. A submitted job's first step re-fits these keys to the files where it runs "
                                     "(recorded in the job record's `fitted`); `spec --from` treats them as not set by you. Keys you set are never here.")


class TrainSpec(Section):
    """Train spec of tao-finetune-cosmos-reason: cosmos-rl SFT, nested as its TOML."""

    train: TrainSection = param(default_factory=TrainSection, description="Training loop and optimizer.")
    validation: ValidationSpec = param(default_factory=ValidationSpec, description="Validation during training.")
    policy: PolicySpec = param(default_factory=PolicySpec, description="Model, length, parallelism, LoRA.")
    logging: LoggingSpec = param(default_factory=LoggingSpec, description="Logging.")
    custom: CustomSpec = param(default_factory=CustomSpec, description="Datasets, vision sampling and prompt (cosmos-rl's free `custom` table).")
    redis: str = param("12800", "Port of the redis-server cosmos-rl's controller starts.")
    results_dir: PathStr = param("./results", "Folder for job records and reports.")
    paths: PathsSpec = param(default_factory=PathsSpec, description="The path map this spec was written with (`skillbank spec --path-map`); applied where its LOCAL folders exist.")
    user_set: list[str] = param(
        default_factory=list,
        description="Dotted keys whose values you chose (`skillbank spec --set`, a shorthand such as epochs=3 or lora=true; kept by `spec --from`): "
        "AutoML leaves them out of its search (`skillbank automl --search KEY` searches one anyway) and the dry run lists them as fixed. "
        "Batches you did not set here are fitted to the data.",
    )

    @field_validator("user_set")
    @classmethod
    def _user_set_names_fields(cls, value: list[str]) -> list[str]:
        from skillbank.specification.keys import find_field

        unknown = [key for key in value if find_field(cls, key) is None]
        if unknown:
            raise ValueError(f"user_set names no spec key: {', '.join(unknown)} (dotted keys such as train.epoch)")
        return sorted(set(value))
    fitted: FittedSpec = param(default_factory=FittedSpec, description="Values `skillbank spec` fitted to the records it counted (a batch you did not set lowered "
                               "to train usefully): how many records, where, and each key's ceiling, so a job re-fits them to the data where it runs.")
