"""Everything checked before round 1: the config names every input, the sets exist and pass the
record checks of `skillbank preflight` (evaluate action per set, train action for the base spec),
the benchmark is disjoint from pool, proxy and base train set (ids and media content), and the
budgets fit (the pool can feed a round; training makes at least one step). The proxy and pool
records that are training items of the base train set are counted (`training_overlap`), and a proxy
too small to measure an accuracy is warned about (`proxy_size`, scoring.stats.MEASURE_MIN_RECORDS), and so is a
pool smaller than mining.records_per_round x stop.max_rounds (`pool_budget`: the rule `deft init` warns with too).

`runs_on` is preflight's: "node" (a dry run for another machine, a DEFT job) lists the environment
findings (model, HF_TOKEN, redis-server, GPUs, disk) as "check on the node" instead of failing; the
spec and the data are checked all the same. `allocate` puts the train spec on a job's allocation
(nodes, GPUs per node): every round's training inherits it, and `allocation_change` says when that
changes the global batch (runs.fitting.batch_change, the arithmetic `spec --from` reports with)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbank.deft.rules import pool_budget, pool_budget_warning
from skillbank.deft.sets import SETS, RecordSet, check_disjoint, eval_spec_for, load_set, overlap_lines, training_overlap
from skillbank.errors import InputError, warning
from skillbank.specification.deft import DeftConfig

SKILL = "tao-finetune-cosmos-reason"
SHOWN_IDS = 20  # training items named per set in the summary (the counts are whole)


def required(config: DeftConfig) -> None:
    empty = [k for k in ("model", "train_spec", "eval_config") if not getattr(config, k)]
    empty += [f"{s}.annotation_path" for s in SETS if not getattr(config, s).annotation_path]
    if empty:
        raise InputError(f"the DEFT config leaves {', '.join(empty)} empty", where=empty[0],
                         fix="fill them in (template: skills/applications/tao-run-deft/references/spec_template_deft.yaml)")


def allocate(spec: Any, gpus_per_node: int | None, nodes: int | None) -> Any:
    """The train spec on an allocation: dp_replicate_size = nodes, dp_shard_size = gpus_per_node / (tp*cp*pp)
    (None: the spec's own; 0 GPUs: a CPU job, whose ranks are the spec's dp_shard*tp*cp*pp)."""
    par = spec.policy.parallelism
    model_parallel = par.tp_size * par.cp_size * par.pp_size
    if gpus_per_node and gpus_per_node % model_parallel:
        raise InputError(f"--gpus-per-node {gpus_per_node} is not a multiple of tp*cp*pp = {model_parallel} of the train spec",
                         where="--gpus-per-node", fix=f"ask for a multiple of {model_parallel} GPUs per node, or change the train spec's tp/cp/pp")
    changes = {**({"dp_replicate_size": nodes} if nodes else {}), **({"dp_shard_size": gpus_per_node // model_parallel} if gpus_per_node else {})}
    if not changes:
        return spec
    from skillbank.specification.validation import validate

    data = spec.model_dump(mode="json")
    data["policy"]["parallelism"].update(changes)
    return validate(type(spec), data, source="the job's allocation")


def allocation_change(config: DeftConfig, spec: Any, allocated: Any, records: int) -> Any:
    """The BatchChange (runs.fitting) of the base train spec put on an allocation: old and new global batch, the
    optimizer steps per epoch at the base train set's `records` (after its validation split) and the per-rank batch
    that keeps the old global batch; None when the allocation changes neither."""
    from skillbank.runs.fitting import batch_change
    from skillbank.runs.steps import train_count

    old, par = spec.policy.parallelism, allocated.policy.parallelism
    gpus = par.dp_shard_size * par.tp_size * par.cp_size * par.pp_size
    keys = ", ".join(f"{k} {getattr(old, k)} -> {getattr(par, k)}" for k in ("dp_shard_size", "dp_replicate_size") if getattr(old, k) != getattr(par, k))
    what = f"the allocation ({par.dp_replicate_size} node(s) x {gpus} GPU(s) per node) changes every round's train spec {config.train_spec} ({keys})"
    return batch_change(spec, allocated, train_count(spec, records).train, what)


def load_inputs(config: DeftConfig, paths: Any = None) -> dict[str, Any]:
    """The sets, the base train spec and the evaluate config, read and validated (no model loaded).
    `paths`: a path map whose REMOTE paths the train spec names (its own recorded map joins it)."""
    from skillbank.specification.io import LoadedSpec, read_spec_file
    from skillbank.specification.train import TrainSpec
    from skillbank.specification.validation import validate

    required(config)
    sets = {s: load_set(s, getattr(config, s).annotation_path, getattr(config, s).media_dir) for s in SETS}
    loaded = LoadedSpec.read(config.train_spec)
    train_map = loaded.recorded_map().with_flags(paths.items() if paths else ())
    train_spec = validate(TrainSpec, train_map.local(loaded.raw(), TrainSpec), source=config.train_spec)
    td = train_spec.custom.train_dataset
    sets["train"] = load_set("train", td.annotation_path, td.media_path)
    eval_config = read_spec_file(config.eval_config)
    eval_spec_for(eval_config, model=config.model, data=sets["proxy"], results_dir="x", source=config.eval_config)
    return {"sets": sets, "train_spec": train_spec, "eval_config": eval_config}


def _line(role: str, f: Any) -> str:
    return f"{role}: {f.where + ': ' if f.where else ''}{f.message}"


def _record_checks(config: DeftConfig, inputs: dict[str, Any], runs_on: str) -> tuple[list[str], list[str]]:
    """(errors, environment findings to check on the node) of `skillbank preflight` on every set and the train spec."""
    from skillbank.preflight.run import run_preflight

    errors, on_node = [], []
    for role in SETS:
        s: RecordSet = inputs["sets"][role]
        spec = eval_spec_for(inputs["eval_config"], model=config.model, data=s, results_dir="unused", source=config.eval_config)
        report = run_preflight(skill=SKILL, action="evaluate", spec=spec.model_dump(mode="json"), runs_on=runs_on)
        errors += [_line(role, f) for f in report.errors]
        on_node += [_line(role, f) for f in report.on_node]
    train = inputs["train_spec"].model_dump(mode="json")
    train["policy"]["model_name_or_path"] = config.model
    report = run_preflight(skill=SKILL, action="train", spec=train, backend=config.retrain.backend, runs_on=runs_on)
    errors += [_line("train_spec", f) for f in report.errors]
    on_node += [_line("train_spec", f) for f in report.on_node]
    return errors, list(dict.fromkeys(on_node))  # the model's finding once, not once per set


def _budgets(config: DeftConfig, inputs: dict[str, Any]) -> tuple[list[str], list[str], dict[str, Any]]:
    """(errors, warnings, the pool's budget: deft.rules.pool_budget)."""
    pool = len(inputs["sets"]["pool"].records)
    errors, warnings = [], []
    if pool == 0:
        errors.append("pool: no records to mine")
    budget = pool_budget(pool, config.mining.records_per_round, config.stop.max_rounds)
    short = pool_budget_warning(budget, "point pool.annotation_path at more labelled records, or lower mining.records_per_round or stop.max_rounds")
    warnings += [short] if short else []
    for role in ("proxy", "benchmark"):
        if not inputs["sets"][role].records:
            errors.append(f"{role}: no records")
    family = config.stop.adopt_on
    if family is not None:
        families = sorted({str(r["family"]) for r in inputs["sets"]["benchmark"].records if r.get("family") is not None})
        if family not in families:
            errors.append(f"stop.adopt_on: {family!r} is no family of the benchmark (its records' families: {', '.join(families) or 'none'})")
    return errors, warnings, budget


def run(config: DeftConfig, *, records: bool = True, runs_on: str = "here", gpus_per_node: int | None = None,
        nodes: int | None = None, paths: Any = None) -> dict[str, Any]:
    """Raise InputError listing every problem; return the inputs and a summary when all pass.
    gpus_per_node / nodes: the allocation every round trains on (`allocate`)."""
    from skillbank.deft.rules import PROXY_TRAINING_SHARE, proxy_size, proxy_size_warning

    inputs = load_inputs(config, paths)
    base = inputs["train_spec"]
    inputs["train_spec"] = allocate(base, gpus_per_node, nodes)
    sets = inputs["sets"]
    check_disjoint(sets["benchmark"], [sets["pool"], sets["proxy"], sets["train"]])
    errors, warnings, budget = _budgets(config, inputs)
    on_node: list[str] = []
    if records:
        found, on_node = _record_checks(config, inputs, runs_on)
        errors += found
    if errors:
        raise InputError(f"DEFT preflight found {len(errors)} error(s); nothing was run:\n    " + "\n    ".join(errors[:20]),
                         where=str(Path(config.output_dir)),
                         fix="fix them and run `skillbank deft --config FILE --dry-run` again (a config for another machine: "
                             "--dry-run --runs-on node lists the environment's findings as 'check on the node')")
    overlap = training_overlap(sets, sets["train"])
    warnings += overlap_lines(overlap, f"the base train set ({sets['train'].annotation_path})")
    if overlap["proxy"]["share"] >= PROXY_TRAINING_SHARE:
        warnings.append(warning(f"the proxy set is mostly training data ({overlap['proxy']['share']:.0%} >= {PROXY_TRAINING_SHARE:.0%}): "
                                "a round that finds no gaps stops with proxy_is_training_data", "carve the proxy from held-out records"))
    size = proxy_size(len(sets["proxy"].records))
    small = proxy_size_warning(size, f"point proxy.annotation_path at {size['min_records']} or more held-out labelled records "
                                     "(`skillbank deft init` carves one: a larger --proxy-fraction)")
    warnings += [small] if small else []
    change = allocation_change(config, base, inputs["train_spec"], len(sets["train"].records))
    warnings += [change.line()] if change else []
    par = inputs["train_spec"].policy.parallelism
    inputs["summary"] = {"ok": True, "records": {k: len(v.records) for k, v in sets.items()}, "warnings": warnings,
                         "benchmark_disjoint": True, "training_overlap": {k: {**v, "ids": v["ids"][:SHOWN_IDS]} for k, v in overlap.items()},
                         "proxy_size": size, "pool_budget": budget, "batch_change": change.to_dict() if change else None, "runs_on": runs_on, "check_on_node": on_node,
                         "rounds_train_on": {"backend": config.retrain.backend, "nodes": par.dp_replicate_size,
                                             "ranks_per_node": par.dp_shard_size * par.tp_size * par.cp_size * par.pp_size}}
    return inputs
