"""Preflight: every known failure of a launch, caught before it, on every record.

Entry point: `skillbank.preflight.run.run_preflight(...)` -> Report (ok, findings, stats); the
`skillbank preflight` command and scripts/check_tao_launch_preflight.py print it.

Each check belongs to one group, by its name's prefix (report.group_of): spec (spec.*), data
(annotations.*, media.*, vision.*, cache.*), env (env.*). `--only GROUP` runs some; with
`--runs-on node` (dry runs, Docker, Slurm) env findings get severity "node" ("check on the node")
and do not fail: the rendered job runs the env checks first where it runs.

Checks (each finding names one; severity error, warning or node; any error means exit 2):
- spec.schema            the spec models' rules (skillbank.specification), where = the dotted key
- spec.parallelism       dp_shard*tp*cp*pp == --gpus-per-node; dp_replicate == --nodes; tp_size / cp_size divide the
                         model's heads as cosmos-rl shards them (training.cosmos_rl.family.parallel_check), whatever --backend
- spec.steps_per_rank    optimizer steps as cosmos-rl counts them (skillbank.runs.steps): zero is an error,
                         fewer than 4 per epoch a warning (both propose batches); validation that cosmos-rl would drop whole
- spec.validation_data   validation.enable with no validation data
- spec.dataset_paths     annotation path empty or missing; media folder empty
- spec.model             a model value naming neither a path nor a hub repo; a hub id the bank cannot count (not in the
                         model table nor the hub cache: models.params.unknown_model, as spec / plan refuse it); a family cosmos-rl cannot train;
                         evaluate: a checkpoint whose model_type is not the family evaluation.prompt_family names (warning)
- spec.recipe            evaluate: a vision / prompt setting that differs from the model's skillbank_recipe.json;
                         rl: custom.vision / a set custom.system_prompt that differs from the start model's (warnings)
- annotations.format     not a JSON array / malformed JSON (line and column)
- annotations.record     an element that is not an object
- annotations.unique_id  missing, invalid or repeated ids
- annotations.conversations  human then gpt turns, alternating, non-empty text, ending with gpt
- annotations.media_key  exactly one of video / image, a non-empty path
- annotations.video_fps  video records: a positive finite number
- annotations.mixed_media    video and image records in one dataset (the packer asserts)
- annotations.media_exists   media file missing under the media folder (or the folder missing)
- annotations.media_escape   media path leaving the media folder ('..', absolute elsewhere)
- annotations.overlap    train record sharing an id, or media and question, with val (warning)
- annotations.empty      a dataset with no records
- vision.budget          vision + text tokens over policy.model_max_length; nframes > clip frames
- env.redis              redis-server on PATH (cosmos-rl backend)
- env.vllm               rl with cosmos-rl: vllm importable in the job's Python (the GRPO rollout workers import it)
- env.hf_token           the credentials a hub model's entry of the model table names (HF_TOKEN for a gated one), when it
                         is not in the hub cache yet; by name, never printed
- env.upload             train.ckpt.upload_s3 without AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, upload_hf without a
                         token, "wandb" in logging.logger without the package (warnings: the run goes on)
- env.model              a model path that is no model folder here (no network)
- env.gpus               cosmos-rl: `nvidia-smi -L` (and CUDA_VISIBLE_DEVICES) show dp_shard*tp*cp*pp GPUs
- env.disk               free disk at the output folder for the checkpoints kept (LoRA, max_keep, steps) or outputs
- media.decode           --decode-sample K|all: videos PyAV cannot decode; video_fps vs the file (stats["decode"]: lengths, frames sampled)
- cache.stale            example caches built with other vision settings (see cache_checks)

Findings of one check on one file are capped at 20, with one line counting the rest.
"""
