"""A model folder's recipe: how the weights in it were trained, in one small file beside them.

An exported Hugging Face folder says nothing about the video sampling, system prompt or answer format
it was trained with, and evaluating it at other settings silently costs accuracy (a model trained at
fps 2 answered 30% at fps 4). So every model folder skillbank writes (the training backends'
`safetensors/step_N`, `skillbank export`, GRPO exports) holds `skillbank_recipe.json`:

    recipe_version       1
    skillbank_version    the skillbank that wrote it
    base_model           the model training started from (policy.model_name_or_path)
    model_type           config.json's model_type (the family: qwen2_5_vl, qwen3_vl, ...)
    vision               {fps, nframes, total_pixels, max_pixels} as trained (one of fps / nframes)
    system_prompt        the system prompt of every training chat
    answer_type          "short" or "reasoning" (<think>...</think> answers)
    task_type            how answers are read ("" general, its_directionality, mcq; RL's custom.task_type)
    chat_template_sha256 sha256 of the folder's chat template (null when it has none)
    steps_trained        optimizer steps of this export (step_N)
    training_data        {annotation_path, media_path, sha256 (skillbank.hashing), records}: what evaluate
                         compares the evaluated clips with (training overlap)

Readers (evaluate, inference, prompt search, DEFT, rl) call `read(model)` and `apply(...)`: a setting
the user set wins, else the recipe's, else the default; a user setting that differs from the
recipe's is a warning. Only light imports here: agents and the log watcher call it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from skillbank import __version__, atomic
from skillbank.hashing import sha256_file

RECIPE_FILE = "skillbank_recipe.json"
RECIPE_VERSION = 1
VISION_KEYS = ("fps", "nframes", "total_pixels", "max_pixels")
_STEP = re.compile(r"^step_(\d+)$")

# The families a reasoning instruction is written for, by config.json model_type prefix.
PROMPT_FAMILIES = ("cosmos-reason1", "cosmos-reason2")


def prompt_family_of(model_type: str) -> str:
    """The reasoning-prompt family a checkpoint's model_type was trained with: Qwen3-VL is Cosmos-Reason2's
    base, every other family (Qwen2.5-VL) Cosmos-Reason1's."""
    return "cosmos-reason2" if model_type.startswith("qwen3") else "cosmos-reason1"


# ---- what a folder holds -------------------------------------------------------------------------


def model_type_of(folder: str | os.PathLike[str] | None) -> str:
    """config.json's model_type of a local folder ("" when there is none)."""
    if not folder:
        return ""
    try:
        return str(json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("model_type") or "")
    except (OSError, ValueError):
        return ""


def chat_template_digest(folder: str | os.PathLike[str] | None) -> str | None:
    """sha256 of the chat template a processor saved in `folder` (chat_template.jinja, chat_template.json
    or tokenizer_config.json's chat_template, in the order transformers reads them); None without one."""
    import hashlib

    if not folder:
        return None
    root = Path(folder)
    text: str | None = None
    if (root / "chat_template.jinja").is_file():
        text = (root / "chat_template.jinja").read_text(encoding="utf-8")
    else:
        for name in ("chat_template.json", "tokenizer_config.json"):
            try:
                value = json.loads((root / name).read_text(encoding="utf-8")).get("chat_template")
            except (OSError, ValueError):
                continue
            if value:
                text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                break
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text else None


@lru_cache(maxsize=16)
def _data_summary(path: str, mtime_ns: int, size: int) -> tuple[str, int, str]:
    """(sha256, records, answer type) of a training annotation file (cached while the file is unchanged)."""
    from skillbank.data import chat

    digest = sha256_file(path)
    try:
        records = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return digest, 0, "short"
    records = records if isinstance(records, list) else []
    reasoning = 0
    for record in records:
        try:
            reasoning += "</think>" in chat.prompt_and_answer(record)[1]
        except Exception:  # a malformed record: the training run reported it already
            continue
    return digest, len(records), "reasoning" if records and reasoning * 2 > len(records) else "short"


def training_data(annotation_path: str | None, media_path: str | None = None) -> dict[str, Any]:
    """{annotation_path, media_path, sha256, records} of the training set (sha256 null when the file is
    not here; media_path: the folder its clips are relative to, null for the annotation file's)."""
    out: dict[str, Any] = {"annotation_path": annotation_path or None, "media_path": media_path or None, "sha256": None, "records": None}
    if annotation_path and Path(annotation_path).is_file():
        st = Path(annotation_path).stat()
        out["sha256"], out["records"], _ = _data_summary(str(Path(annotation_path).resolve()), st.st_mtime_ns, st.st_size)
    return out


def _answer_type_of_data(annotation_path: str | None) -> str:
    if annotation_path and Path(annotation_path).is_file():
        st = Path(annotation_path).stat()
        return _data_summary(str(Path(annotation_path).resolve()), st.st_mtime_ns, st.st_size)[2]
    return "short"


# ---- writing -------------------------------------------------------------------------------------


def answer_type_of(custom: Mapping[str, Any]) -> str:
    """The answer type a run's exports are evaluated with (as from_custom records it): custom.answer_type, else the training data's."""
    return custom.get("answer_type") or _answer_type_of_data((custom.get("train_dataset") or {}).get("annotation_path") or None)


def from_custom(custom: Mapping[str, Any], *, base_model: str, steps: int | None = None,
                model_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The recipe of a training run's export, from its spec's `custom` table (train or rl spec, as in
    spec.json or cosmos_rl.toml). answer_type: custom.answer_type (rl), else "reasoning" when most
    training answers hold </think>, else "short". model_dir: the exported folder (model_type, template)."""
    vision = dict(custom.get("vision") or {})
    data = dict(custom.get("train_dataset") or {})
    annotation = data.get("annotation_path") or None
    return {
        "recipe_version": RECIPE_VERSION,
        "skillbank_version": __version__,
        "base_model": base_model,
        "model_type": model_type_of(model_dir) or str(custom.get("model_family") or "") or model_type_of(base_model),
        "vision": {key: vision.get(key) for key in VISION_KEYS},
        "system_prompt": custom.get("system_prompt"),
        "answer_type": answer_type_of(custom),
        "task_type": custom.get("task_type") or "",
        "chat_template_sha256": chat_template_digest(model_dir) or chat_template_digest(base_model),
        "steps_trained": steps,
        "training_data": training_data(annotation, data.get("media_path")),
    }


def run_spec(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The train / rl spec a run folder keeps (spec.json of the local backend, cosmos_rl.toml of cosmos-rl)."""
    from skillbank.runs import layout

    path = layout.run_spec_file(Path(run_dir))
    if path is None:
        return None
    try:
        from skillbank.specification.io import read_spec_file

        return read_spec_file(path)
    except Exception:  # an unreadable run spec: no recipe rather than a failed reader
        return None


def from_run(run_dir: str | os.PathLike[str], step: int | None = None,
             model_dir: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The recipe of `<run>/safetensors/step_N` from the spec the run folder keeps (None without one)."""
    spec = run_spec(run_dir)
    if spec is None:
        return None
    custom = spec.get("custom") or {}
    base = str((spec.get("policy") or {}).get("model_name_or_path") or "")
    return from_custom(custom, base_model=base, steps=step, model_dir=model_dir)


def write(folder: str | os.PathLike[str], recipe: Mapping[str, Any]) -> Path:
    """Write the recipe into a model folder (atomically: a reader never sees half a file)."""
    return atomic.write_json(Path(folder) / RECIPE_FILE, dict(recipe))


def stamp_run_exports(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the recipe into every whole `safetensors/step_N` of a run that lacks one (cosmos-rl's
    exports: its workers write them, skillbank's log watcher stamps each as it appears and at the end)."""
    from skillbank.runs import layout

    written = []
    for step in layout.list_safetensors_steps(run_dir):
        folder = layout.safetensors_dir(run_dir, step)
        if (folder / RECIPE_FILE).is_file():
            continue
        recipe = from_run(run_dir, step, model_dir=folder)
        if recipe is not None:
            written.append(write(folder, recipe))
    return written


# ---- reading -------------------------------------------------------------------------------------


@dataclass
class Found:
    """A model's recipe and where it came from (the folder's file, or the run folder's spec)."""

    recipe: dict[str, Any]
    source: str


def _run_of(folder: Path) -> tuple[Path, int] | None:
    m = _STEP.match(folder.name)
    if m and folder.parent.name == "safetensors":
        return folder.parent.parent, int(m.group(1))
    return None


def read(model: str | os.PathLike[str] | None) -> Found | None:
    """The recipe of a model reference: a local folder's skillbank_recipe.json, else (a run's
    safetensors/step_N written before recipes, or by cosmos-rl without the watcher) the run folder's
    spec; None for hub ids and folders without either."""
    if not model:
        return None
    folder = Path(str(model)).expanduser()
    if not folder.is_dir():
        return None
    path = folder / RECIPE_FILE
    if path.is_file():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return Found(doc, str(path)) if isinstance(doc, dict) else None
    run = _run_of(folder.resolve())
    if run is not None:
        recipe = from_run(run[0], run[1], model_dir=folder)
        if recipe is not None:
            return Found(recipe, f"{run[0]} (the run's spec)")
    return None


# ---- user > recipe > default ---------------------------------------------------------------------


@dataclass
class Applied:
    """The settings a reader uses, where each came from ("user", "recipe", "default"), and a warning
    for each user setting that differs from the recipe's."""

    values: dict[str, Any]
    sources: dict[str, str]
    warnings: list[str] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def apply(user: Mapping[str, Any], recipe: Mapping[str, Any] | None, defaults: Mapping[str, Any], *,
          names: Mapping[str, str] | None = None, recipe_source: str = "the model's recipe") -> Applied:
    """Resolve the recipe settings of a reader: user > recipe > default, per key.

    Keys: fps, nframes, total_pixels, max_pixels, system_prompt, answer_type (None in `user`: unset).
    fps and nframes resolve as one pair (the sampling): the user's when either is set, else the
    recipe's, else the default's. `names` maps a key to the reader's own name for messages (vision.fps).
    """
    names = names or {}
    have = dict(recipe.get("vision") or {}) if recipe else {}
    if recipe:
        have.update({k: recipe.get(k) for k in ("system_prompt", "answer_type")})
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []

    def name(key: str) -> str:
        return names.get(key, key)

    # the sampling pair
    pair = ("fps", "nframes")
    trained = {k: have.get(k) for k in pair}
    if any(user.get(k) is not None for k in pair):
        chosen = {k: user.get(k) for k in pair}
        source = "recipe" if all(_same(chosen[k], trained[k]) for k in pair) else "user"  # the user said what it says
        if any(v is not None for v in trained.values()) and source == "user":
            said = ", ".join(f"{name(k)} {chosen[k]}" for k in pair if chosen[k] is not None)
            was = ", ".join(f"{k} {trained[k]}" for k in pair if trained[k] is not None)
            warnings.append(f"{said} differs from {recipe_source} (trained at {was})")
    elif any(have.get(k) is not None for k in pair):
        chosen, source = {k: have.get(k) for k in pair}, "recipe"
    else:
        chosen, source = {k: defaults.get(k) for k in pair}, "default"
    for k in pair:
        if k in defaults or k in user:
            values[k], sources[k] = chosen[k], source
    for key in ("total_pixels", "max_pixels", "system_prompt", "answer_type"):
        if key not in defaults and key not in user:
            continue
        mine, theirs = user.get(key), have.get(key)
        if mine is not None:
            values[key], sources[key] = mine, "recipe" if theirs is not None and _same(mine, theirs) else "user"
            if theirs is not None and not _same(mine, theirs):
                shown = (lambda v: repr(v if len(str(v)) <= 60 else str(v)[:57] + "...")) if key == "system_prompt" else repr
                warnings.append(f"{name(key)} {shown(mine)} differs from {recipe_source} ({shown(theirs)})")
        elif theirs is not None:
            values[key], sources[key] = theirs, "recipe"
        else:
            values[key], sources[key] = defaults.get(key), "default"
    return Applied(values, sources, warnings)


def family_finding(model_type: str, prompt_family: str) -> str | None:
    """A message when a checkpoint's family (config.json model_type) is not the family the user named
    (evaluation.prompt_family), e.g. a Qwen2.5-VL folder evaluated with Cosmos-Reason2's prompts."""
    if not model_type or prompt_family not in PROMPT_FAMILIES:
        return None
    native = prompt_family_of(model_type)
    if native == prompt_family:
        return None
    return (f"the checkpoint's model_type is {model_type} ({native}'s family) but prompt_family is {prompt_family}: "
            f"its reasoning instruction is not the one this model was trained with")
