"""The evaluate action: one model on a LLaVA evaluation set -> results.json + metrics.json; or every
checkpoint of a training run -> one such pair per step + best_checkpoint.json.

A run's layout (both training backends): `<output_dir>/<timestamp>/safetensors/step_N/`, each step
a folder transformers loads with its processor. `--run` accepts the timestamp folder or its parent
(the newest timestamp wins) and ranks steps by the task metric (metrics.primary), not by recency;
on a tie the earlier step wins (same score, less training).
"""

from __future__ import annotations

import re
import sys
import time
import tomllib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from skillbank import atomic
from skillbank.data import chat
from skillbank.data.records import load_records
from skillbank.errors import InputError
from skillbank.evaluation.metrics import check_ground_truths, evaluation_report, metric_value
from skillbank.spec.evaluate import EvaluateSpec
from skillbank.spec.validation import validate

RESULTS = "results.json"
METRICS = "metrics.json"
BEST = "best_checkpoint.json"
STEP = re.compile(r"^step_(\d+)$")
# files a training run keeps beside its checkpoints that name its validation set (first found wins)
# (local backend: spec.json; cosmos-rl backend: cosmos_rl.toml; both have the train spec's `custom` table)
RUN_SPEC_FILES = ("spec.json", "spec.yaml", "train.yaml", "cosmos_rl.toml")


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
    from skillbank.evaluation.inputs import check_videos

    check_videos(records, spec.dataset.media_dir, where="dataset.media_dir")
    check_ground_truths([chat.prompt_and_answer(r)[1] for r in records], spec.task.type)


def result_rows(records: list[dict[str, Any]], responses: list[str]) -> list[dict[str, Any]]:
    """results.json rows: {video_id, question, gt, response} (+ family when the record has one)."""
    rows = []
    for record, response in zip(records, responses, strict=True):
        question, answer = chat.prompt_and_answer(record)
        row = {"video_id": str(record.get("id", "")), "question": question, "gt": answer, "response": response}
        if record.get("family") is not None:
            row["family"] = record["family"]
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
) -> dict[str, Any]:
    """Evaluate one model; write results.json and metrics.json; return the metrics document."""
    from skillbank.data.examples import VisionSettings
    from skillbank.evaluation.generate import GenerationSettings, generate_answers
    from skillbank.evaluation.inputs import PromptBuilder
    from skillbank.evaluation.model import load_model

    model_name = model_name or spec.model.model_name
    out_dir = Path(results_dir or spec.results_dir)
    if records is None:
        records = load_eval_records(spec)
        check_inputs(records, spec)
    loaded = load_model(
        model_name, enable_lora=spec.model.enable_lora, base_model_path=spec.model.base_model_path, dtype=spec.model.dtype, num_gpus=spec.num_gpus
    )
    if spec.num_gpus > 0 and loaded.device.type == "cpu" and progress:
        print("note: num_gpus > 0 but no CUDA device is visible; evaluating on CPU", file=sys.stderr)
    vision = VisionSettings(fps=spec.vision.fps, nframes=spec.vision.num_frames, total_pixels=spec.vision.total_pixels)
    builder = PromptBuilder(loaded.processor, vision=vision, system_prompt=spec.dataset.system_prompt, media_path=spec.dataset.media_dir)
    g = spec.generation
    settings = GenerationSettings(
        max_new_tokens=g.max_tokens, temperature=g.temperature, top_p=g.top_p, repetition_penalty=g.repetition_penalty, seed=spec.evaluation.seed
    )
    started = time.perf_counter()
    responses = generate_answers(
        loaded.model, loaded.processor, builder, records,
        device=loaded.device, batch_size=spec.evaluation.batch_size, settings=settings, cache=cache, progress=progress,
        desc=f"evaluate {Path(loaded.path).name}",
    )
    elapsed = time.perf_counter() - started
    rows = result_rows(records, responses)
    report = evaluation_report(rows, spec.task.type, [r.get("family") for r in rows])
    name, value = metric_value(report, spec.metrics.primary)
    document = {
        **report,
        "task_type": spec.task.type,
        "primary_metric": {"name": name, "value": value},
        "model": model_name,
        "model_path": loaded.path,
        "annotation_path": spec.dataset.annotation_path,
        "num_samples": len(rows),
        "elapsed_s": round(elapsed, 3),
        "samples_per_s": round(len(rows) / elapsed, 3) if elapsed > 0 else None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if spec.results.save_individual:
        atomic.write_json(out_dir / RESULTS, rows)
    atomic.write_json(out_dir / METRICS, document)
    document["results_dir"] = str(out_dir)
    return document


# ---- a training run -----------------------------------------------------------------------------


def _stamp_key(folder: Path) -> tuple[str, int]:
    stamp, _, n = folder.name.partition("-")
    return stamp, int(n) if n.isdigit() else 0


def find_run_dir(run: str | Path) -> Path:
    """The run folder holding safetensors/: `run` itself, or its newest timestamp subfolder."""
    root = Path(run).expanduser()
    if (root / "safetensors").is_dir():
        return root
    if not root.is_dir():
        raise InputError(f"run folder not found: {root}", where="--run", fix="pass <output_dir> or <output_dir>/<timestamp> of a training run")
    stamps = [p for p in root.iterdir() if (p / "safetensors").is_dir()]
    if not stamps:
        raise InputError(f"no <timestamp>/safetensors/ under {root}", where="--run", fix="train with checkpoint export on (train.ckpt.export_safetensors)")
    return max(stamps, key=_stamp_key)


def list_steps(run_dir: Path) -> list[tuple[int, Path]]:
    steps = []
    for folder in (run_dir / "safetensors").iterdir():
        m = STEP.match(folder.name)
        if m and folder.is_dir():
            steps.append((int(m[1]), folder))
    if not steps:
        raise InputError(f"no safetensors/step_N folders in {run_dir}", where="--run", fix="wait for the first checkpoint export")
    return sorted(steps)


def spec_from_run(run_dir: Path) -> EvaluateSpec:
    """An evaluate spec for the run's own validation set, read from the training spec kept in the run."""
    for name in RUN_SPEC_FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else yaml.safe_load(path.read_text())
        custom = (data or {}).get("custom") or {}
        val = custom.get("val_dataset") or {}
        if not val.get("annotation_path"):
            continue
        vision = custom.get("vision") or {}
        nframes = vision.get("nframes")
        spec = {
            "dataset": {"annotation_path": val["annotation_path"], "media_dir": val.get("media_path", "")},
            "vision": {"num_frames": nframes} if nframes else {"fps": vision.get("fps") or 2.0},
            "results_dir": str(run_dir / "evaluate"),
        }
        if vision.get("total_pixels"):
            spec["vision"]["total_pixels"] = vision["total_pixels"]
        if "system_prompt" in custom:
            spec["dataset"]["system_prompt"] = custom["system_prompt"]
        return validate(EvaluateSpec, spec, source=str(path))  # type: ignore[return-value]
    raise InputError(
        f"no validation set found in {run_dir} (looked for custom.val_dataset in {', '.join(RUN_SPEC_FILES)})",
        where="--run",
        fix="pass --config FILE.toml naming dataset.annotation_path and dataset.media_dir",
    )


def evaluate_run(run: str | Path, spec: EvaluateSpec | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Evaluate every safetensors/step_N of a run; write best_checkpoint.json; return it."""
    from skillbank.data.examples import processor_fingerprint
    from skillbank.evaluation.generate import PromptCache

    run_dir = find_run_dir(run)
    steps = list_steps(run_dir)
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
    }
    atomic.write_json(root / BEST, best)
    return best


def _scalars(doc: dict[str, Any]) -> dict[str, Any]:
    """The step's metrics without bookkeeping (model paths, timings)."""
    skip = {"model", "model_path", "annotation_path", "created", "results_dir", "elapsed_s", "samples_per_s", "primary_metric"}
    return {k: v for k, v in doc.items() if k not in skip}
