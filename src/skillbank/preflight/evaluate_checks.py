"""Preflight of an evaluate spec beyond its records: the settings evaluate will run with (the model's recipe filling
null vision / prompt keys, spec.recipe / spec.model warnings) and the evaluated items' overlap with the training data."""

from __future__ import annotations

from typing import Any

from skillbank.errors import InputError
from skillbank.preflight.report import Findings


def training_overlap(spec: Any, file: str, f: Findings) -> None:
    """annotations.training_overlap: evaluated items that share content with the training data the model's
    recipe names (skillbank.evaluation.overlap, as evaluate checks it), or that it could not be checked."""
    from skillbank import recipe
    from skillbank.data.media import media_root
    from skillbank.data.records import load_records
    from skillbank.evaluation import overlap

    found = recipe.read(spec.model.model_name)
    if found is None or not (found.recipe.get("training_data") or {}).get("annotation_path"):
        return  # no recipe naming training data: nothing to compare with (metrics.json says so)
    try:
        records = load_records(file)
    except InputError:
        return  # the record scan reported it
    block = overlap.check(records, media_root(spec.dataset.media_dir, spec.dataset.annotation_path), found.recipe, recipe_source=found.source)
    fix = ("evaluate on clips the model did not train on, or set evaluation.exclude_training_overlap = true" if block.get("checked")
           else "copy the training data to this machine to check, or evaluate knowing it was not checked")
    for message in overlap.warnings(block, len(records)):
        f.warning("annotations.training_overlap", message, fix, "dataset.annotation_path")


def resolved_spec(spec: Any, f: Findings) -> Any:
    """The spec as evaluate will run it (null vision / prompt settings from the model's recipe), with a
    spec.recipe warning for each set value that differs from the recipe, and a spec.model warning when
    the checkpoint's family (config.json model_type) is not the one evaluation.prompt_family names."""
    from skillbank import recipe
    from skillbank.evaluation.evaluate import resolve_settings

    resolved, settings = resolve_settings(spec)
    for warning in settings.warnings:
        f.warning("spec.recipe", warning, "leave the key unset (null) to evaluate as the model was trained, or keep it to test other settings",
                  "vision" if warning.startswith("vision.") else warning.split(" ", 1)[0])
    found = recipe.read(spec.model.model_name)
    model_type = recipe.model_type_of(spec.model.model_name) or (found.recipe.get("model_type", "") if found else "")
    finding = recipe.family_finding(str(model_type), spec.evaluation.prompt_family)
    if finding:
        f.warning("spec.model", finding, f"set evaluation.prompt_family = auto (or {recipe.prompt_family_of(str(model_type))}), or evaluate a checkpoint of that family",
                  "evaluation.prompt_family")
    return resolved
