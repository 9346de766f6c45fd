"""Checkpoint uploads (train.ckpt.upload_s3 / upload_hf) with cosmos-rl's semantics, for the local backend.

cosmos-rl 0.4.7 uploads from its trainer: S3 "final" sends the last checkpoint and export, "all"
every one; the Hub gets the final safetensors export as `<token's user>/<hf_repo_name>-<timestamp>`.
The local backend does the same: rank 0 sends S3 uploads after each save (before pruning), and the
launcher sends the Hub upload after the run (its ranks run with HF_HUB_OFFLINE=1). Both backends put
a run's files under `<s3_prefix>/<run timestamp>/` (the TOML's s3_prefix carries the timestamp), so
two runs never overwrite each other.

An upload never touches the local files, and a failed one never stops training: it is logged,
recorded as a row of <run>/uploads.jsonl (what `skillbank train` reports and the job record keeps),
and the run goes on. Credentials are read by their names from the environment by boto3 and
huggingface_hub themselves (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, optional
AWS_ENDPOINT_URL; HF_TOKEN with write access); they are never printed, and every error message is
redacted before it is shown or stored.

Light at import: boto3 and huggingface_hub are imported by the functions that use them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from skillbank.redaction import redact
from skillbank.runs import layout

UPLOADS_FILE = "uploads.jsonl"
S3_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
HF_CREDENTIALS = ("HF_TOKEN",)


# --- where things go (one rule for both backends) ------------------------------------------------


def s3_run_prefix(s3_prefix: str, run_id: str) -> str:
    """The key prefix of one run: <s3_prefix>/<run timestamp> (cosmos-rl gets it as its s3_prefix)."""
    return "/".join(p for p in (s3_prefix.strip("/"), run_id) if p)


def hf_repo_id(user: str, repo_name: str, run_id: str) -> str:
    """cosmos-rl's Hub repository of a run: <user>/<hf_repo_name>-<timestamp>."""
    return f"{user}/{repo_name}-{run_id}"


def wanted_s3(mode: bool | str, *, final: bool) -> bool:
    """upload_s3 "all" sends every save, "final" only the last one, false none."""
    return mode == "all" or (mode == "final" and final)


def missing_credentials(names: tuple[str, ...]) -> list[str]:
    """Names of required variables that are unset (their values are never read here)."""
    return [n for n in names if not os.environ.get(n)]


# --- the record ----------------------------------------------------------------------------------


@dataclass
class Upload:
    """One upload attempt: a row of uploads.jsonl."""

    target: str  # "s3" | "hf"
    what: str  # "safetensors" | "checkpoint"
    step: int
    source: str
    destination: str
    status: str = "pending"  # "uploaded" | "failed"
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    error: str | None = None

    def row(self) -> dict[str, Any]:
        return {**asdict(self), "time": time.time()}


def record(run_dir: str | os.PathLike[str], upload: Upload) -> None:
    """Append one row (an append-only log: the last row of a (target, what, step) is its outcome)."""
    with open(Path(run_dir) / UPLOADS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(redact(upload.row())) + "\n")


def read_uploads(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    path = Path(run_dir) / UPLOADS_FILE
    rows: list[dict[str, Any]] = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
    return rows


def failed_uploads(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The uploads whose last attempt failed."""
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in read_uploads(run_dir):
        last[(row.get("target"), row.get("what"), row.get("step"))] = row
    return [r for r in last.values() if r.get("status") == "failed"]


# --- S3 ------------------------------------------------------------------------------------------


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".step_"))


def s3_client():
    """boto3's client from the environment (AWS_* by name; botocore honours AWS_ENDPOINT_URL, and
    AWS_MAX_ATTEMPTS over our 5 tries per request)."""
    import boto3
    from botocore.config import Config

    attempts = int(os.environ.get("AWS_MAX_ATTEMPTS") or 5)
    return boto3.client("s3", config=Config(retries={"max_attempts": attempts, "mode": "standard"}))


def _ensure_bucket(client, bucket: str) -> None:
    """As cosmos-rl does: create the bucket when it does not exist."""
    from botocore.exceptions import ClientError

    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) not in ("404", "NoSuchBucket", "NotFound"):
            raise
        region = client.meta.region_name
        if region and region != "us-east-1":
            client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
        else:
            client.create_bucket(Bucket=bucket)


def upload_folder_s3(folder: str | os.PathLike[str], bucket: str, prefix: str, *, client=None) -> tuple[int, int]:
    """Every file of `folder` to s3://bucket/prefix/<relative path>. Returns (files, bytes)."""
    folder = Path(folder)
    client = client or s3_client()
    _ensure_bucket(client, bucket)
    files = _files(folder)
    total = 0
    for path in files:
        key = f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}"
        client.upload_file(str(path), bucket, key)
        total += path.stat().st_size
    return len(files), total


# --- Hugging Face Hub ------------------------------------------------------------------------------


def hf_api():
    """The Hub client (HF_TOKEN from the environment). Tests replace this: the hub cannot be reached here."""
    from huggingface_hub import HfApi

    return HfApi()


def upload_folder_hf(folder: str | os.PathLike[str], repo_name: str, run_id: str, *, api=None) -> str:
    """The export folder to <user>/<repo_name>-<run_id> (created private when missing). Returns the repo id."""
    api = api or hf_api()
    repo_id = hf_repo_id(api.whoami()["name"], repo_name, run_id)
    api.create_repo(repo_id, private=True, exist_ok=True)
    api.upload_folder(folder_path=str(folder), repo_id=repo_id, path_in_repo=".", commit_message=f"skillbank: upload {Path(folder).name}")
    return repo_id


# --- the hooks the backends call ------------------------------------------------------------------


def _attempt(run_dir: Path, upload: Upload, send: Callable[[], tuple[int, int]], log: Callable[[str], None]) -> Upload:
    started = time.perf_counter()
    try:
        upload.files, upload.bytes = send()
        upload.status = "uploaded"
        log(f"Uploaded {upload.what} step {upload.step} to {upload.destination} ({upload.files} files, {upload.bytes} bytes)")
    except Exception as exc:  # an upload must never end the run or lose the checkpoint
        upload.status = "failed"
        upload.error = redact(f"{type(exc).__name__}: {exc}")
        log(f"WARNING: upload of {upload.what} step {upload.step} to {upload.destination} failed: {upload.error}; "
            f"the local copy {upload.source} is kept")
    upload.seconds = round(time.perf_counter() - started, 3)
    record(run_dir, upload)
    return upload


def after_save(spec, run_dir: str | os.PathLike[str], step: int, *, final: bool, log: Callable[[str], None] = print, client=None) -> list[Upload]:
    """S3 uploads of one save (rank 0, after the checkpoint and its export are complete, before pruning)."""
    ckpt = spec.train.ckpt
    if not ckpt.upload_s3 or not wanted_s3(ckpt.upload_s3, final=final):
        return []
    run_dir = Path(run_dir)
    prefix = s3_run_prefix(ckpt.s3_prefix, run_dir.name)
    done: list[Upload] = []
    folders = [("checkpoint", layout.checkpoint_dir(run_dir, step), f"checkpoints/step_{step}/policy"),
               ("safetensors", layout.safetensors_dir(run_dir, step), f"safetensors/step_{step}")]
    for what, folder, rel in folders:
        if not folder.is_dir():
            continue
        key = f"{prefix}/{rel}"
        upload = Upload("s3", what, step, str(folder), f"s3://{ckpt.s3_bucket}/{key}")

        def send(folder: Path = folder, key: str = key) -> tuple[int, int]:
            nonlocal client
            client = client or s3_client()
            return upload_folder_s3(folder, ckpt.s3_bucket, key, client=client)

        done.append(_attempt(run_dir, upload, send, log))
    return done


def after_run(spec, run_dir: str | os.PathLike[str], *, log: Callable[[str], None] = print, api=None) -> list[Upload]:
    """The Hub upload of the final export (the launcher, after the ranks have finished)."""
    ckpt = spec.train.ckpt
    if not ckpt.upload_hf:
        return []
    run_dir = Path(run_dir)
    steps = layout.list_safetensors_steps(run_dir)
    if not steps:
        upload = Upload("hf", "safetensors", 0, "", f"hf://<user>/{ckpt.hf_repo_name}-{run_dir.name}", status="failed",
                        error=f"no safetensors export under {run_dir / 'safetensors'}")
        log(f"WARNING: upload_hf: {upload.error}")
        record(run_dir, upload)
        return [upload]
    folder = layout.safetensors_dir(run_dir, steps[-1])
    upload = Upload("hf", "safetensors", steps[-1], str(folder), f"hf://<user>/{ckpt.hf_repo_name}-{run_dir.name}")

    def send() -> tuple[int, int]:
        repo_id = upload_folder_hf(folder, ckpt.hf_repo_name, run_dir.name, api=api)
        upload.destination = f"https://huggingface.co/{repo_id}"
        files = _files(folder)
        return len(files), sum(p.stat().st_size for p in files)

    return [_attempt(run_dir, upload, send, log)]


def credential_notes(spec) -> list[str]:
    """What the uploads will need, by variable name (for the plan and the log; values never read)."""
    ckpt = spec.train.ckpt
    notes = []
    if ckpt.upload_s3:
        missing = missing_credentials(S3_CREDENTIALS)
        where = f"s3://{ckpt.s3_bucket}/{s3_run_prefix(ckpt.s3_prefix, '<run timestamp>')}/"
        notes.append(f"upload_s3 {ckpt.upload_s3!r} -> {where}" + (f" (unset: {', '.join(missing)}; the upload will fail, the run goes on)" if missing else ""))
    if ckpt.upload_hf:
        missing = missing_credentials(HF_CREDENTIALS)
        notes.append(f"upload_hf -> <HF_TOKEN's user>/{ckpt.hf_repo_name}-<run timestamp> after the run"
                     + (" (HF_TOKEN unset: the upload will fail, the run goes on)" if missing else ""))
    return notes
