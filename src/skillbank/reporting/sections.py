"""The report's sections, each built from what its inputs already hold: paragraphs, lists, tables and
pictures that `document` writes as HTML and markdown. A section without data (its inputs not given, or
holding nothing to show) is marked not shown with the reason: `document` leaves it out of the page and
names it once, with the flag it needs, under "Not in this report".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from skillbank.errors import InputError
from skillbank.reporting.inputs import EvalInputs, RunInputs

ALL = "all"


@dataclass
class Image:
    name: str  # the file beside report.md (a path relative to --out)
    png: bytes
    alt: str


@dataclass
class Table:
    head: list[str]
    rows: list[list[Union[str, Image]]]


@dataclass
class Bullets:
    """A list of short lines (warnings, the summary's findings), one item each."""

    items: list[str]


@dataclass
class Markdown:
    """Markdown text made elsewhere (a pipe table and paragraphs), shown as it is."""

    text: str


Part = Union[str, Table, Image, Markdown, Bullets]


@dataclass
class Section:
    key: str  # the HTML id
    title: str
    needs: str  # the inputs it is built from
    parts: list[Part] = field(default_factory=list)
    shown: bool = True
    why: str = ""  # why it is not shown
    facts: dict[str, Any] = field(default_factory=dict)  # figures --json reports (failures per evaluation, curves drawn)


def slug(text: str) -> str:
    """A file name for an id or label (other characters replaced; a digest keeps two names apart)."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60] or "item"
    return clean if clean == text else f"{clean}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


# ---- training ----------------------------------------------------------------------------------------

TRAINING_NEEDS = "--run (its metrics.jsonl, or the cosmos-rl logs of a run launched without skillbank)"


def training(run: RunInputs | None) -> Section:
    from skillbank.reporting import figures
    from skillbank.reporting.inputs import progress

    s = Section("training", "Training and validation loss", TRAINING_NEEDS)
    if run is None:
        return _missing(s, "no --run given")
    if not run.rows:
        return _missing(s, f"{run.folder} has no per-step metrics (no metrics.jsonl and no cosmos-rl logs with step lines)")
    losses = [r for r in run.rows if isinstance(r.get("loss"), (int, float))]
    vals = [r for r in run.rows if isinstance(r.get("val_loss"), (int, float))]
    lrs = [r["lr"] for r in run.rows if isinstance(r.get("lr"), (int, float))]
    ran = progress(run)
    said = [f"Run `{run.folder}`: {ran.line()}; {len(losses)} training step(s) logged (from `{run.rows_from}`)."]
    if losses:
        said.append(f"Training loss {losses[0]['loss']:.4g} at step {losses[0]['step']} -> {losses[-1]['loss']:.4g} at step {losses[-1]['step']}.")
    if vals:
        said.append(f"Validation loss {vals[0]['val_loss']:.4g} (step {vals[0]['step']}) -> {vals[-1]['val_loss']:.4g} (step {vals[-1]['step']}), "
                    f"{len(vals)} measurement(s)" + (" (drawn as points: too few for a curve)." if len(vals) < figures.FEW_POINTS else "."))
    else:
        said.append("No validation loss was logged (validation off, or not reached).")
    if lrs:
        said.append(f"Learning rate {lrs[0]:.3g} -> peak {max(lrs):.3g} -> {lrs[-1]:.3g}.")
    png, drawn = figures.training_curves(run.rows)
    if not drawn:
        return _missing(s, f"{run.rows_from} holds no loss, validation loss or learning rate to draw")
    s.facts = {**ran.facts(), "curves": drawn, "validation_points": len(vals)}
    s.parts += [" ".join(said), Image("training.png", png, "training loss, validation loss and learning rate per step")]
    return s


# ---- accuracy per family --------------------------------------------------------------------------------

ACCURACY_NEEDS = "--eval DIR (metrics.json: accuracy, correct, total and ci95 per family); --base DIR adds the before column"


def family_values(metrics: dict[str, Any]) -> tuple[dict[str, tuple[float, float, float, int, int]], list[str]]:
    """{family: (accuracy, low, high, n, correct)} plus "all", from metrics.json; and the families whose interval
    metrics.json did not carry (a Wilson interval of correct / total stands in, said in the report)."""
    from skillbank.scoring.stats import wilson

    out, computed = {}, []
    blocks = {**(metrics.get("families") or {}), ALL: metrics}
    for name, m in blocks.items():
        n, k = int(m.get("total") or 0), int(m.get("correct") or 0)
        ci = (m.get("ci95") or {}).get("accuracy")
        if not ci:
            ci = wilson(k, n)
            computed.append(name)
        out[name] = (float(m.get("accuracy") or 0.0), float(ci[0]), float(ci[1]), n, k)
    return out, computed


def accuracy(evals: list[EvalInputs], base: EvalInputs | None) -> Section:
    from skillbank.reporting import figures

    s = Section("accuracy", "Accuracy per family", ACCURACY_NEEDS)
    if not evals:
        return _missing(s, "no --eval given")
    series = ([(f"before: {base.label}", base)] if base else []) + [(f"after: {e.label}" if base else e.label, e) for e in evals]
    values, stand_ins = {}, []
    for label, ev in series:
        values[label], computed = family_values(ev.metrics)
        stand_ins += [f"{label} {name}" for name in computed]
    families = sorted({f for v in values.values() for f in v if f != ALL}) + [ALL]
    s.facts = {label: {f: {"accuracy": v[0], "ci95": [v[1], v[2]], "total": v[3], "correct": v[4],
                           "ci95_from": "wilson" if f"{label} {f}" in stand_ins else "metrics.json"} for f, v in values[label].items()}
               for label, _ in series}
    head = ["family", *(label for label, _ in series)]
    rows = [[f, *(_cell(values[label].get(f)) for label, _ in series)] for f in families]
    s.parts.append("Accuracy with its 95% interval [low, high] and correct / total, as `skillbank evaluate` wrote them in metrics.json"
                   + (f" (no ci95 recorded for {', '.join(stand_ins)}: the Wilson score interval of correct / total stands in)." if stand_ins else "."))
    s.parts.append(Table(head, rows))
    s.parts.append(Image("accuracy.png", figures.accuracy_bars(families, [(label, values[label]) for label, _ in series]),
                         "accuracy per family with 95% intervals"))
    warnings = [f"{label}: {w}" for label, ev in series for w in ev.metrics.get("warnings") or []]
    if warnings:
        s.parts += [f"metrics.json warnings ({len(warnings)}):", Bullets(warnings)]
    return s


def _cell(v: tuple[float, float, float, int, int] | None) -> str:
    if v is None:
        return "-"
    acc, lo, hi, n, k = v
    return f"{pct(acc)} [{pct(lo)}, {pct(hi)}] {k}/{n}"


# ---- confusion matrices -------------------------------------------------------------------------------

CONFUSION_NEEDS = "--eval DIR (results.json: reference, extracted answer and family of every item)"


def confusion(evals: list[EvalInputs]) -> Section:
    from skillbank.reporting import figures, verdicts

    s = Section("confusion", "Confusion matrices per family", CONFUSION_NEEDS)
    if not evals:
        return _missing(s, "no --eval given")
    s.parts.append("Rows: the reference answer; columns: the answer read from the response (both normalised as the answer rules do: "
                   "lower case, outer punctuation dropped); `(unparseable)`: no answer could be read. "
                   f"More than {verdicts.MAX_LABELS} labels on an axis are folded into `(other)`.")
    for ev in evals:
        matrices = verdicts.confusions(ev.results_path)
        s.parts.append(f"{ev.label} ({ev.items} items, `{ev.results_path}`):")
        s.parts.append(Image(f"confusion_{slug(ev.label)}.png",
                             figures.confusion_grid([(m.family, m.truths, m.answers, m.counts) for m in matrices], ev.label),
                             f"confusion matrices of {ev.label}"))
    return s


# ---- failures ---------------------------------------------------------------------------------------------

FAILURES_NEEDS = ("--eval DIR (results.json verdicts; the clips through metrics.json's annotation_path and media_dir, "
                  "or --media-dir); --max-failures N strips per evaluation, --no-frames none")


def failures(evals: list[EvalInputs], *, max_strips: int, frames: bool, media_dir: str | None, annotations: str | None = None,
             progress: Callable[[int], Any] | None = None) -> Section:
    from skillbank.reporting import frames as strips
    from skillbank.reporting import verdicts
    from skillbank.reporting.inputs import clip_paths

    s = Section("failures", "Failures", FAILURES_NEEDS)
    if not evals:
        return _missing(s, "no --eval given")
    for ev in evals:
        failing = verdicts.failures(ev.results_path)
        shown = failing[: max_strips] if frames else []
        s.facts[ev.label] = len(failing)
        s.parts.append(f"{ev.label}: {len(failing)} of {ev.items} items failed"
                       + (f"; frames of the first {len(shown)} (each family in turn), every failing id listed." if shown else "."))
        if not failing:
            continue
        clips = clip_paths(ev, [f["id"] for f in shown], media_dir, annotations) if shown else {}
        rows = []
        for i, f in enumerate(failing):
            picture: str | Image = "-"
            if i < len(shown):
                clip = clips[f["id"]]
                picture = Image(f"failures_{slug(ev.label)}/{slug(f['id'])}.png", strips.strip_png(clip, where=f"{ev.results_path}: {f['id']} ({clip})"),
                                f"frames of {f['id']}")
                if progress:
                    progress(1)
            answer = f["answer"] if f["answer"] is not None else f"(unparseable) {_short(f['response'])}"
            rows.append([f["id"], f["family"], _short(f["question"]), _short(f["reference"]), answer, picture])
        s.parts.append(Table(["id", "family", "question", "reference", "answer", "frames"], rows))
    return s


def _short(text: Any, limit: int = 160) -> str:
    text = "" if text is None else " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- recipe and training overlap ---------------------------------------------------------------------------

RECIPE_NEEDS = ("--run (the recipe of its newest export, skillbank_recipe.json, or its spec) or --eval (the evaluated model's recipe); "
                "the training overlap from each --eval / --base metrics.json (training_overlap)")
SPEC_KEYS = ("train.optm_lr", "train.optm_decay_type", "train.train_batch_per_replica",
             "policy.parallelism.dp_shard_size", "policy.parallelism.dp_replicate_size", "policy.lora.enable")
CAP_KEYS = ("train.epoch", "train.max_num_steps")  # limits, not what ran: shown beside the steps and epochs run


def _dotted(doc: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)  # type: ignore[assignment]
    return doc


def _recipe_rows(recipe: dict[str, Any]) -> list[list[str | Image]]:
    vision = {k: v for k, v in (recipe.get("vision") or {}).items() if v is not None}
    data = recipe.get("training_data") or {}
    rows = [["base model", str(recipe.get("base_model") or "-")], ["model type", str(recipe.get("model_type") or "-")],
            ["steps trained", str(recipe.get("steps_trained") if recipe.get("steps_trained") is not None else "-")],
            ["vision", ", ".join(f"{k} {v}" for k, v in vision.items()) or "-"],
            ["system prompt", _short(recipe.get("system_prompt") or "-", 300)], ["answer type", str(recipe.get("answer_type") or "-")],
            ["task type", repr(recipe.get("task_type") or "")],
            ["training data", f"{data.get('annotation_path') or '-'} ({data.get('records') if data.get('records') is not None else '?'} records, "
                              f"sha256 {str(data.get('sha256') or 'not recorded')[:16]})"]]
    return rows  # type: ignore[return-value]


def _eval_recipe(evals: list[EvalInputs]) -> tuple[dict[str, Any] | None, str]:
    import json
    from pathlib import Path

    for ev in evals:
        path = ev.metrics.get("recipe")
        if path and Path(str(path)).is_file():
            try:
                return json.loads(Path(str(path)).read_text(encoding="utf-8")), f"{path} (the model {ev.label} evaluated)"
            except (OSError, ValueError):
                continue
    return None, ""


def overlap_line(ev: EvalInputs) -> str:
    """What metrics.json says about overlap with the training data ("not recorded" when it says nothing)."""
    overlap = ev.metrics.get("training_overlap")
    if not isinstance(overlap, dict):
        return f"{ev.label}: training overlap not recorded (metrics.json has no training_overlap)"
    if overlap.get("checked") is False:  # evaluate recorded why it could not check (no recipe, data not here)
        return f"{ev.label}: training overlap not checked: {overlap.get('reason') or overlap.get('note') or 'metrics.json gives no reason'}"
    ids = overlap.get("ids") or overlap.get("id") or []
    ids = ids if isinstance(ids, list) else [ids]
    extra = "; ".join(f"{k}: {v}" for k, v in overlap.items()
                      if k not in ("count", "ids", "id", "checked") and isinstance(v, (str, int, float, bool)))
    line = f"{ev.label}: {overlap.get('count', len(ids))} evaluated item(s) overlap the training data"
    return line + (f" ({extra})" if extra else "") + (f": {', '.join(map(str, ids))}" if ids else "")


def recipe(run: RunInputs | None, evals: list[EvalInputs], base: EvalInputs | None) -> Section:
    s = Section("recipe", "Recipe and training overlap", RECIPE_NEEDS)
    found, source = (run.recipe, run.recipe_from) if run is not None and run.recipe else _eval_recipe(evals)
    if found is None and not evals:
        return _missing(s, "no --run or --eval given")
    if found is None:
        s.parts.append("No recipe found (no skillbank_recipe.json beside the model and no run spec).")
    else:
        s.parts.append(f"How the model was trained (from `{source}`):")
        rows = _recipe_rows(found)
        if run is not None and run.rows:
            from skillbank.reporting.inputs import progress

            ran = progress(run)
            rows += [["steps run", ran.steps_text()], ["epochs run", ran.epochs_text()]]
        if run is not None and run.spec:
            rows += [[f"{k} (a cap, not what ran)", str(v)] for k in CAP_KEYS if (v := _dotted(run.spec, k)) is not None]
            rows += [[k, str(v)] for k in SPEC_KEYS if (v := _dotted(run.spec, k)) is not None]
        s.parts.append(Table(["setting", "value"], rows))
    lines = [overlap_line(ev) for ev in ([base] if base else []) + evals]
    if lines:
        s.parts += ["Training overlap (evaluated items whose clip or question and answer are in the training data):", Bullets(lines)]
    return s


# ---- comparison ----------------------------------------------------------------------------------------------

COMPARISON_NEEDS = ("--base DIR and an --eval, or two --eval folders (their items joined on video_id, question and turn: "
                    "`skillbank compare A B`)")


def pairs(evals: list[EvalInputs], base: EvalInputs | None) -> list[tuple[EvalInputs, EvalInputs]]:
    """(A, B) of each comparison: every evaluation against the model before training, else the two evaluations."""
    if base is not None:
        return [(ev, base) for ev in evals]
    return [(evals[0], evals[1])] if len(evals) == 2 else []


def comparison(evals: list[EvalInputs], base: EvalInputs | None = None) -> Section:
    """`skillbank compare`'s table of each pair; facts["documents"]: (A label, B label, its --json document)."""
    s = Section("comparison", "Comparison of the evaluations" if base is not None else "Comparison of the two evaluations", COMPARISON_NEEDS)
    todo = pairs(evals, base)
    if not todo:
        return _missing(s, f"{len(evals)} --eval folder(s) and no --base given: a comparison needs two evaluations")
    from skillbank.comparison.compare import compare_dirs, to_markdown  # `skillbank compare`'s document: no statistics here

    done, refused = [], []
    for a, b in todo:
        try:
            doc = compare_dirs(str(a.folder), str(b.folder))
        except InputError as exc:  # e.g. a shared item whose references differ: the rest of the report stands
            refused.append(f"{a.label} vs {b.label}: `skillbank compare` refused the pair: {exc.message}")
            continue
        done.append((a.label, b.label, doc))
        s.parts.append(f"A = {a.label} (`{a.folder}`), B = {b.label} (`{b.folder}`):")
        s.parts.append(Markdown(to_markdown(doc)))
    s.facts["documents"] = done
    if not done:
        return _missing(s, "; ".join(refused))
    if refused:
        s.parts.append(Bullets(refused))
    return s


def _missing(s: Section, why: str) -> Section:
    """Mark the section not shown, with the reason (the page names it under "Not in this report")."""
    s.shown, s.why, s.parts = False, why, []
    return s
