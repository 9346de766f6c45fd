"""What an export source folder is: a LoRA adapter, a Hugging Face folder, a checkpoint step, or a run.

    <run>/checkpoints/step_N[/policy]   -> <run>/safetensors/step_N when that export exists, else the
                                           rank shards themselves (local backend only)
    <run>/safetensors/step_N            -> a Hugging Face folder
    <run>                               -> its newest safetensors/step_N
    a folder with adapter_config.json   -> a LoRA adapter (merged into base_model_path)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from skillbank.errors import InputError
from skillbank.modelref import is_adapter

Kind = Literal["lora-adapter", "hf-folder", "checkpoint-shards"]
STEP = re.compile(r"^step_(\d+)$")


@dataclass
class Source:
    kind: Kind
    path: Path  # the folder to read
    given: Path
    step: int | None = None
    run_dir: Path | None = None
    notes: list[str] = field(default_factory=list)


def is_hf_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin")))


def _classify_folder(folder: Path, given: Path) -> Source | None:
    if is_adapter(folder):
        return Source("lora-adapter", folder, given)
    if is_hf_folder(folder):
        return Source("hf-folder", folder, given)
    return None


def resolve(source: str) -> Source:
    if not source:
        raise InputError("no source given", where="source", fix="set source (or --source) to a checkpoint step, safetensors/step_N, a run folder or a LoRA adapter folder")
    given = Path(source).expanduser().resolve()
    if not given.is_dir():
        raise InputError(f"source folder not found: {given}", where="source", fix="pass an existing folder")
    direct = _classify_folder(given, given)
    if direct is not None:
        if STEP.match(given.name) and given.parent.name == "safetensors":
            direct.step, direct.run_dir = int(STEP.match(given.name).group(1)), given.parent.parent  # type: ignore[union-attr]
        return direct
    checkpoint = _checkpoint_step(given)
    if checkpoint is not None:
        return _from_checkpoint(given, *checkpoint)
    if (given / "safetensors").is_dir() or (given / "checkpoints").is_dir():
        return _from_run(given)
    raise InputError(
        f"{given} is not a model, adapter, checkpoint step or run folder",
        where="source",
        fix="pass <run>/safetensors/step_N, <run>/checkpoints/step_N, a run folder, or a folder with adapter_config.json",
    )


def _checkpoint_step(folder: Path) -> tuple[Path, int] | None:
    """(<run>, N) for <run>/checkpoints/step_N or <run>/checkpoints/step_N/policy."""
    step_dir = folder.parent if folder.name == "policy" else folder
    m = STEP.match(step_dir.name)
    if m and step_dir.parent.name == "checkpoints":
        return step_dir.parent.parent, int(m.group(1))
    return None


def _from_checkpoint(given: Path, run_dir: Path, step: int) -> Source:
    from skillbank.runs import layout

    export = layout.safetensors_dir(run_dir, step)
    found = _classify_folder(export, given) if export.is_dir() else None
    if found is not None:
        found.step, found.run_dir = step, run_dir
        found.notes.append(f"checkpoint step_{step}: using its Hugging Face export {export}")
        return found
    policy = layout.checkpoint_dir(run_dir, step)
    if not layout.is_complete(policy):
        raise InputError(
            f"checkpoint step_{step} is incomplete (cosmos_config or a .rank_R_complete marker is missing) and has no export",
            where=str(policy),
            fix="pick a complete step (skillbank training writes the markers last), or a safetensors/step_N folder",
        )
    return Source("checkpoint-shards", policy, given, step=step, run_dir=run_dir, notes=[f"checkpoint step_{step}: no safetensors/step_{step}; gathering the rank shards"])


def _from_run(run_dir: Path) -> Source:
    from skillbank.runs import layout

    steps = layout.list_safetensors_steps(run_dir)
    if steps:
        folder = layout.safetensors_dir(run_dir, steps[-1])
        found = _classify_folder(folder, run_dir)
        if found is not None:
            found.step, found.run_dir = steps[-1], run_dir
            found.notes.append(f"run folder: using its newest export safetensors/step_{steps[-1]} (pass a step folder to choose another)")
            return found
    policy = layout.newest_complete_checkpoint(run_dir)
    if policy is not None:
        return _from_checkpoint(run_dir, run_dir, layout.step_of(policy))
    raise InputError(f"run folder {run_dir} has no safetensors export and no complete checkpoint", where="source", fix="pass a folder that holds a model")
