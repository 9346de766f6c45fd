"""The machine a job launches on: redis-server, GPUs, the model and its credentials, free disk.

These are the env.* checks: they hold only where the job runs, so a plan made on another machine
reports them as "check on the node" (skillbank.preflight.report) and the rendered job runs them
first on the node. What the spec names wrongly wherever it runs (a model reference that names
nothing, a family the backend cannot train) is spec.model instead.

No network call and no heavy import: a model is "resolvable" when it is a local folder with
config.json, an `owner/repo` hub id, or `hf_model://owner/repo` (skillbank.modelref.parse). GPUs are
counted with `nvidia-smi -L` (no torch). Secrets are looked up by name and never printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillbank import modelref
from skillbank.preflight.report import Findings
from skillbank.runs.steps import gib, gib_text  # GiB (the JSON keys *_gb hold GiB, two decimals, as the text prints them)

TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")

Kind = Literal["model", "adapter", "checkpoint"]
MARKERS: dict[str, tuple[str, ...]] = {"model": ("config.json",), "adapter": ("adapter_config.json", "config.json"), "checkpoint": ()}


@dataclass(frozen=True)
class ModelRef:
    key: str  # the spec key naming it
    value: str
    where: Literal["local", "hub", "missing"]
    path: Path | None = None
    repo: str | None = None
    problem: str = ""


def resolve(key: str, value: str, kind: Kind = "model") -> ModelRef:
    """The model a spec key names, judged without the network; a folder must hold `kind`'s marker file
    (a "model" that is a LoRA adapter folder is refused: training, rl and quantize load whole models)."""
    ref = modelref.parse(value)
    if ref.kind == "hub":
        return ModelRef(key, ref.value, "hub", repo=ref.repo)
    if ref.kind == "invalid":
        return ModelRef(key, ref.value, "missing", path=ref.path, problem=ref.problem)
    problem = modelref.folder_problem(ref.path, MARKERS[kind])
    if not problem and kind == "model" and modelref.is_adapter(ref.path):
        problem = (f"is a LoRA adapter ({modelref.ADAPTER_CONFIG}), not a whole model: merge it first "
                   f"(skillbank export --source {ref.path} --out MERGED) and name MERGED")
    if not problem and kind == "model" and ref.path is not None:
        from skillbank.models.params import safetensors_problems

        cut = safetensors_problems(ref.path)
        if cut:
            return ModelRef(key, ref.value, "local", path=ref.path, problem="; ".join(cut))
    return ModelRef(key, ref.value, "missing" if problem else "local", path=ref.path, problem=problem)


def check_models(refs: list[ModelRef], findings: Findings) -> None:
    """A path that is no model folder here is env.model (the node may have it); a value that names
    neither a path nor a hub repo is spec.model (wrong everywhere)."""
    for ref in refs:
        if ref.where == "local" and ref.problem:  # a model folder whose weights are cut short: it would fail at load
            findings.error("env.model", f"{ref.key} {ref.value}: {ref.problem}",
                           "download or copy the model again (huggingface-cli download, or rsync the folder)", ref.key)
        if ref.where == "missing":
            findings.error(
                "env.model" if ref.path is not None else "spec.model",
                f"{ref.key} {ref.value!r} {ref.problem}",
                "use a local Hugging Face folder (with config.json), an owner/repo hub id, or hf_model://owner/repo",
                ref.key,
            )


def patch_size(ref: ModelRef, findings: Findings | None = None) -> int:
    """The model's vision patch size, for the token estimate: its config.json's (a local folder, the hub cache,
    the model table's), else its family's.

    With `findings` (the cosmos-rl backend) a family cosmos-rl cannot train is a spec.model error.
    When neither can be told: Qwen3-VL's 16 (more pixels per token, so fewer tokens: the
    estimate stays a lower bound for errors; 14 would overstate them)."""
    from skillbank.errors import InputError
    from skillbank.models.params import find_config
    from skillbank.models.table import vision_of

    config = find_config(ref.value) if ref.where != "missing" else None
    vision = vision_of(config.data) if config is not None else None
    try:
        from skillbank.training.cosmos_rl.family import family_of
    except ImportError:  # pragma: no cover - the backend module is optional here
        return vision.patch_size if vision else 16
    try:
        family = family_of(ref.value)
    except InputError as exc:
        if findings is not None and ref.where != "missing":
            findings.error("spec.model", exc.message, exc.fix, ref.key)
        return vision.patch_size if vision else 16
    return vision.patch_size if vision else family.patch_size


def check_hf_token(refs: list[ModelRef], findings: Findings) -> None:
    """The credentials each hub model's entry of the model table (skillbank.models.table) names, when its weights
    are not in the local cache yet: a gated model without HF_TOKEN loops on authentication at download."""
    from skillbank.models import table

    for ref in refs:
        entry = table.get(ref.repo) if ref.where == "hub" and ref.repo else None
        if entry is None or not entry.credentials or _cached(ref.repo):
            continue
        missing = [c for c in entry.credentials if not (_have_token() if c in TOKEN_VARS else os.environ.get(c))]
        if not missing:
            continue
        if entry.gated:
            message = (f"{ref.key} {ref.repo} is a gated model and {' and '.join(missing)} is not set (the model table: "
                       f"{table.entry_file(entry.id).name}); the download would loop on authentication")
        else:
            message = f"{ref.key} {ref.repo} needs {' and '.join(missing)} to download (the model table: {table.entry_file(entry.id).name})"
        findings.error(
            "env.hf_token",
            message,
            "export HF_TOKEN (a token whose account accepted the model's license), or `huggingface-cli login`, or point at a local copy"
            if any(c in TOKEN_VARS for c in missing) else f"export {' and '.join(missing)}",
            ref.key,
        )


def check_uploads(spec, findings: Findings) -> None:
    """train.ckpt.upload_s3 / upload_hf and a wandb logger: what the run needs, by name only. Warnings:
    a failed upload never stops training (skillbank.training.upload), and boto3 may find a profile."""
    import importlib.util

    from skillbank.training import upload

    ckpt = spec.train.ckpt
    missing = upload.missing_credentials(upload.S3_CREDENTIALS) if ckpt.upload_s3 else []
    if missing:
        findings.warning(
            "env.upload",
            f"train.ckpt.upload_s3 is {ckpt.upload_s3!r} but {' and '.join(missing)} is not set: unless an AWS profile or "
            "instance role provides credentials, the S3 uploads will fail (training goes on, the local files are kept)",
            "export AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_DEFAULT_REGION (AWS_ENDPOINT_URL for S3-compatible stores), or set upload_s3 false",
            "train.ckpt.upload_s3",
        )
    if ckpt.upload_hf and not _have_token():
        findings.warning(
            "env.upload",
            "train.ckpt.upload_hf is true but no Hugging Face token is set: the final upload will fail (the local export is kept)",
            "export HF_TOKEN (a token with write access), or set upload_hf false",
            "train.ckpt.upload_hf",
        )
    if "wandb" in spec.logging.logger and importlib.util.find_spec("wandb") is None:
        findings.warning("env.upload", 'logging.logger has "wandb" but the wandb package is not installed: curves go to TensorBoard only',
                         "pip install wandb (or skillbank[wandb]), or drop wandb from logging.logger", "logging.logger")


def _have_token() -> bool:
    if any(os.environ.get(name) for name in TOKEN_VARS):
        return True
    candidates = [os.environ.get("HF_TOKEN_PATH"), os.path.join(_hf_home(), "token")]
    return any(c and os.path.isfile(c) and os.path.getsize(c) > 0 for c in candidates)


def _hf_home() -> str:
    return os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")


def _cached(repo: str) -> bool:
    """Whether a snapshot of the repo is already in the local hub cache (no download, no token)."""
    return modelref.cached_file(repo, "config.json") is not None


def check_redis(backend: str | None, findings: Findings) -> None:
    if backend == "local" or (shutil.which("redis-server") and findings.runs_on != "node"):
        return
    if findings.runs_on == "node":
        if backend == "cosmos-rl":
            findings.add("env.redis", "node", "the job needs redis-server on the node's PATH (cosmos-rl's controller starts it and exits 127 without it)",
                         "the job's first step checks it on the node", "PATH")
        return
    message = "redis-server is not on PATH; cosmos-rl's controller starts it and exits 127 without it"
    fix = "install redis (apt-get install redis-server, or conda install -c conda-forge redis) and put redis-server on PATH"
    if backend == "cosmos-rl":
        findings.error("env.redis", message, fix, "PATH")
    else:
        findings.warning("env.redis", message + " (needed for --backend cosmos-rl)", fix, "PATH")


VLLM_FIX = ("install the GPU stack, which pins vllm (bash scripts/setup.sh --gpu, requirements-gpu.txt), or run the job in "
            "skillbank's image (Dockerfile; skillbank submit --platform docker|slurm --image ...)")


def check_vllm(findings: Findings) -> None:
    """cosmos-rl's GRPO rollout workers run `import vllm` in the job's Python: without it they die
    after the policy has loaded. Found by spec, not imported (importing vllm takes seconds and a GPU)."""
    import importlib.util
    import sys

    if importlib.util.find_spec("vllm") is None:
        findings.error("env.vllm", f"vllm is not importable by {sys.executable}: cosmos-rl's GRPO rollout workers import it, "
                       "and the job would fail when the rollouts start", VLLM_FIX, "rollout.backend")


# ---- GPUs ------------------------------------------------------------------------------------------


def visible_gpus() -> tuple[int, str]:
    """(GPUs this process can use, how that was found): `nvidia-smi -L`, narrowed by CUDA_VISIBLE_DEVICES."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0, "nvidia-smi is not on PATH"
    try:
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 0, f"`nvidia-smi -L` failed: {exc}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return 0, f"`nvidia-smi -L` failed (exit {proc.returncode}) {tail[0]}".rstrip()
    count = sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))
    how = f"`nvidia-smi -L` lists {count}"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = []
        for item in visible.split(","):  # CUDA stops at the first invalid entry; -1 hides every GPU
            if not item.strip() or item.strip().startswith("-"):
                break
            ids.append(item)
        count = min(count, len(ids))
        how += f", CUDA_VISIBLE_DEVICES={visible!r}"
    return count, how


def check_gpus(need: int, findings: Findings) -> dict[str, int]:
    """The cosmos-rl backend: one replica needs `need` GPUs (dp_shard*tp*cp*pp) on every node. For a job that runs
    elsewhere this machine's GPUs say nothing: the finding names what the node needs (its first step counts them)."""
    if findings.runs_on == "node":
        findings.add("env.gpus", "node", f"the job needs {need} GPU(s) per node (policy.parallelism dp_shard_size*tp_size*cp_size*pp_size)",
                     "the job's first step counts the node's GPUs (nvidia-smi) and stops the job when they are fewer", "policy.parallelism.dp_shard_size")
        return {"need": need}
    count, how = visible_gpus()
    if count < need:
        findings.error(
            "env.gpus",
            f"the job needs {need} GPU(s) per node (policy.parallelism dp_shard_size*tp_size*cp_size*pp_size) but {count} are visible here ({how})",
            "run it on a node with that many NVIDIA GPUs (skillbank submit --platform slurm|docker), or lower policy.parallelism.dp_shard_size",
            "policy.parallelism.dp_shard_size",
        )
    return {"visible": count, "need": need}


# ---- disk ------------------------------------------------------------------------------------------


def model_count(ref: ModelRef, findings: Findings) -> Any:
    """The model's parameters (skillbank.models.params.lookup, the one counter: no torch here), or None: a path
    not on this machine (env.model says so), or a hub id the bank cannot count, reported as spec.model with the
    refusal spec, plan and the AutoML dry run give (models.params.unknown_model)."""
    from skillbank.errors import InputError
    from skillbank.models.params import lookup

    if ref.where == "missing" and ref.path is None:
        return None  # a value that names nothing: check_models reported it
    try:
        return lookup(ref.value, ref.key)
    except InputError as exc:
        findings.error("spec.model", exc.message, exc.fix, exc.where or ref.key)
        return None


def check_parallel(spec: Any, ref: ModelRef, findings: Findings) -> None:
    """tp_size / cp_size against the heads cosmos-rl shards (training.cosmos_rl.family.parallel_check), whatever
    the backend: cosmos-rl asserts it only after launch; plan refuses the same spec with the same words."""
    from skillbank.models.params import find_config
    from skillbank.training.cosmos_rl.family import parallel_check

    config = find_config(ref.value) if ref.where != "missing" else None
    par = spec.policy.parallelism
    problem = parallel_check(ref.value, config.data, par.tp_size, getattr(par, "cp_size", 1)) if config is not None else None
    if problem:
        message, fix, key = problem
        findings.error("spec.parallelism", message, fix, key)


def nearest_existing(path: str) -> Path:
    p = Path(path).expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_disk(key: str, output_dir: str, need_one: float, need_all: float, what: str, findings: Findings) -> dict[str, float]:
    """Free space at the output folder against the checkpoints the run keeps. For a job that runs elsewhere
    (runs_on "node") this machine's disk says nothing: the finding names what the node needs, measured there
    by the job's first step."""
    if findings.runs_on == "node":
        findings.add("env.disk", "node", f"needs {gib_text(need_all)} free at {output_dir or '.'} where the job runs "
                     f"(at least {gib_text(need_one)} for one checkpoint); {what}",
                     "the job's first step measures the node's disk and stops the job when it is short", key)
        return {"need_gb": gib(need_all), "measured": "on the node"}  # type: ignore[dict-item]
    folder = nearest_existing(output_dir or ".")
    free = shutil.disk_usage(folder).free
    stats = {"free_gb": gib(free), "need_gb": gib(need_all)}
    detail = f"{gib_text(free)} free at {folder}; {what}"
    if free < need_one:
        what_fits = "this worker's share of the study's checkpoints" if need_one == need_all else "one checkpoint"  # a study needs them all: the gate must not pass a disk it fills
        findings.error("env.disk", f"not enough disk for {what_fits}: {detail}", f"free space or point {key} at a larger disk"
                       + (" (a study: --keep best, fewer trials at once (--workers), a narrower train.epoch or policy.lora.r range)" if need_one == need_all else ""), key)
    elif free < need_all:
        findings.warning("env.disk", f"not enough disk for every kept checkpoint: {detail}", f"free space, lower train.ckpt.max_keep, or point {key} at a larger disk", key)
    return stats


# ---- a job's paths -------------------------------------------------------------------------------

OUTPUT_KEYS = ("train.output_dir", "results_dir")  # folders the run creates: their parent must be there


def check_job_paths(spec: Any, findings: Findings) -> list[str]:
    """A submitted job's first step (it runs inside its job folder: runs.node.current_job): every absolute
    path the spec names must exist where the job runs (an output folder: it or its parent), else env.paths
    names it, so a moved site never recreates the old site's folders. Relative paths start at the job's
    work directory (the site it moved with). Returns the keys checked."""
    from skillbank.runs.node import current_job
    from skillbank.specification.overrides import get_dotted
    from skillbank.specification.pathmap import path_keys

    if findings.runs_on != "here" or current_job() is None:
        return []
    data = spec.model_dump(mode="json")
    checked = []
    for key, is_model in path_keys(type(spec)):
        value = get_dotted(data, key)
        if not isinstance(value, str) or not value.startswith("/"):
            continue
        path = Path(value)
        here = path.exists() or (key in OUTPUT_KEYS and path.parent.exists())
        checked.append(key)
        if not here:
            what = "its parent folder is missing too" if key in OUTPUT_KEYS else "it does not exist"
            findings.error("env.paths", f"{key} {value}: {what} where the job runs (an absolute path from where the spec was written?)",
                           "fix the path in the spec (a relative path starts at the job's work directory: slurm.md, \"Relative paths: the rule\"), "
                           "or create the folder / copy the data there; the job never creates a missing absolute path", key)
    return checked
