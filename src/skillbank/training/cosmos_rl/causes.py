"""The known ways a training run dies, each with its cause and its fix: one table for the live log
watcher (which ends a run on a fatal one) and `skillbank jobs diagnose` (which names them afterwards).

Each pattern is the text the failing library writes, read from its source where it is installed:
cosmos-rl 0.4.7 (policy/model/*/__init__.py's vision assert, dispatcher/controller.py's redis start,
utils/pynccl.py's watchdog), torch (OutOfMemoryError, ProcessGroupNCCL's watchdog, the stream writer
of torch.save), transformers (the Qwen-VL "features and video tokens do not match" check) and
huggingface_hub (utils/_http.py: 401/403 Client Error, GatedRepoError). A cosmos-rl process that
exits non-zero says only that it failed; these lines say why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from skillbank.specification.overrides import get_dotted


@dataclass(frozen=True)
class KnownCause:
    name: str
    pattern: re.Pattern[str]
    cause: str
    fix: str
    fatal: bool = True  # the live watcher fails the run on sight of the line (else only when it ends a traceback)
    detail: Callable[[str, Mapping[str, Any]], str] | None = None  # numbers from the line and the run's config


@dataclass(frozen=True)
class Found:
    """A known cause seen in a log: the line that shows it (secrets masked by the caller)."""

    name: str
    cause: str
    fix: str
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _vision_numbers(line: str, config: Mapping[str, Any]) -> str:
    """cosmos-rl: "vision_embeds.shape[0] must be equal to n_tokens, 9216 != 8192" (encoder output !=
    video pad tokens left in the cut sequence); transformers: "tokens: 8192, features 9216"."""
    m = re.search(r"(\d+)\s*!=\s*(\d+)", line)
    features, kept = (m[1], m[2]) if m else (None, None)
    if not m and (t := re.search(r"tokens: (\d+), features (\d+)", line)):
        kept, features = t[1], t[2]
    length = get_dotted(config, "policy.model_max_length")
    said = f"a clip gives {int(features):,} vision tokens but only {int(kept):,} were left in the sequence" if features else ""
    limit = f"policy.model_max_length is {int(length):,} in this run" if isinstance(length, int) else ""
    return "; ".join(s for s in (said, limit) if s)


def _oom_numbers(line: str, config: Mapping[str, Any]) -> str:
    m = re.search(r"Tried to allocate ([0-9.]+ [GMK]i?B)", line)
    cap = re.search(r"total capacity of ([0-9.]+ [GMK]i?B)", line)
    mini = get_dotted(config, "train.train_policy.mini_batch")
    parts = [f"it tried to allocate {m[1]}" if m else "", f"of a {cap[1]} GPU" if cap else "",
             f"train.train_policy.mini_batch is {mini}" if mini is not None else ""]
    return ", ".join(p for p in parts if p)


VISION = KnownCause(
    "vision_tokens",
    re.compile(r"vision_embeds.*must be equal to n_tokens|features and (?:image|video) tokens do not match"),
    "vision tokens were cut at policy.model_max_length: a sample (video tokens + text) is longer than the sequence, the "
    "truncation drops video tokens and the vision embeddings no longer line up with them",
    "raise policy.model_max_length above the longest sample (`skillbank preflight` / `skillbank plan` report "
    "tokens_per_sample.max), or lower custom.vision.total_pixels / fps / nframes so every sample fits",
    detail=_vision_numbers,
)
OOM = KnownCause(
    "cuda_oom",
    re.compile(r"torch\.(?:cuda\.)?OutOfMemoryError|CUDA out of memory|CUDA error: out of memory"),
    "CUDA out of memory: the job needs more GPU memory than a GPU has",
    "lower train.train_policy.mini_batch (1), enable policy.model_gradient_checkpointing or policy.lora, lower the tokens per "
    "sample (custom.vision.total_pixels / fps), or spread the model over more GPUs; `skillbank plan --spec SPEC` shows each part",
    detail=_oom_numbers,
)
CAUSES: tuple[KnownCause, ...] = (
    KnownCause(
        "zero_steps",
        re.compile(r"'NoneType' object has no attribute 'state_dict'"),
        "zero training steps: fewer records per data-parallel rank than train.train_batch_per_replica "
        "(validation without a val set also takes 10% of train)",
        "lower train.train_batch_per_replica (`skillbank spec` fits a batch you did not set), add records, or use fewer ranks",
    ),
    VISION,
    KnownCause(
        "video_fps",
        re.compile(r"KeyError: ['\"]video_fps['\"]"),
        "a record has no video_fps: the dataset script reads every video record's frame rate",
        "`skillbank data fix ANNOTATIONS --out FIXED` writes video_fps (and duration) from the clips' headers; "
        "`skillbank preflight` lists every record without it",
    ),
    KnownCause(
        "redis_missing",
        re.compile(r"redis-server: (?:command )?not found|No such file or directory: '?redis-server|"
                   r"Failed to start redis server with command: .* return code 127"),
        "redis-server is not on PATH: cosmos-rl's controller starts it and exits when it cannot",
        "install redis on the training node (apt-get install redis-server, or conda install -c conda-forge redis) so "
        "redis-server is on PATH; `skillbank preflight` checks it (env.redis)",
    ),
    KnownCause(
        "hf_auth",
        re.compile(r"\b(?:401|403) Client Error|GatedRepoError|Cannot access gated repo|\b403 Forbidden|"
                   r"Invalid credentials in Authorization header|Invalid user token"),
        "the Hugging Face hub refused the model (HTTP 401/403): HF_TOKEN is missing or invalid on the node, or its "
        "account has not accepted the gated model's terms",
        "export HF_TOKEN on the node (a read token whose account accepted the license on the model's hub page), or point "
        "policy.model_name_or_path at a local copy of the weights",
        fatal=False,
    ),
    KnownCause(
        "disk_full",
        re.compile(r"No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]|PytorchStreamWriter failed writing file"),
        "the disk (or quota) filled up while writing: usually a checkpoint or its safetensors export",
        "free space under train.output_dir or lower train.ckpt.max_keep (`skillbank plan` gives disk_gib: the checkpoints "
        "kept at once), or write to a larger filesystem",
        fatal=False,
    ),
    OOM,
    KnownCause(
        "no_gpu",
        re.compile(r"No GPUs available"),
        "no GPU visible to cosmos-rl (nvidia-smi found none)",
        "run on a node with NVIDIA GPUs and a working nvidia-smi (skillbank submit --platform slurm|docker)",
    ),
    KnownCause(  # last: a timeout on the other ranks often follows a rank that died of one of the above
        "nccl_timeout",
        re.compile(r"Watchdog caught collective operation timeout|NCCL block exceeded \d+ ms|ran for \d+ milliseconds before timing out"),
        "an NCCL collective timed out: a rank stopped answering (it died, hangs, or the network between nodes failed)",
        "look for an earlier error on another rank (it is the cause when there is one); otherwise check the interconnect "
        "(NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME / NCCL_IB_HCA on multi-node jobs) and retry from the last complete checkpoint",
    ),
)
BY_NAME = {c.name: c for c in CAUSES}


def match(line: str) -> KnownCause | None:
    """The known cause a log line shows (the first in table order), or None."""
    return next((c for c in CAUSES if c.pattern.search(line)), None)


def found(cause: KnownCause, line: str, source: str, config: Mapping[str, Any] | None = None) -> Found:
    """The cause as shown for one line: its numbers (from the line and the run's config) after the text."""
    numbers = cause.detail(line, config or {}) if cause.detail else ""
    text = f"{cause.cause} ({numbers})" if numbers else cause.cause
    return Found(cause.name, text, cause.fix, f"{source}: {line.strip()}")


def scan(lines_by_source: Mapping[str, list[str]], config: Mapping[str, Any] | None = None) -> list[Found]:
    """Every known cause the logs show, once each (its first line), in table order: the earlier
    entries are the root causes of the later ones (an OOM on one rank times out NCCL on the others)."""
    first: dict[str, Found] = {}
    for source, lines in lines_by_source.items():
        for line in lines:
            cause = match(line)
            if cause is not None and cause.name not in first:
                first[cause.name] = found(cause, line, source, config)
    order = [c.name for c in CAUSES]
    return sorted(first.values(), key=lambda f: order.index(f.name))
