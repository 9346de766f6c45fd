"""An AutoML study planned as a whole: its time and its disk, one figure for `skillbank plan --trials N --workers W`
and the AutoML dry run (and the disk for the gate of every worker: runs.disk.study_disk).

A trial (automl.trials) trains the trial spec (every epoch saved and exported: runs.disk.TRIAL_CKPT, up to the most
epochs a trial trains) and, after each epoch, pauses the trainer while that epoch's export is evaluated on the
spec's custom.val_dataset (the training set when it has none) with the recipe's answer type; with a loss metric
(val_loss) nothing is evaluated beyond the trainer's validation. Evaluation of one export: the model loaded
(bf16 weights at --read-gibps), the prefill of every record (FLOPs on one GPU at the MFU, evaluate's num_gpus
default) and max_tokens decode steps per batch of evaluation.batch_size, each reading the bf16 weights at
DECODE_EFFICIENCY of the HBM bandwidth (every answer taken to its max_tokens: an upper bound).
study_time_h = ceil(trials / W) x one trial (W trials at once, each on GPUs of its own): no pruning, an upper bound.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from skillbank.planning import estimate as est
from skillbank.planning import layouts, timing
from skillbank.runs import steps
from skillbank.runs.disk import StudyShape, as_trial, study_disk


def eval_seconds(s: layouts.Setting, records: int, answer_type: str) -> dict[str, float]:
    """One export evaluated on `records` records: load, prefill, decode (seconds)."""
    from skillbank.planning.rl import DECODE_EFFICIENCY
    from skillbank.specification.evaluate import ANSWER_DEFAULTS, EvaluationSpec

    batch = int(EvaluationSpec.model_fields["batch_size"].default)
    max_tokens = int(ANSWER_DEFAULTS.get(answer_type, ANSWER_DEFAULTS["short"])["max_tokens"])
    weights = s.count.total * 2
    load = weights / (s.rates.read_gibps * est.GIB)
    prefill = records * est.forward_flops(s.arch, s.count.total, layouts.tokens_of(s.tokens["time_at"])) / (s.gpu.bf16_tflops * 1e12 * s.mfu)
    decode = math.ceil(records / batch) * max_tokens * weights / (s.gpu.hbm_gibps * est.GIB * DECODE_EFFICIENCY)
    return {"load": load, "prefill": prefill, "decode": decode, "max_tokens": max_tokens, "batch": batch}


def study_time(s: layouts.Setting, nodes: int, per_node: int, shape: StudyShape, *, eval_records: int | None, eval_on: str,
               answer_type: str, evaluates: bool = True) -> dict[str, Any]:
    """The study's time: one trial (train + each epoch's evaluation) x ceil(trials / workers)."""
    trial = replace(s, spec=as_trial(s.spec, shape.epochs))
    t = layouts.timed(trial, nodes, per_node)
    times = timing.breakdown(t.shape, s.gpu, s.mfu, s.rates)
    if times is None:
        return {"study_time_h": None, "trial_time_h": None, "assumptions": ["the train records were not counted: the study's time is unknown"]}
    ckpts = steps.checkpoint_plan(t.spec, t.plan)
    exports = ckpts.saved if ckpts else 0
    one = eval_seconds(s, eval_records or 0, answer_type) if evaluates and eval_records else None
    evaluation = exports * (one["load"] + one["prefill"] + one["decode"]) if one else 0.0
    trial_h = times["total"] + evaluation / 3600
    waves = math.ceil(shape.trials / max(1, shape.workers))
    said = [f"a trial: the trial spec trained ({times['total']:.2f} h: every epoch saved and exported, up to {t.spec.train.epoch} epoch(s)) "
            + (f"+ {exports} evaluation(s) of {eval_records:,} records ({eval_on}; {answer_type} answers, {one['max_tokens']} tokens at most, "
               f"batches of {one['batch']} on one GPU: {one['load'] / 60:.1f} min load, {one['prefill'] / 3600:.2f} h prefill, "
               f"{one['decode'] / 3600:.2f} h decode each)" if one else "(a loss metric: nothing evaluated beyond the trainer's validation)"),
            f"{shape.trials} trial(s), {shape.workers} at once (each on GPUs of its own): {waves} after another; no pruning (pruned trials stop sooner)"]
    return {"study_time_h": round(waves * trial_h, 2), "trial_time_h": round(trial_h, 3), "trial_train_h": times["total"],
            "trial_evaluation_h": round(evaluation / 3600, 3), "evaluations_per_trial": exports if one else 0, "eval_records": eval_records,
            "eval_on": eval_on, "waves": waves, "assumptions": said}


def study_block(s: layouts.Setting, nodes: int, per_node: int, shape: StudyShape, *, records: int | None, eval_records: int | None,
                eval_on: str, answer_type: str, evaluates: bool = True) -> dict[str, Any]:
    """The study's time and disk in one block; its three figures also go to the top of `plan --json` and the dry run."""
    doc = study_time(s, nodes, per_node, shape, eval_records=eval_records, eval_on=eval_on, answer_type=answer_type, evaluates=evaluates)
    disk = study_disk(s.spec, shape, records=records, backend=s.backend)
    doc["disk"] = disk.to_dict() if disk else None
    doc["disk_gib_per_worker"] = doc["disk"]["disk_gib_per_worker"] if disk else 0.0
    doc["disk_gib_at_most"] = doc["disk"]["disk_gib_at_most"] if disk else 0.0
    return doc


def eval_set(spec: Any, train_annotated: int | None, val_records: int | None) -> tuple[int | None, str]:
    """What a trial evaluates each export on: custom.val_dataset's records, else the whole training set (annotated)."""
    val = spec.custom.val_dataset
    if val is not None and val.annotation_path:
        return val_records, "custom.val_dataset"
    return train_annotated, "the training set: no custom.val_dataset (give one to evaluate fewer records)"


def study_lines(b: dict[str, Any]) -> list[str]:
    """The study in a few lines for a person (plan --trials, the dry run)."""
    d = b.get("disk") or {}
    time = (f"study: {b['study_time_h']:.2f} h = {b['waves']} x {b['trial_time_h']:.2f} h a trial (train {b['trial_train_h']:.2f} h + "
            f"{b['evaluations_per_trial']} evaluation(s) {b['trial_evaluation_h']:.2f} h)") if b.get("study_time_h") is not None else "study: time unknown"
    return [time,
            f"  disk: {steps.gib_value_text(b['disk_gib_per_worker'])} per worker, {steps.gib_value_text(b['disk_gib_at_most'])} at most "
            f"(keep {d.get('keep', '-')}; {steps.gib_value_text(d.get('checkpoint_gib_largest', 0))} a checkpoint at the search's largest, "
            f"{steps.gib_value_text(d.get('checkpoint_gib', 0))} at the base spec's)"]
