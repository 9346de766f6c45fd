"""Everything checked before round 1: the config names every input, the sets exist and pass the
record checks of `skillbank preflight` (evaluate action per set, train action for the base spec),
the benchmark is disjoint from pool, proxy and base train set (ids and media content), and the
budgets fit (the pool can feed a round; training makes at least one step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbank.deft.sets import SETS, RecordSet, check_disjoint, eval_spec_for, load_set
from skillbank.errors import InputError
from skillbank.specification.deft import DeftConfig

SKILL = "tao-finetune-cosmos-reason"


def required(config: DeftConfig) -> None:
    empty = [k for k in ("model", "train_spec", "eval_config") if not getattr(config, k)]
    empty += [f"{s}.annotation_path" for s in SETS if not getattr(config, s).annotation_path]
    if empty:
        raise InputError(f"the DEFT config leaves {', '.join(empty)} empty", where=empty[0],
                         fix="fill them in (template: skills/applications/tao-run-deft/references/spec_template_deft.yaml)")


def load_inputs(config: DeftConfig) -> dict[str, Any]:
    """The sets, the base train spec and the evaluate config, read and validated (no model loaded)."""
    from skillbank.specification.io import load_spec, read_spec_file
    from skillbank.specification.train import TrainSpec

    required(config)
    sets = {s: load_set(s, getattr(config, s).annotation_path, getattr(config, s).media_dir) for s in SETS}
    train_spec = load_spec(config.train_spec, TrainSpec)
    td = train_spec.custom.train_dataset
    sets["train"] = load_set("train", td.annotation_path, td.media_path)
    eval_config = read_spec_file(config.eval_config)
    eval_spec_for(eval_config, model=config.model, data=sets["proxy"], results_dir="x", source=config.eval_config)
    return {"sets": sets, "train_spec": train_spec, "eval_config": eval_config}


def _record_checks(config: DeftConfig, inputs: dict[str, Any]) -> list[str]:
    from skillbank.preflight.run import run_preflight

    errors = []
    for role in SETS:
        s: RecordSet = inputs["sets"][role]
        spec = eval_spec_for(inputs["eval_config"], model=config.model, data=s, results_dir="unused", source=config.eval_config)
        report = run_preflight(skill=SKILL, action="evaluate", spec=spec.model_dump(mode="json"))
        errors += [f"{role}: {f.where + ': ' if f.where else ''}{f.message}" for f in report.errors]
    train = inputs["train_spec"].model_dump(mode="json")
    train["policy"]["model_name_or_path"] = config.model
    report = run_preflight(skill=SKILL, action="train", spec=train, backend=config.retrain.backend)
    errors += [f"train_spec: {f.where + ': ' if f.where else ''}{f.message}" for f in report.errors]
    return errors


def _budgets(config: DeftConfig, inputs: dict[str, Any]) -> tuple[list[str], list[str]]:
    pool = len(inputs["sets"]["pool"].records)
    errors, warnings = [], []
    if pool == 0:
        errors.append("pool: no records to mine")
    need = config.mining.records_per_round * config.stop.max_rounds
    if 0 < pool < need:
        warnings.append(f"pool: {pool} records < mining.records_per_round x stop.max_rounds ({need}); the loop stops when it runs dry")
    for role in ("proxy", "benchmark"):
        if not inputs["sets"][role].records:
            errors.append(f"{role}: no records")
    family = config.stop.adopt_on
    if family is not None:
        families = sorted({str(r["family"]) for r in inputs["sets"]["benchmark"].records if r.get("family") is not None})
        if family not in families:
            errors.append(f"stop.adopt_on: {family!r} is no family of the benchmark (its records' families: {', '.join(families) or 'none'})")
    return errors, warnings


def run(config: DeftConfig, *, records: bool = True) -> dict[str, Any]:
    """Raise InputError listing every problem; return the inputs and a summary when all pass."""
    inputs = load_inputs(config)
    sets = inputs["sets"]
    check_disjoint(sets["benchmark"], [sets["pool"], sets["proxy"], sets["train"]])
    errors, warnings = _budgets(config, inputs)
    if records:
        errors += _record_checks(config, inputs)
    if errors:
        raise InputError(f"DEFT preflight found {len(errors)} error(s); nothing was run:\n    " + "\n    ".join(errors[:20]),
                         where=str(Path(config.output_dir)), fix="fix them and run `skillbank deft --config FILE --dry-run` again")
    inputs["summary"] = {"ok": True, "records": {k: len(v.records) for k, v in sets.items()}, "warnings": warnings,
                         "benchmark_disjoint": True}
    return inputs
