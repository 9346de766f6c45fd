"""The inference action: one video + prompt -> the answer; or a LLaVA file -> results.json (the same
rows as evaluate, gt null where a record has no answer), with the evaluate action's data path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.data import chat
from skillbank.data.media import media_root
from skillbank.data.records import load_records
from skillbank.errors import InputError
from skillbank.specification.actions import InferenceSpec


def single_record(video: str, prompt: str) -> dict[str, Any]:
    path = Path(video).expanduser()
    if not path.is_file():
        raise InputError(f"video not found: {path}", where="--video", fix="pass the path of a video file")
    if not prompt.strip():
        raise InputError("the prompt is empty", where="--prompt", fix='pass --prompt "Is the ball red? Answer yes or no."')
    return {"id": path.stem, "video": str(path.resolve()), "conversations": [{"from": "human", "value": prompt}]}


def empty_warning(empty: int, total: int, *, max_tokens: int) -> str | None:
    """Why an empty answer matters and what to check, or None when every answer holds text. Inference has no
    answer rules (it does not score), so a blank is the one unreadable answer it can see; without this a
    results.json of blanks is written as quietly as a good one."""
    if not empty:
        return None
    head = "the answer is empty" if total == 1 else f"{empty} of {total} answers are empty"
    return (f"{head} (the model wrote nothing but special tokens or whitespace): check that the model is a trained checkpoint "
            "(an untrained or half-trained model often stops at once), that the prompt and system prompt ask the way it was "
            f"trained (the model's skillbank_recipe.json; --json settings_from says where each setting came from), and that max_tokens {max_tokens} leaves room for "
            "an answer; `skillbank evaluate` on the same file diagnoses its replies")


def run_inference(spec: InferenceSpec, *, out: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Single mode returns {answer, video, prompt}; batch mode writes results.json and returns {results_json, count}.
    Both carry empty_answers (the count of blank answers) and, when there are any, empty_warning (also in warnings)."""
    from skillbank.data.examples import VisionSettings
    from skillbank.evaluation.generate import GenerationSettings, generate_answers
    from skillbank.data.prompts import PromptBuilder, check_videos
    from skillbank.evaluation.model import load_model

    batch = bool(spec.annotation_path)
    if batch == bool(spec.video):
        raise InputError(
            "give either a video and a prompt (single mode) or an annotations file (batch mode)",
            where="--video / --annotations",
            fix="pass --video FILE --prompt TEXT, or --annotations FILE --media-dir DIR",
        )
    if batch:
        records, media = load_records(spec.annotation_path), media_root(spec.media_dir, spec.annotation_path)
        check_videos(records, media, where="media_dir")
    else:
        records, media = [single_record(spec.video, spec.prompt)], ""
    loaded = load_model(spec.model_path, num_gpus=1)
    used = settings_of(spec)
    a = used.values
    vision = VisionSettings(fps=a["fps"], nframes=a["nframes"], total_pixels=a["total_pixels"], max_pixels=a["max_pixels"])
    builder = PromptBuilder(loaded.processor, vision=vision, system_prompt=a["system_prompt"], media_path=media)
    settings = GenerationSettings(max_new_tokens=spec.max_tokens, temperature=spec.temperature)
    answers = generate_answers(
        loaded.model, loaded.processor, builder, records,
        device=loaded.device, batch_size=spec.batch_size, settings=settings, progress=progress and batch, desc="inference",
    )
    blank = sum(1 for answer in answers if not answer.strip())
    empty = empty_warning(blank, len(answers), max_tokens=spec.max_tokens)
    told = {"vision": {"fps": a["fps"], "num_frames": a["nframes"], "total_pixels": a["total_pixels"], "max_pixels": a["max_pixels"]},
            "system_prompt": a["system_prompt"], "settings_from": used.sources, "device": str(loaded.device), "empty_answers": blank, "empty_warning": empty,
            "warnings": [*used.warnings, *([empty] if empty else [])]}
    if not batch:
        return {"answer": answers[0], "video": records[0]["video"], "prompt": spec.prompt, "model": spec.model_path, **told}
    rows = []
    for record, answer in zip(records, answers, strict=True):
        question, gt = chat.prompt_and_answer(record)
        rows.append({"video_id": str(record.get("id", "")), "question": question, "gt": gt or None, "response": answer})
    target = Path(out) if out else Path(spec.results_dir) / "results.json"
    atomic.write_json(target, rows)
    return {"results_json": str(target), "count": len(rows), "model": spec.model_path, **told}


def settings_of(spec: InferenceSpec):
    """The vision settings and system prompt inference uses: the spec's, else the model's recipe
    (skillbank.recipe), else the defaults (fps 2, the short-answer prompt); pixels only from the recipe."""
    from skillbank import recipe
    from skillbank.specification.evaluate import DEFAULT_FPS, SHORT_SYSTEM_PROMPT

    found = recipe.read(spec.model_path)
    user = {"fps": spec.fps, "nframes": spec.num_frames, "total_pixels": None, "max_pixels": None, "system_prompt": spec.system_prompt}
    defaults = {"fps": DEFAULT_FPS, "nframes": None, "total_pixels": None, "max_pixels": None, "system_prompt": SHORT_SYSTEM_PROMPT}
    names = {"fps": "fps", "nframes": "num_frames"}
    return recipe.apply(user, found.recipe if found else None, defaults, names=names,
                        recipe_source=f"the model's recipe ({found.source})" if found else "the model's recipe")
