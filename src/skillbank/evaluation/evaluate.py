"""The evaluate action: one model on a LLaVA evaluation set -> results.json + metrics.json; or every
checkpoint of a training run -> one such pair per step + best_checkpoint.json.

A run's layout (both training backends): `<output_dir>/<timestamp>/safetensors/step_N/`, each step
a folder transformers loads with its processor. `--run` accepts the timestamp folder or its parent
(the newest timestamp wins) and ranks steps by the task metric (metrics.primary), not by recency;
on a tie the earlier step wins (same score, less training).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillbank import atomic, modelref
from skillbank.data import chat
from skillbank.data.media import media_root
from skillbank.data.records import load_records
from skillbank.errors import InputError
from skillbank.evaluation import overlap
from skillbank.evaluation.metrics import check_ground_truths, metric_value, score_results
from skillbank.specification.evaluate import DEFAULT_FPS, EvaluateSpec
from skillbank.specification.io import read_spec_file
from skillbank.specification.validation import validate
from skillbank.runs import layout

RESULTS = "results.json"
METRICS = "metrics.json"
BEST = "best_checkpoint.json"

# ---- records ----------------------------------------------------------------------------------


def load_eval_records(spec: EvaluateSpec) -> list[dict[str, Any]]:
    if not spec.dataset.annotation_path:
        raise InputError("dataset.annotation_path is empty", where="dataset.annotation_path", fix="set it to the evaluation annotations.json")
    records = load_records(spec.dataset.annotation_path)
    if spec.evaluation.limit is not None:
        records = records[: spec.evaluation.limit]
    if not records:
        raise InputError("the evaluation set has no records", where="dataset.annotation_path", fix="point at a non-empty annotations.json")
    return records


def check_inputs(records: list[dict[str, Any]], spec: EvaluateSpec) -> None:
    """Everything that can fail on the data fails here, before a model loads."""
    from skillbank.data.prompts import check_videos

    check_videos(records, media_root(spec.dataset.media_dir, spec.dataset.annotation_path), where="dataset.media_dir")
    questions, truths = zip(*(chat.prompt_and_answer(r) for r in records)) if records else ((), ())
    check_ground_truths(list(truths), spec.task.type, list(questions))


def result_rows(records: list[dict[str, Any]], responses: list[str]) -> list[dict[str, Any]]:
    """results.json rows before scoring: {video_id, question, gt, response (raw)} (+ family, dataset
    when the record has them); score_results adds answer and correct."""
    rows = []
    for record, response in zip(records, responses, strict=True):
        question, answer = chat.prompt_and_answer(record)
        row = {"video_id": str(record.get("id", "")), "question": question, "gt": answer, "response": response}
        for field in ("family", "dataset"):
            if record.get(field) is not None:
                row[field] = record[field]
        rows.append(row)
    return rows


# ---- one model ----------------------------------------------------------------------------------


def evaluate(
    spec: EvaluateSpec,
    *,
    model_name: str | None = None,
    results_dir: str | Path | None = None,
    records: list[dict[str, Any]] | None = None,
    cache: Any = None,
    progress: bool = True,
    loaded: Any = None,
) -> dict[str, Any]:
    """Evaluate one model; write results.json and metrics.json; return the metrics document.
    `loaded` (a LoadedModel of this spec's model) spares the load when one process evaluates many
    specs of the same model (the prompt search); the transformers engine uses it, vLLM loads its own."""
    model_name = model_name or spec.model.model_name
    spec, settings = resolve_settings(spec, model_name)
    out_dir = Path(results_dir or spec.results_dir)
    if records is None:
        records = load_eval_records(spec)
        check_inputs(records, spec)
    records, overlap_block, cache = _training_overlap(spec, records, settings, cache)
    as_trained = settings.sources.get("dataset.system_prompt") == "recipe"  # the training prompt: asked exactly so, nothing appended
    responses, generation, model_path, elapsed = generate_responses(spec, model_name, records, cache=cache, progress=progress, loaded=loaded,
                                                                    as_trained=as_trained)
    lengths = generation.pop("lengths", None)
    rows, report = score_results(result_rows(records, responses), spec.task.type, spec.evaluation.answer_type)
    diagnosis = _unparseable(rows, report, spec, settings, lengths, generation)
    asked = len(rows) + (overlap_block["count"] if overlap_block["excluded"] else 0)  # the set before any exclusion
    name, value = metric_value(report, spec.metrics.primary)
    document = {
        **report,
        "task_type": spec.task.type,
        "primary_metric": {"name": name, "value": value},
        "model": model_name,
        "model_path": model_path,
        "annotation_path": spec.dataset.annotation_path,
        "media_dir": media_root(spec.dataset.media_dir, spec.dataset.annotation_path),  # where the clips are: report's frame strips
        "num_samples": len(rows),
        "elapsed_s": round(elapsed, 3),
        "samples_per_s": round(len(rows) / elapsed, 3) if elapsed > 0 else None,
        "generation": generation,
        "vision": settings.vision,
        "recipe": settings.recipe_path,
        "settings_from": settings.sources,
        "training_overlap": overlap.public(overlap_block),
        "warnings": [*settings.warnings, *generation.pop("warnings", []), *overlap.warnings(overlap_block, asked), *diagnosis,
                     *report.get("warnings", [])],
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if spec.results.save_individual:
        atomic.write_json(out_dir / RESULTS, rows)
    atomic.write_json(out_dir / METRICS, document)
    document["results_dir"] = str(out_dir)
    return document


def _training_overlap(spec: EvaluateSpec, records: list[dict[str, Any]], settings: "Settings", cache: Any) -> tuple[list[dict[str, Any]], dict[str, Any], Any]:
    """The records to evaluate, the training_overlap block (evaluation.overlap) and the prompt cache to use:
    with evaluation.exclude_training_overlap the overlapping records are left out (and a shared cache,
    keyed by record position, is not reused)."""
    block = overlap.check(records, media_root(spec.dataset.media_dir, spec.dataset.annotation_path), settings.recipe,
                          recipe_source=settings.recipe_path)
    block["excluded"] = bool(spec.evaluation.exclude_training_overlap and block.get("count"))
    if spec.evaluation.exclude_training_overlap and not block.get("checked"):
        block["note"] = f"evaluation.exclude_training_overlap is set but the overlap was not checked ({block['reason']}): every item was scored"
    if not block["excluded"]:
        return records, block, cache
    drop = set(block["indices"])
    clean = [r for i, r in enumerate(records) if i not in drop]
    if not clean:
        raise InputError(f"every one of the {len(records)} evaluated items shares content with the model's training data {block['training_data']}",
                         where="evaluation.exclude_training_overlap", fix="evaluate on held-out data, or set exclude_training_overlap = false")
    return clean, block, None


def _unparseable(rows: list[dict[str, Any]], report: dict[str, Any], spec: EvaluateSpec, settings: "Settings",
                 lengths: dict[int, int] | None, generation: dict[str, Any]) -> list[str]:
    """Why most answers are unparseable, when the replies tell (evaluation.unparseable)."""
    from skillbank.evaluation.unparseable import THRESHOLD, diagnose, facts

    if not rows or report.get("unparseable", 0) <= THRESHOLD * len(rows):
        return []
    bad = [i for i, r in enumerate(rows) if r["answer"] is None]
    counts = [lengths[i] for i in bad if i in lengths] if lengths else None
    known = counts if counts is not None and len(counts) == len(bad) else None
    reply = facts([str(rows[i]["response"] or "") for i in bad], token_counts=known, max_tokens=int(generation["max_tokens"]))
    trained = (settings.recipe or {}).get("answer_type")
    return diagnose(len(rows), int(report["unparseable"]), spec.evaluation.answer_type or "short", reply, trained_answer_type=trained)


@dataclass
class Settings:
    """What the recipe resolution decided for one model: the vision block of metrics.json, where each
    setting came from (user / recipe / default), the recipe's file and the warnings."""

    vision: dict[str, Any]
    sources: dict[str, str]
    recipe_path: str | None
    warnings: list[str]
    recipe: dict[str, Any] | None = None  # the recipe itself (training overlap reads its training_data)


_NAMES = {"fps": "vision.fps", "nframes": "vision.num_frames", "total_pixels": "vision.total_pixels",
          "max_pixels": "vision.max_pixels", "system_prompt": "dataset.system_prompt", "answer_type": "evaluation.answer_type"}
_DEFAULTS = {"fps": DEFAULT_FPS, "nframes": None, "total_pixels": None, "max_pixels": None, "system_prompt": None, "answer_type": "short"}


def with_recipe(spec: EvaluateSpec, found: Any) -> tuple[EvaluateSpec, Settings]:
    """The spec with every vision and prompt setting it leaves null taken from the recipe (a
    skillbank.recipe.Found, or None), else the default: user > recipe > default."""
    from skillbank import recipe

    v, ds = spec.vision, spec.dataset
    user = {"fps": v.fps, "nframes": v.num_frames, "total_pixels": v.total_pixels, "max_pixels": v.max_pixels,
            "system_prompt": ds.system_prompt, "answer_type": spec.evaluation.answer_type}
    applied = recipe.apply(user, found.recipe if found else None, _DEFAULTS, names=_NAMES,
                           recipe_source=f"the model's recipe ({found.source})" if found else "the model's recipe")
    a = applied.values
    trained_type = found.recipe.get("answer_type") if found else None
    if (ds.system_prompt is None and applied.sources.get("system_prompt") == "recipe" and applied.sources.get("answer_type") == "user"
            and trained_type and a["answer_type"] != trained_type):
        a["system_prompt"], applied.sources["system_prompt"] = None, "default"  # the recipe's prompt asks for its own answer type
        applied.warnings.append(f"dataset.system_prompt is unset and evaluation.answer_type {a['answer_type']!r} is not the recipe's "
                                f"({trained_type!r}): the {a['answer_type']} answer type's own prompt is sent, not the recipe's "
                                "(metrics.json generation.system_prompt / question_suffix record what was sent)")
    resolved = spec.model_copy(deep=True)
    resolved.vision.fps, resolved.vision.num_frames = a["fps"], a["nframes"]
    resolved.vision.total_pixels, resolved.vision.max_pixels = a["total_pixels"], a["max_pixels"]
    resolved.dataset.system_prompt, resolved.evaluation.answer_type = a["system_prompt"], a["answer_type"]
    vision = {"fps": a["fps"], "num_frames": a["nframes"], "total_pixels": a["total_pixels"], "max_pixels": a["max_pixels"]}
    sources = {_NAMES[k]: source for k, source in applied.sources.items()}
    return resolved, Settings(vision, sources, found.source if found else None, applied.warnings, found.recipe if found else None)


def resolve_settings(spec: EvaluateSpec, model_name: str | None = None) -> tuple[EvaluateSpec, Settings]:
    """with_recipe for the model the spec (or model_name) names: its folder's skillbank_recipe.json, or
    the run folder's spec for a run's safetensors/step_N. A LoRA adapter's recipe is the adapter folder's."""
    from skillbank import recipe

    return with_recipe(spec, recipe.read(model_name or spec.model.model_name))


@dataclass
class _Engine:
    generate: Callable[[list[int], Any], list[str]]  # (record indices, GenerationSettings) -> responses
    path: str  # the folder the weights came from
    model_type: str  # config.json's: picks the reasoning prompt under prompt_family auto
    prompt_family: str
    system_prompt: str
    question_suffix: str
    close: Callable[[], None] | None = None
    lengths: dict[int, int] | None = None  # generated tokens of each record's first answer (max_tokens: cut off), when known


def _prompt_builder(spec: EvaluateSpec, processor: Any, model_type: str, *, as_trained: bool = False) -> tuple[Any, str, str, str]:
    """The prompt builder, with the system prompt and question suffix of the spec or its answer type's
    default, and the prompt family (evaluation.prompt_family; auto: the checkpoint's). as_trained: the
    system prompt is the one the model was trained with (its recipe's): no reasoning suffix is added."""
    from skillbank.data.examples import VisionSettings
    from skillbank.data.prompts import PromptBuilder
    from skillbank.recipe import prompt_family_of
    from skillbank.specification.evaluate import default_prompt

    family = spec.evaluation.prompt_family
    family = prompt_family_of(model_type) if family == "auto" else family
    system, suffix = default_prompt(spec.evaluation.answer_type or "short", family, spec.dataset.system_prompt)
    if as_trained:
        suffix = ""
    v = spec.vision
    vision = VisionSettings(fps=v.fps, nframes=v.num_frames, total_pixels=v.total_pixels, max_pixels=v.max_pixels)
    media = media_root(spec.dataset.media_dir, spec.dataset.annotation_path)
    return PromptBuilder(processor, vision=vision, system_prompt=system, media_path=media, question_suffix=suffix), system, suffix, family


def _transformers_engine(spec: EvaluateSpec, model_name: str, records: list[dict[str, Any]], *, cache: Any, progress: bool,
                         loaded: Any = None, as_trained: bool = False) -> _Engine:
    from skillbank.evaluation.generate import generate_answers
    from skillbank.evaluation.model import load_model

    loaded = loaded or load_model(model_name, enable_lora=spec.model.enable_lora, base_model_path=spec.model.base_model_path,
                        dtype=spec.model.dtype, num_gpus=spec.num_gpus)
    if spec.num_gpus > 0 and loaded.device.type == "cpu" and progress:
        print("note: num_gpus > 0 but no CUDA device is visible; evaluating on CPU", file=sys.stderr)
    model_type = str(getattr(loaded.model.config, "model_type", ""))
    builder, system, suffix, family = _prompt_builder(spec, loaded.processor, model_type, as_trained=as_trained)
    calls = 0
    first: dict[int, int] = {}

    def generate(indices: list[int], settings: Any) -> list[str]:
        nonlocal calls
        desc = f"{'evaluate' if calls == 0 else 'retry'} {Path(loaded.path).name}"
        lengths: list[int] | None = [] if calls == 0 else None  # an answer never fixed by a retry is the first pass's
        calls += 1
        out = generate_answers(loaded.model, loaded.processor, builder, [records[i] for i in indices], device=loaded.device,
                               batch_size=spec.evaluation.batch_size, settings=settings, cache=cache, keys=indices,
                               progress=progress, desc=desc, lengths=lengths)
        first.update(zip(indices, lengths or ()))
        return out

    return _Engine(generate, loaded.path, model_type, family, system, suffix, lengths=first)


def _vllm_engine(spec: EvaluateSpec, model_name: str, records: list[dict[str, Any]], *, progress: bool, as_trained: bool = False) -> _Engine:
    from skillbank.evaluation.model import load_processor, model_type, resolve_model_path
    from skillbank.evaluation.vllm_engine import VllmEngine

    path = resolve_model_path(model_name)
    if modelref.is_adapter(path):
        raise InputError(f"{path} is a LoRA adapter; the vllm engine evaluates whole models", where="evaluation.engine",
                         fix=f"use evaluation.engine transformers (it merges the adapter in memory), or merge it first: "
                             f"skillbank export --source {path} --out MERGED, then evaluate MERGED")
    processor = load_processor(path)
    mtype = model_type(path)
    builder, system, suffix, family = _prompt_builder(spec, processor, mtype, as_trained=as_trained)
    engine = VllmEngine(path, processor=processor, builder=builder, records=records, dtype=spec.model.dtype,
                        num_gpus=spec.num_gpus, seed=spec.evaluation.seed, model_type=mtype, progress=progress)
    return _Engine(engine, path, mtype, family, system, suffix, close=engine.close, lengths=engine.lengths)


def generate_responses(spec: EvaluateSpec, model_name: str, records: list[dict[str, Any]], *, cache: Any = None,
                       progress: bool = True, loaded: Any = None, as_trained: bool = False) -> tuple[list[str], dict[str, Any], str, float]:
    """Every record's raw response with the spec's engine, prompts and decoding settings, and the seed's
    retries of the responses the scorer cannot read. Returns the responses, the `generation` block of
    metrics.json (what was used; each retry pass; `warnings`, which evaluate moves to the top), the folder the weights came from and the seconds
    generation took (model loading excluded)."""
    from skillbank.scoring.answers import unscorable
    from skillbank.evaluation.generate import GenerationSettings, PromptCache, generate_with_retries
    from skillbank.recipe import family_finding

    answer_type = spec.evaluation.answer_type or "short"
    g = spec.generation.resolved(answer_type)
    settings = GenerationSettings.from_spec(g, seed=spec.evaluation.seed)
    if cache is None and g["max_retries"]:
        cache = PromptCache()  # a retry pass reuses the prepared prompts
    if spec.evaluation.engine == "vllm":
        engine = _vllm_engine(spec, model_name, records, progress=progress, as_trained=as_trained)
    else:
        engine = _transformers_engine(spec, model_name, records, cache=cache, progress=progress, loaded=loaded, as_trained=as_trained)
    asked = [chat.prompt_and_answer(r) for r in records]

    def flagged(responses: list[str]) -> list[int]:
        rows = [{"question": q, "gt": gt, "response": response} for (q, gt), response in zip(asked, responses, strict=True)]
        return unscorable(rows, spec.task.type, answer_type)

    started = time.perf_counter()
    try:
        responses, passes = generate_with_retries(engine.generate, len(records), settings, max_retries=int(g["max_retries"]),
                                                  unscorable=flagged)
    finally:
        if engine.close is not None:
            engine.close()
    elapsed = time.perf_counter() - started
    finding = family_finding(engine.model_type, spec.evaluation.prompt_family)
    generation = {"engine": spec.evaluation.engine, "answer_type": answer_type, "model_type": engine.model_type,
                  "prompt_family": engine.prompt_family, "prompt_family_requested": spec.evaluation.prompt_family,
                  "system_prompt": engine.system_prompt, "question_suffix": engine.question_suffix,
                  "own_system_turns": sum(chat.own_system_prompt(r) is not None for r in records), **g,
                  "seed": spec.evaluation.seed, "retries": passes, "unscorable": len(flagged(responses)),
                  "warnings": [finding] if finding else [], "lengths": dict(engine.lengths or {})}
    return responses, generation, engine.path, elapsed


# ---- a training run -----------------------------------------------------------------------------


def find_run_dir(run: str | Path) -> Path:
    """The run folder holding whole exports: `run` itself, or the newest run under it."""
    root = Path(run).expanduser()
    if layout.list_safetensors_steps(root):
        return root
    if not root.is_dir():
        raise InputError(f"run folder not found: {root}", where="--run", fix="pass <output_dir> or <output_dir>/<timestamp> of a training run")
    runs = [r for r in layout.run_dirs(root) if layout.list_safetensors_steps(r)]
    if not runs:
        raise InputError(f"no <timestamp>/safetensors/step_N under {root}", where="--run",
                         fix="train with checkpoint export on (train.ckpt.export_safetensors), or wait for the first export")
    return runs[-1]


def spec_for_training(custom: dict[str, Any], *, results_dir: str | Path, source: str, primary: str = "accuracy",
                      train_if_no_val: bool = False, base_model: str = "") -> EvaluateSpec:
    """An evaluate spec that sees what training saw: the train spec's validation set (or, with
    train_if_no_val, its training set when it has none) and the run's recipe (skillbank.recipe: vision
    settings, system prompt, answer format; the same file every model folder of the run holds), plus,
    where the train spec has one (RL), its task type.
    `custom` is the train spec's custom table (as in a run's spec.json or cosmos_rl.toml)."""
    from skillbank import recipe

    val = custom.get("val_dataset") or {}
    if not val.get("annotation_path"):
        if not train_if_no_val:
            raise InputError(f"no validation set in {source} (custom.val_dataset)", where="--run",
                             fix="pass --config FILE.toml naming dataset.annotation_path and dataset.media_dir")
        val = custom["train_dataset"]
    spec = validate(EvaluateSpec, {
        "dataset": {"annotation_path": val["annotation_path"], "media_dir": val.get("media_path", "")},
        "metrics": {"primary": primary},
        "task": {"type": custom["task_type"]} if custom.get("task_type") else {},
        "results_dir": str(results_dir),  # num_gpus keeps its default: the GPU when there is one
    }, source=source)
    return with_recipe(spec, recipe.Found(recipe.from_custom(custom, base_model=base_model), source))[0]  # type: ignore[arg-type]


def spec_from_run(run_dir: Path, *, results_dir: str | Path | None = None, primary: str = "accuracy",
                  train_if_no_val: bool = False) -> EvaluateSpec:
    """The evaluate spec for a run, from the train spec its backend keeps in the run folder."""
    path = layout.run_spec_file(run_dir)
    if path is None:
        raise InputError(f"{run_dir} keeps no train spec ({' or '.join(layout.RUN_SPEC_FILES)})", where="--run",
                         fix="pass --config FILE.toml naming dataset.annotation_path and dataset.media_dir")
    data = read_spec_file(path)
    return spec_for_training(data.get("custom") or {}, results_dir=results_dir or run_dir / "evaluate", source=str(path), primary=primary,
                             train_if_no_val=train_if_no_val, base_model=str((data.get("policy") or {}).get("model_name_or_path") or ""))


def evaluate_run(run: str | Path, spec: EvaluateSpec | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Evaluate every safetensors/step_N of a run; write best_checkpoint.json; return it."""
    from skillbank.data.examples import processor_fingerprint
    from skillbank.evaluation.generate import PromptCache

    run_dir = find_run_dir(run)
    steps = [(step, layout.safetensors_dir(run_dir, step)) for step in layout.list_safetensors_steps(run_dir)]
    spec = spec or spec_from_run(run_dir)
    root = Path(spec.results_dir)
    records = load_eval_records(spec)
    check_inputs(records, spec)
    caches: dict[str, PromptCache] = {}  # prepared prompts are reused while the processor is the same
    evaluated = []
    for step, path in steps:
        cache = caches.setdefault(processor_fingerprint(path), PromptCache())
        doc = evaluate(spec, model_name=str(path), results_dir=root / f"step_{step}", records=records, cache=cache, progress=progress)
        evaluated.append((step, path, doc))
    best_step, best_path, best_doc = max(evaluated, key=lambda e: (e[2]["primary_metric"]["value"], -e[0]))
    metric = best_doc["primary_metric"]
    best = {
        "run_dir": str(run_dir),
        "metric": metric["name"],
        "value": metric["value"],
        "step": best_step,
        "path": str(best_path),
        "results_dir": str(root / f"step_{best_step}"),
        "results_json": str(root / f"step_{best_step}" / RESULTS) if spec.results.save_individual else None,
        "metrics_json": str(root / f"step_{best_step}" / METRICS),
        "steps": [
            {"step": step, "path": str(path), "value": doc["primary_metric"]["value"], "metrics": _scalars(doc)}
            for step, path, doc in evaluated
        ],
        "warnings": list(dict.fromkeys(w for _, _, doc in evaluated for w in doc["warnings"])),
    }
    atomic.write_json(root / BEST, best)
    return best


def _scalars(doc: dict[str, Any]) -> dict[str, Any]:
    """The step's metrics without bookkeeping (model paths, timings)."""
    skip = {"model", "model_path", "annotation_path", "created", "results_dir", "elapsed_s", "samples_per_s", "primary_metric", "generation",
            "vision", "recipe", "settings_from", "warnings", "training_overlap", "small_samples", "media_dir"}
    return {k: v for k, v in doc.items() if k not in skip}
