"""Preflight: every known failure of a launch, caught before it, on every record.

Entry point: `skillbank.preflight.run.run_preflight(...)` -> Report (ok, findings, stats); the
`skillbank preflight` command and scripts/check_tao_launch_preflight.py print it.

Checks (each finding names one; severity error or warning; any error means exit 2):
- spec.schema            the spec models' rules (skillbank.spec), where = the dotted key
- spec.parallelism       dp_shard*tp*cp*pp == --gpus-per-node; dp_replicate == --nodes
- spec.steps_per_rank    train records per data-parallel rank (after cosmos-rl's validation split)
                         >= train_batch_per_replica, else zero steps and a crash
- spec.validation_data   validation.enable with no validation data
- spec.dataset_paths     annotation path empty or missing; media folder empty
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
- env.hf_token           HF_TOKEN for gated models (nvidia/Cosmos-Reason*), by name, never printed
- env.model              model folder / hub id / hf_model:// resolvable (no network)
- env.disk               free disk for checkpoints or outputs
- env.decode             --decode-sample K: videos PyAV cannot decode; video_fps vs the file
- cache.stale            example caches built with other vision settings (see cache_checks)

Findings of one check on one file are capped at 20, with one line counting the rest.
"""
