"""Prompt search (AutoPrompt): `skillbank automl --action evaluate`, a study over the evaluate spec.

A trial evaluates the evaluate spec with the sampled values (system prompt candidates from
--prompts, any evaluate key through --param / --range / --choices) on the PROXY set, the spec's
dataset; nothing trains. Values go through the spec's own overrides and validation
(spec.overrides.apply_overrides: typed, setting vision.num_frames clears vision.fps), so a
candidate that breaks a rule is PRUNED with the reason. The model loads once per study, in this
process (ModelPool); a trial whose spec equals one already evaluated here reuses its metric.
The best trial (and the baseline) is then evaluated once on the HELD-OUT set (--holdout), and
both numbers go into best_rec.json, beside the same trials.parquet and history.png as training.
The command (its flags, the preflight gate, the plan, the run) is skillbank.commands.automl_prompts.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.preflight.report import gate_lines

PROMPT_KEY = "dataset.system_prompt"
EVAL_METRICS = ("accuracy", "f1", "balanced_accuracy")
TRAIN_ONLY = ("hyperband", "asha")  # prune by epoch: an evaluation has none


# ---- the search space --------------------------------------------------------------------------


def load_candidates(path: str) -> list[str | None]:
    """System prompt candidates: a YAML list (null: the answer type's default prompt; multi-line
    prompts) or a text file with one prompt per non-empty line."""
    import yaml

    file = Path(path)
    if not file.is_file():
        raise InputError(f"prompt file not found: {file}", where="--prompts", fix="a text file, one prompt per line, or a YAML list")
    text = file.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if isinstance(data, list):
        bad = [i for i, c in enumerate(data) if c is not None and not isinstance(c, str)]
        if bad:
            raise InputError(f"item {bad[0]} is not a string or null", where=f"{file}[{bad[0]}]", fix="quote the prompt")
        candidates: list[str | None] = [c.strip() if isinstance(c, str) else None for c in data]
    else:
        candidates = [line.strip() for line in text.splitlines() if line.strip()]
    if not candidates:
        raise InputError("no prompt candidates", where=str(file), fix="one prompt per line, or a YAML list of prompts")
    seen: set[str | None] = set()
    for i, c in enumerate(candidates):
        if c in seen:
            raise InputError(f"candidate {i} repeats an earlier one", where=f"{file}[{i}]", fix="list each prompt once")
        seen.add(c)
    return candidates


def parse_holdout(text: str) -> tuple[str, str]:
    """--holdout ANNOTATIONS[:MEDIA] -> (annotation_path, media_dir; empty: the annotation file's folder)."""
    annotation, _, media = text.partition(":")
    if not annotation:
        raise InputError("--holdout wants ANNOTATIONS[:MEDIA]", where="--holdout", fix="e.g. --holdout data/test/annotations.json:data/test")
    return annotation, media


def build_prompt_space(base: dict[str, Any], schema: dict[str, Any], *, params: list[str] | None, ranges: dict[str, Any],
                       choices: dict[str, Any], prompts: str | None, baseline: bool):
    """The evaluate search space: `prompts` (--prompts FILE) as choices of dataset.system_prompt, plus
    `params` / `ranges` / `choices` (--param / --range / --choices) of the evaluate schema. Each list of choices gains the base spec's value when it lacks it
    (the baseline trial must be one of its points); choices stay as given, checked per trial."""
    from skillbank.automl.space import Param, SearchSpace, build_space
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.overrides import coerce, get_dotted

    space = SearchSpace(params=[])
    if params or ranges or choices:
        if PROMPT_KEY in (params or []):
            raise InputError(f"{PROMPT_KEY} is searched with --prompts FILE", where=f"--param {PROMPT_KEY}", fix="list the candidates in a file")
        space = build_space(schema, base, params=params, ranges=ranges, choices=choices)
    if prompts:
        if PROMPT_KEY in space.keys():
            raise InputError(f"{PROMPT_KEY} given twice", where="--prompts", fix=f"drop --choices {PROMPT_KEY}=...")
        space.params.insert(0, Param(PROMPT_KEY, "categorical", choices=tuple(load_candidates(prompts))))
    if not space.params:
        raise InputError("nothing to search", where="--prompts",
                         fix="give --prompts FILE and/or --choices KEY=A,B / --param KEY --range KEY=MIN:MAX (evaluate keys)")
    for i, p in enumerate(space.params):
        if p.kind != "categorical":
            continue
        typed: list[Any] = []
        for choice in p.choices:  # typed where the field's type takes it; the rest is PRUNED per trial with the reason
            try:
                choice = coerce(EvaluateSpec, p.key, choice)
            except InputError:
                pass
            if choice not in typed:
                typed.append(choice)
        base_value = get_dotted(base, p.key)
        if baseline and base_value not in typed:
            typed.insert(0, base_value)
            space.skipped[f"{p.key} (baseline)"] = f"the base spec's value {_short(base_value)} joins the candidates (the baseline)"
        space.params[i] = Param(p.key, p.kind, choices=tuple(typed), depends_on=p.depends_on)
    return space


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value)
    return text if len(text) <= width else text[: width - 4] + '..."'


def apply_values(spec: dict[str, Any], values: dict[str, Any]) -> None:
    """Put one trial's values into the spec through the spec's own overrides and validation: typed
    values (written back into `values`), exclusive partners cleared; InputError -> the trial is PRUNED."""
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.overrides import apply_overrides, get_dotted
    from skillbank.specification.validation import validate

    apply_overrides(EvaluateSpec, spec, values)
    for key in values:
        values[key] = get_dotted(spec, key)
    validate(EvaluateSpec, spec, source="candidate")


# ---- trials: one evaluation each, the model loaded once ----------------------------------------------


@dataclass
class ModelPool:
    """The loaded model of the study's spec (one at a time), so trials do not each load it."""

    loaded: Any = None
    key: tuple | None = None
    loads: int = 0

    def get(self, spec: Any) -> Any:
        if spec.evaluation.engine != "transformers":
            return None  # vLLM builds its engine per evaluation
        m = spec.model
        key = (m.model_name, m.enable_lora, m.base_model_path, m.dtype, spec.num_gpus)
        if key != self.key:
            from skillbank.evaluation.model import load_model

            self.loaded = None  # drop the previous model before loading the next
            self.loaded = load_model(m.model_name, enable_lora=m.enable_lora, base_model_path=m.base_model_path,
                                     dtype=m.dtype, num_gpus=spec.num_gpus)
            self.key, self.loads = key, self.loads + 1
        return self.loaded


@dataclass
class EvalSession:
    """What the trials of one process share: the model, record sets, prompt caches, finished specs."""

    pool: ModelPool = field(default_factory=ModelPool)
    records: dict[tuple, list[dict[str, Any]]] = field(default_factory=dict)
    caches: dict[str, Any] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    evaluations: int = 0
    samples: int = 0
    seconds: float = 0.0

    def evaluate(self, spec: Any, results_dir: Path) -> dict[str, Any]:
        from skillbank.evaluation.evaluate import check_inputs, evaluate, load_eval_records
        from skillbank.evaluation.generate import PromptCache

        d = spec.dataset
        data_key = (d.annotation_path, d.media_dir, spec.evaluation.limit, spec.task.type, spec.evaluation.turns)  # turns: the items asked
        if data_key not in self.records:
            records = load_eval_records(spec)
            check_inputs(records, spec)
            self.records[data_key] = records
        records = self.records[data_key]
        # prepared prompts depend on the data, the system prompt, the answer type (its default prompt) and vision
        prompt_key = json.dumps([data_key, d.system_prompt, spec.evaluation.answer_type, spec.vision.model_dump()], sort_keys=True)
        cache = self.caches.setdefault(prompt_key, PromptCache())
        started = time.perf_counter()
        doc = evaluate(spec, results_dir=results_dir, records=records, cache=cache, loaded=self.pool.get(spec), progress=False)
        self.seconds += time.perf_counter() - started
        self.evaluations += 1
        self.samples += int(doc["num_samples"])  # scored turns
        return doc


def make_eval_runner(session: EvalSession):
    from skillbank.automl.study import TrialFailed, TrialOutcome
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.io import write_spec

    def runner(trial_dir: Path, spec: dict[str, Any], report: Any) -> TrialOutcome:
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_spec(trial_dir / "spec.yaml", spec)
        same = json.dumps({k: v for k, v in spec.items() if k != "results_dir"}, sort_keys=True)
        if same in session.done:  # deterministic for a given spec and seed: no second evaluation
            return TrialOutcome(session.done[same], 0)
        try:
            doc = session.evaluate(EvaluateSpec.model_validate(spec), trial_dir)
        except Exception as exc:  # an evaluation that crashed (or data it rejects): FAIL with the reason, run again on --resume
            raise TrialFailed(f"evaluation failed: {type(exc).__name__}: {exc}") from exc
        value = float(doc["primary_metric"]["value"])
        session.done[same] = value
        return TrialOutcome(value, 0)

    return runner


# ---- the sets, the plan, the outputs ---------------------------------------------------------------


def holdout_spec(base: dict[str, Any], holdout: tuple[str, str]) -> dict[str, Any]:
    spec = copy.deepcopy(base)
    spec["dataset"]["annotation_path"], spec["dataset"]["media_dir"] = holdout
    spec["evaluation"]["limit"] = None
    return spec


def own_system_turns(annotation_path: str, limit: int | None = None) -> tuple[int, int]:
    """(records whose conversations open with their own system turn, records) of an evaluation set: those
    records keep their own system prompt (skillbank.data.chat.build_messages), so no candidate reaches them."""
    from skillbank.data.chat import own_system_prompt
    from skillbank.data.records import load_records

    records = load_records(annotation_path)[:limit]
    return sum(own_system_prompt(r) is not None for r in records), len(records)


def system_turn_notes(proxy_path: str, base: dict[str, Any], holdout: tuple[str, str] | None, space) -> tuple[list[str], dict[str, int]]:
    """When dataset.system_prompt is searched: a note for each set (proxy, held-out) where records carry
    their own system turn (the search cannot change their prompt); InputError when every proxy record
    does (every candidate would score the same). Returns (notes, own system turns per set: best_rec.json's)."""
    turns: dict[str, int] = {}
    if PROMPT_KEY not in space.keys():
        return [], turns
    sets = [("proxy", proxy_path, base["evaluation"]["limit"])] + ([("held-out", holdout[0], None)] if holdout else [])
    notes = []
    for name, path, limit in sets:
        own, total = own_system_turns(path, limit)
        turns[name] = own
        if not own:
            continue
        if name == "proxy" and own == total:
            raise InputError(f"every one of the {total} proxy records opens with its own system turn, which replaces the candidate "
                             "system prompt: every candidate would score the same", where=f"{path} (dataset.annotation_path)",
                             fix="search on records without a system turn (drop conversations[0] when it is from: system), "
                                 "or search other evaluate keys with --choices/--param instead of --prompts")
        notes.append(f"{own} of {total} {name} record(s) in {path} open with their own system turn: they keep it, so the "
                     f"candidate system prompts reach only the other {total - own}")
    return notes, turns


def plan_lines(plan: dict[str, Any]) -> list[str]:
    held = plan["holdout"]
    return [
        "automl prompt search plan (dry run: nothing created, nothing started)",
        f"  study      : {plan['study']} in {plan['study_dir']}",
        f"  storage    : {plan['storage']} ({ {True: 'exists', False: 'not created yet', None: 'not checked'}[plan['storage_exists']] })",
        f"  algorithm  : {plan['algorithm']}; metric {plan['metric']['name']} ({plan['metric']['direction']}) on the proxy set",
        f"  trials     : {plan['max_trials']} finished (complete or pruned), {'baseline first, ' if plan['baseline'] else ''}"
        "each one evaluation (no training), the model loaded once",
        f"  proxy      : {plan['proxy']['annotation_path']} (the spec's dataset)",
        f"  held-out   : {held['annotation_path'] + ' (the best trial and the baseline, once each)' if held else 'none (pass --holdout ANNOTATIONS[:MEDIA])'}",
        *(f"  search     : {_describe(p)}" for p in plan["search_space"]),
        *gate_lines(plan["preflight"]),
        f"  start      : {plan['commands']['start']}",
        f"  resume     : {plan['commands']['resume']}",
        *(f"  note       : {n}" for n in plan["notes"]),
    ]


def _describe(p: dict[str, Any]) -> str:
    if p["kind"] == "categorical":
        return f"{p['key']}: one of {len(p['choices'])}: " + " | ".join(_short(c, 48) for c in p["choices"])
    return p["describe"]


@dataclass(frozen=True)
class SearchRun:
    """What best_rec.json says of the search beside the trials: the skill, the metric, the proxy set
    (annotation_path, media_dir), the held-out set, each set's records with their own system turn."""

    skill: str
    metric: str
    proxy: tuple[str, str]
    holdout: tuple[str, str] | None
    system_turns: dict[str, int]
    started: float


def write_outputs(study, settings, session: EvalSession, out_dir: Path, run: SearchRun) -> dict[str, Any]:
    """trials.parquet, history.png and best_rec.json (training's, plus the evaluate fields), schema-checked."""
    from skillbank import atomic
    from skillbank.automl.report import best_rec, validate_best_rec, write_history_plot, write_trials_table

    write_trials_table(study, out_dir / "trials.parquet")
    write_history_plot(study, out_dir / "history.png", run.metric)
    rec = best_rec(study, skill=run.skill, algorithm=settings.algorithm, metric=run.metric, storage=settings.storage, out_dir=out_dir)
    if rec:
        rec.update(_evaluate_extras(rec, study, session, out_dir, run))
        validate_best_rec(rec)
        atomic.write_json(out_dir / "best_rec.json", rec)
    return rec


def _evaluate_extras(rec: dict[str, Any], study, session: EvalSession, out_dir: Path, run: SearchRun) -> dict[str, Any]:
    """best_rec.json's evaluate fields: the proxy set, the held-out numbers (the best trial and the
    baseline evaluated once each on --holdout), and what this run cost."""
    from skillbank.specification.evaluate import EvaluateSpec
    from skillbank.specification.io import read_spec_file

    held, holdout = None, run.holdout
    if holdout is not None:
        values: dict[int, float | None] = {}
        base_no = (rec.get("baseline") or {}).get("trial_number") if (rec.get("baseline") or {}).get("metric_value") is not None else None
        records = 0
        for number in dict.fromkeys([rec["trial_number"], base_no]):
            if number is None:
                continue
            trial_dir = Path(study.trials[number].user_attrs["trial_dir"])
            spec = EvaluateSpec.model_validate(holdout_spec(read_spec_file(trial_dir / "spec.yaml"), holdout))
            doc = session.evaluate(spec, out_dir / "holdout" / trial_dir.name)
            values[number] = float(doc["primary_metric"]["value"])
            records = int(doc["num_samples"])
        held = {"annotation_path": holdout[0], "media_dir": holdout[1], "records": records,
                **({"own_system_turns": run.system_turns["held-out"]} if "held-out" in run.system_turns else {}),
                "metric_value": values[rec["trial_number"]],
                "baseline_metric_value": values.get(base_no) if base_no is not None else None,
                "results_dir": str(out_dir / "holdout")}
    best = rec["metric"]["value"]
    return {
        "action": "evaluate",
        "proxy": {"annotation_path": run.proxy[0], "media_dir": run.proxy[1],
                  **({"own_system_turns": run.system_turns["proxy"]} if "proxy" in run.system_turns else {})},
        "tied_trials": [t.number for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE" and t.value == best],
        "holdout": held,
        "cost": {"wall_s": round(time.perf_counter() - run.started, 2), "evaluate_s": round(session.seconds, 2),
                 "evaluations": session.evaluations, "samples": session.samples, "model_loads": session.pool.loads},
    }
