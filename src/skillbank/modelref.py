"""Model references, read one way everywhere: a local Hugging Face folder, `hf_model://owner/repo`,
or a bare `owner/repo` hub id.

Every spec key and flag that names a model means one of these three; what happens next is the
caller's policy: which files a folder must hold, whether a hub id is downloaded now, later or by
cosmos-rl, and whether the network may be touched at all (preflight and dry runs never). Nothing
heavy is imported here, since agent-facing commands parse references; huggingface_hub is imported
only when a download happens.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillbank.errors import InputError, RunError
from skillbank.redaction import redact

HF_SCHEME = "hf_model://"
# owner/repo as the hub spells it: each part starts alphanumeric and is at most 96 characters.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
PATH_PREFIXES = ("/", ".", "~")  # a value starting with one of these names a path, never a hub id


@dataclass(frozen=True)
class Ref:
    value: str  # as written (stripped)
    kind: Literal["local", "hub", "invalid"]
    path: Path | None = None  # local: the existing path; invalid: the missing path it names, if it names one
    repo: str | None = None  # hub: owner/repo
    problem: str = ""  # invalid: what is wrong, a phrase that follows the value


def parse(value: str, *, base: Path | None = None) -> Ref:
    """What `value` names, without the network; relative paths are relative to `base` (default: the
    working directory). An existing path wins over a hub id of the same spelling."""
    value = (value or "").strip()
    if not value:
        return Ref(value, "invalid", problem="is empty")
    if value.startswith(HF_SCHEME):
        repo = value[len(HF_SCHEME) :].strip("/")
        if HUB_ID.match(repo):
            return Ref(value, "hub", repo=repo)
        return Ref(value, "invalid", problem=f"names no valid hub repo after {HF_SCHEME} (expected owner/repo)")
    path = Path(value).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if path.exists():
        return Ref(value, "local", path=path)
    if HUB_ID.match(value):
        return Ref(value, "hub", repo=value)
    named = path if value.startswith(PATH_PREFIXES) else None
    return Ref(value, "invalid", path=named, problem="does not exist (not a local folder, and not an owner/repo hub id)")


ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(folder: str | os.PathLike[str]) -> bool:
    """A LoRA adapter folder (adapter_config.json): what cosmos-rl exports for a LoRA run, and the local
    backend too; evaluate and inference load it onto its base model, `skillbank export` merges it."""
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def lora_config(adapter: str | os.PathLike[str]):
    """An adapter folder's peft LoraConfig, read so that cosmos-rl's adapter_config.json loads too: its own
    keys (lora_names, lora_path, primary_adapter) are dropped, r_pattern is peft's rank_pattern, and a null
    is the field's default (peft fails on a null alpha_pattern). Pass it to PeftModel.from_pretrained(config=)."""
    import dataclasses
    import json

    from peft import LoraConfig

    raw = json.loads((Path(adapter) / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    raw = {("rank_pattern" if k == "r_pattern" else k): v for k, v in raw.items()}
    names = {f.name for f in dataclasses.fields(LoraConfig) if f.init}
    return LoraConfig(**{k: v for k, v in raw.items() if k in names and v is not None})


def folder_problem(path: Path, markers: tuple[str, ...] = ("config.json",)) -> str:
    """'' when the existing `path` is a folder holding one of `markers`, else what is wrong with it."""
    if not path.is_dir():
        return "is a file, not a model folder"
    if markers and not any((path / m).is_file() for m in markers):
        return f"is not a model folder (no {' or '.join(markers)})"
    return ""


def local_folder(value: str, *, where: str, markers: tuple[str, ...] = ("config.json",), fetch: bool = True) -> str:
    """The absolute local model folder `value` names; a hub reference is snapshot-downloaded (with
    fetch=False it comes back as its owner/repo id). A bad reference, or a folder without one of
    `markers`, is an InputError naming `where`."""
    ref = parse(value)
    if ref.kind == "invalid":
        raise InputError(f"model not found: {value!r} {ref.problem}", where=where, fix="give a local Hugging Face folder, hf_model://owner/repo or owner/repo")
    if ref.kind == "hub":
        return download(ref.repo, where=where) if fetch else ref.repo
    problem = folder_problem(ref.path, markers)
    if problem:
        raise InputError(f"{ref.path} {problem}", where=where, fix="point at a Hugging Face model folder, e.g. <run>/safetensors/step_N")
    return str(ref.path.resolve())


def download(repo_id: str, *, where: str) -> str:
    """A local snapshot of `repo_id` from the hub cache, downloading what is missing.

    HF_TOKEN is read by name and handed to the hub client, never printed. A gated or missing repo
    is the input's fault (InputError naming `where`, with a fix); a network or disk failure is the
    run's (RunError, secrets masked)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        return snapshot_download(repo_id=repo_id, token=os.environ.get("HF_TOKEN") or None)
    except GatedRepoError:  # a RepositoryNotFoundError too: catch it first
        raise InputError(
            f"{repo_id} is gated", where=where, fix="accept its license on huggingface.co and export HF_TOKEN with access to it"
        ) from None
    except RepositoryNotFoundError:
        raise InputError(f"{repo_id} was not found on the hub", where=where, fix="check the id; a private repo needs HF_TOKEN") from None
    except (HfHubHTTPError, OSError) as exc:
        raise RunError(f"downloading {repo_id} ({where}) failed: {redact(str(exc))}") from None


def hub_cache() -> Path:
    """The local Hugging Face hub cache (HF_HUB_CACHE, else HF_HOME/hub), as huggingface_hub finds it."""
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub"))


def cached_file(repo: str, name: str) -> Path | None:
    """`name` in the newest cached snapshot of `repo` that holds it (no download, no token), or None."""
    snapshots = hub_cache() / ("models--" + repo.replace("/", "--")) / "snapshots"
    try:
        found = [s / name for s in snapshots.iterdir() if (s / name).is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime) if found else None
