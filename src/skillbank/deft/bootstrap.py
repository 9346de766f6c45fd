"""`skillbank deft init`: the DEFT sets and config from what a user has (a model, a labelled pool, a
test set), so nobody splits sets by hand.

- The benchmark is the test set as given: read, never written. The loop decides adoption on it.
- Pool records that are benchmark items (same id, or a video with a benchmark video's content) are
  left out of every written set: the benchmark is frozen and DEFT's preflight refuses any leak.
- The proxy is carved from the rest of the pool with intake.split.carve (the data import's splitter):
  grouped by clip (two questions on one clip stay together), stratified by `family`, ordered by a hash
  of (seed, clip); --proxy-fraction of the clips. The pool is what is left.
- The base training set is the model's recipe's training data (skillbank_recipe.json training_data),
  or --base FILE, less every record that shares an id or video content with the benchmark. A model without
  a recipe naming data on this machine (a folder without skillbank_recipe.json, a hub id) and no --base is an
  InputError naming the folder and the file (`base_source`), said before the pool is read.
- Pool and proxy records already in the base set (training items: same video content and question,
  deft.sets.training_items) are counted and named in a warning: mining them adds nothing (curation drops
  duplicates), and a proxy of training items finds no gaps (the loop then stops with
  proxy_is_training_data); a pool that is the model's own training data usually means the wrong pool.
- Where and how rounds train: --gpus-per-node / --nodes (default: this machine's GPUs, one node) become
  the train spec's dp_shard_size / dp_replicate_size, --backend retrain.backend (default cosmos-rl with
  GPUs, local without); the train spec takes every vision setting of the model's recipe (fps or nframes,
  total_pixels, max_pixels), so rounds train at the resolution they are evaluated at.
- --path-map LOCAL=REMOTE: the sets are read here at LOCAL; deft.yaml and train.yaml name REMOTE and record
  the map (paths.map), so later commands here read them at LOCAL and the node reads them as written.
- --set KEY=VALUE: any other key of the loop's config (mining, retrain, stop), dotted as in DeftConfig and checked
  by it before anything is read or written (`config_settings`); the keys init writes from its flags are refused.
- A proxy below scoring.stats.MEASURE_MIN_RECORDS records is warned about (`proxy_size`), naming the --proxy-fraction
  that gives about that many; a pool (after the carve) smaller than mining.records_per_round x stop.max_rounds (after
  --set) too (`pool_budget`: the rule the dry run warns with), naming the --set that spreads it over the rounds.
Records are written whole, video paths as they were: deft.yaml and the train spec name the folders they
are relative to (preflight refuses a video outside its set's media folder).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.data import chat
from skillbank.deft.loop import count_families
from skillbank.deft.rules import PROXY_TRAINING_SHARE, pool_budget, pool_budget_warning, proxy_size, proxy_size_warning
from skillbank.deft.sets import RecordSet, find_overlaps, load_set, training_items
from skillbank.errors import InputError, warning
from skillbank.scoring.stats import MEASURE_MIN_RECORDS

SKILL = "tao-finetune-cosmos-reason"
SHOWN = 5


@dataclass
class InitRequest:
    model: str
    pool: str
    benchmark: str
    out: Path
    pool_media: str = ""
    benchmark_media: str = ""
    base: str | None = None
    base_media: str = ""
    proxy_fraction: float = 0.1
    seed: int = 0
    gpus_per_node: int | None = None  # None: this machine's
    nodes: int = 1
    backend: str | None = None  # None: cosmos-rl with GPUs, local without
    path_map: tuple[str, ...] = ()
    adopt_on: str | None = None
    settings: tuple[str, ...] = ()  # --set KEY=VALUE: dotted keys of DeftConfig (mining, retrain, stop)


BASE_FIX = ("pass --base FILE: the training set the model was fine-tuned on (LLaVA annotations.json; --base-media-dir DIR when its "
            "videos are relative to another folder). Every round keeps training on it, and init uses it to find the pool and proxy "
            "records that are training items; for a model not fine-tuned yet, the labelled training records you would train it on")


def base_source(req: InitRequest) -> tuple[RecordSet, str]:
    """The base training set before the benchmark is taken out: --base, else the recipe's training data. Without
    either, an InputError naming the model folder and the recipe file it lacks (nothing is guessed)."""
    from skillbank import recipe

    if req.base:
        return load_set("train", req.base, req.base_media), f"--base {req.base}"
    found = recipe.read(req.model)
    folder = Path(req.model).expanduser()
    if found is None:
        what = (f"the model folder {folder} has no {recipe.RECIPE_FILE}" if folder.is_dir() else
                f"the model {req.model} is no local folder, so there is no {recipe.RECIPE_FILE}")
        raise InputError(f"no base training set: {what} (the file `skillbank export` and training runs write, naming the model's training "
                         "data), and --base is not given", where=str(folder / recipe.RECIPE_FILE) if folder.is_dir() else "--model", fix=BASE_FIX)
    path = (found.recipe.get("training_data") or {}).get("annotation_path")
    if not path or not Path(path).is_file():
        why = f"names {path}, which is not on this machine" if path else "names no training data"
        raise InputError(f"no base training set: the model's recipe ({found.source}) {why}, and --base is not given", where=found.source, fix=BASE_FIX)
    media = req.base_media or _run_media(req.model)
    return load_set("train", path, media), f"the recipe's training data ({found.source})"


def _run_media(model: str) -> str:
    """A run's export (…/<run>/safetensors/step_N): the media folder its kept spec trained from."""
    from skillbank import recipe

    folder = Path(model).expanduser()
    if folder.parent.name != "safetensors":
        return ""
    spec = recipe.run_spec(folder.parent.parent) or {}
    return str(((spec.get("custom") or {}).get("train_dataset") or {}).get("media_path") or "")


def carve_proxy(pool: RecordSet, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(pool indices, proxy indices): the data import's clip-grouped, family-stratified carve."""
    from skillbank.intake.items import Item
    from skillbank.intake.split import carve

    # the clip as the record names it (relative to the media folder): the carve is the same on every machine
    items = [Item(id=str(r.get("id", i)), where=f"{pool.annotation_path} record {i}", video=pool.video(r), clip=str(r.get("video")),
                  conversations=[], extra={"family": r.get("family")}) for i, r in enumerate(pool.records)]
    to_proxy = carve(items, fraction, seed)
    proxy = [i for i, item in enumerate(items) if item.clip in to_proxy]
    return [i for i, item in enumerate(items) if item.clip not in to_proxy], proxy


def _named(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


def plan_sets(req: InitRequest) -> dict[str, Any]:
    """Read and split everything; nothing is written."""
    if not 0 < req.proxy_fraction < 1:
        raise InputError(f"--proxy-fraction must be between 0 and 1, not {req.proxy_fraction}", where="--proxy-fraction", fix="e.g. 0.1")
    base, base_from = base_source(req)  # first: a missing base set is said before the pool's videos are hashed
    pool = load_set("pool", req.pool, req.pool_media)
    bench = load_set("benchmark", req.benchmark, req.benchmark_media)
    if not bench.records:
        raise InputError("the benchmark has no records", where=req.benchmark, fix="pass the test set the loop is judged on")
    leaks = find_overlaps(bench, [pool])
    leaked = {o.index for o in leaks}
    keep = [i for i in range(len(pool.records)) if i not in leaked]
    if len({pool.video(pool.records[i]) for i in keep}) < 2:
        raise InputError(f"the pool has {len(keep)} record(s) that are not benchmark items, on fewer than 2 clips: nothing to carve a proxy from",
                         where=req.pool, fix="pass a pool with more labelled clips than the benchmark holds")
    kept = RecordSet("pool", pool.annotation_path, pool.media_dir, [pool.records[i] for i in keep])
    pool_idx, proxy_idx = carve_proxy(kept, req.proxy_fraction, req.seed)
    base_leaks = {o.index for o in find_overlaps(bench, [base])}
    base_records = [r for i, r in enumerate(base.records) if i not in base_leaks]
    if not base_records:
        raise InputError(f"every record of the base training set ({base.annotation_path}) shares an id or a video with the benchmark",
                         where="--base", fix="pass --base FILE with training records that are not benchmark items")
    trained = training_items(kept, base, indices=pool_idx, train_records=base_records)
    proxy_trained = training_items(kept, base, indices=proxy_idx, train_records=base_records)
    warnings = []
    if leaks:
        warnings.append(f"{len(leaked)} pool record(s) are benchmark items (same id or video content) and were left out: "
                        + _named([str(pool.records[i].get('id', i)) for i in sorted(leaked)]))
    if base_leaks:
        warnings.append(f"{len(base_leaks)} record(s) of the base training set share an id or a video with the benchmark and were left out "
                        "(the model may have seen those benchmark clips: its benchmark accuracy is optimistic)")
    if trained:
        share = len(trained) / len(pool_idx)
        warnings.append(f"{len(trained)} of {len(pool_idx)} pool record(s) ({share:.0%}) are already in the base training set (same video "
                        f"and question): {_named(trained)}" + ("; the pool is already the model's training data" if share >= 0.5 else "")
                        + "; mining them adds nothing (curation drops records already in training)")
    if proxy_trained:
        share = len(proxy_trained) / len(proxy_idx)
        mostly = share >= PROXY_TRAINING_SHARE
        warnings.append(warning(f"{len(proxy_trained)} of {len(proxy_idx)} proxy record(s) ({share:.0%}) are already in the base training set "
                                f"(same video and question): {_named(proxy_trained)}; the model answers what it was trained on, so the proxy "
                                "finds few gaps" + (f" (>= {PROXY_TRAINING_SHARE:.0%}: a round without gaps stops with proxy_is_training_data)"
                                                    if mostly else ""), "pass a pool of held-out labelled records" if mostly else ""))
    size = proxy_size(len(proxy_idx))
    small = proxy_size_warning(size, _larger_proxy(req.proxy_fraction, len(proxy_idx), len(keep)))
    warnings += [small] if small else []
    overlap = {role: {"count": len(ids), "of": n, "share": round(len(ids) / n, 4) if n else 0.0, "ids": ids}
               for role, ids, n in (("proxy", proxy_trained, len(proxy_idx)), ("pool", trained, len(pool_idx)))}
    return {"pool": (kept, pool_idx), "proxy": (kept, proxy_idx), "benchmark": bench, "base": (base, base_records, base_from),
            "leaks": leaks, "base_leaks": sorted(base_leaks), "training_overlap": overlap, "proxy_size": size, "warnings": warnings}


def _larger_proxy(fraction: float, proxy: int, pool: int) -> str:
    """How to carve a proxy of MEASURE_MIN_RECORDS records: the --proxy-fraction that gives about that many (the carve
    takes whole clips), or a larger pool when that would take more than half of it."""
    want = math.ceil(fraction * MEASURE_MIN_RECORDS / max(proxy, 1) * 100) / 100
    if want <= 0.5:
        return (f"pass --proxy-fraction {want:g} (about {MEASURE_MIN_RECORDS} of the pool's {pool:,} records) or a pool with more labelled clips")
    return (f"the pool's {pool:,} records cannot give {MEASURE_MIN_RECORDS} to the proxy and keep most to mine: pass a larger pool "
            "(or carve the proxy with --proxy-fraction up to 0.5 and accept the noise)")


def _pool_fix(budget: dict[str, Any]) -> str:
    """How to make the pool last the rounds the config allows: more records, or fewer a round (the --set that spreads
    these records over stop.max_rounds), or fewer rounds."""
    n, rounds = budget["records"], budget["max_rounds"]
    spread = n // rounds
    fewer = (f"--set mining.records_per_round={spread} (the {n} records over {rounds} rounds)" if spread else
             f"--set mining.records_per_round={n} --set stop.max_rounds=1")
    return f"pass a pool with more labelled records, or {fewer}"


def _hardware(req: InitRequest) -> tuple[int, str, str]:
    """(GPUs per node, how that was found, backend): --gpus-per-node, else this machine's; --backend, else
    the local backend on CPU and cosmos-rl with GPUs."""
    if req.gpus_per_node is not None:
        if req.gpus_per_node < 0:
            raise InputError(f"--gpus-per-node {req.gpus_per_node} is below 0", where="--gpus-per-node", fix="0 (CPU ranks) or more")
        gpus, how = req.gpus_per_node, "--gpus-per-node"
    else:
        from skillbank.preflight.env_checks import visible_gpus

        gpus, how = visible_gpus()
    backend = req.backend or ("cosmos-rl" if gpus else "local")
    if req.nodes < 1:
        raise InputError(f"--nodes {req.nodes} is below 1", where="--nodes", fix="1 or more")
    if backend == "cosmos-rl" and not gpus:
        raise InputError("cosmos-rl trains on GPUs, and the rounds get none (--gpus-per-node 0, or no GPU here)", where="--backend",
                         fix="pass --gpus-per-node N for the node the rounds train on, or --backend local (CPU ranks)")
    if backend == "local" and req.nodes > 1:
        raise InputError("the local backend (torchrun + FSDP2) trains on one node", where="--nodes", fix="--backend cosmos-rl for several nodes, or --nodes 1")
    return gpus, how, backend


def train_spec(req: InitRequest, base_json: Path, base_media: str, records: int, gpus: int) -> tuple[Any, list[Any]]:
    """The base train spec: the template, the model, the base set, the recipe's vision (every key it
    records: the resolution evaluation uses) and prompt, --nodes x `gpus` (CPU: one rank, float32);
    batches fitted to the base set's `records` (as the loop fits each round's; built before anything is written)."""
    from skillbank import recipe
    from skillbank.runs import fitting, steps
    from skillbank.specification.build import build_spec

    found = recipe.read(req.model)
    sets = [f"policy.model_name_or_path={req.model}", f"custom.train_dataset.annotation_path={base_json}",
            f"custom.train_dataset.media_path={os.path.abspath(base_media)}", "validation.enable=false",
            f"train.output_dir={req.out / 'run' / 'train'}", f"results_dir={req.out / 'run'}",
            f"policy.parallelism.dp_shard_size={max(1, gpus)}", f"policy.parallelism.dp_replicate_size={req.nodes}"]
    if not gpus:
        sets += ["train.param_dtype=float32", "policy.model_gradient_checkpointing=false", "train.train_policy.dataloader_num_workers=0"]
    vision = (found.recipe.get("vision") or {}) if found else {}
    if vision.get("nframes"):
        sets += [f"custom.vision.nframes={vision['nframes']}"]
    elif vision.get("fps"):
        sets += [f"custom.vision.fps={vision['fps']}"]
    sets += [f"custom.vision.{key}={vision[key]}" for key in ("total_pixels", "max_pixels") if vision.get(key)]
    if found and found.recipe.get("system_prompt"):
        sets.append(f"custom.system_prompt={found.recipe['system_prompt']}")
    spec = build_spec(SKILL, "train", sets).spec
    fits = fitting.fit_train_batches(spec, steps.train_count(spec, records))
    return fitting.apply_fits(spec, fits), fits


def eval_config(gpus: int) -> dict[str, Any]:
    """What every DEFT evaluation shares; vision, prompt and answer format stay null: the model's recipe fills them."""
    return {"model": {"dtype": "auto"}, "num_gpus": min(gpus, 1), "evaluation": {"batch_size": 16 if gpus else 8}}


# keys deft init writes from its own flags (a --set of them is refused, naming the flag) and keys with a flag of their own
WRITTEN = {"model": "--model", "pool": "--pool / --pool-media-dir", "proxy": "--proxy-fraction / --seed (carved from --pool)",
           "benchmark": "--benchmark / --benchmark-media-dir", "train_spec": "--out", "eval_config": "--out", "output_dir": "--out",
           "paths": "--path-map"}
FLAGGED = {"stop.adopt_on": ("adopt_on", "--adopt-on"), "retrain.backend": ("backend", "--backend")}
KEYS_AT = "the DEFT config's keys: skills/applications/tao-run-deft/references/parameters.md (e.g. stop.max_rounds, mining.records_per_round)"


def config_settings(req: InitRequest) -> dict[str, Any]:
    """--set KEY=VALUE as {dotted key: value}, each checked now (before any set is read or written) by DeftConfig: an
    unknown key, a value of the wrong type or out of range is an InputError naming the dotted key. stop.adopt_on and
    retrain.backend fill --adopt-on / --backend (the same value twice is fine, two values are refused)."""
    from skillbank.specification.deft import DeftConfig
    from skillbank.specification.overrides import apply_overrides, coerce, resolve_all
    from skillbank.specification.validation import validate

    settings = resolve_all(DeftConfig, req.settings, keys_at=KEYS_AT)
    for key in settings:
        flag = WRITTEN.get(key.split(".")[0])
        if flag:
            raise InputError(f"--set {key}: deft init writes {key} itself, from {flag}", where=key,
                             fix=f"pass {flag} instead (after init, edit the written deft.yaml if the loop must read another file)")
    for key, (attr, flag) in FLAGGED.items():
        if key in settings:
            value, given = coerce(DeftConfig, key, settings[key]), getattr(req, attr)
            if given is not None and given != value:
                raise InputError(f"{flag} {given} and --set {key}={value} disagree", where=key, fix="pass one of them")
            setattr(req, attr, value)
    trial = DeftConfig().model_dump(mode="json")
    apply_overrides(DeftConfig, trial, settings)
    validate(DeftConfig, trial, source="--set")
    return settings


def _check_family(family: str | None, bench: RecordSet) -> None:
    """--adopt-on names a family of the benchmark's records (the loop adopts rounds on its accuracy)."""
    families = sorted({str(r["family"]) for r in bench.records if r.get("family") is not None})
    if family is not None and family not in families:
        raise InputError(f"--adopt-on {family!r} is no family of the benchmark (its records' families: {', '.join(families) or 'none'})",
                         where="--adopt-on", fix=f"one of: {', '.join(families)}" if families else "give the benchmark's records a `family`")


def for_node(paths: Any, data: dict[str, Any], model: Any) -> tuple[dict[str, Any], list[str]]:
    """A config or spec dict as the node reads it: every path key REMOTE, the map recorded (paths.map);
    unchanged without a map. Notes name the paths no LOCAL covers."""
    if not paths:
        return data, []
    paths.check_used(data, model)
    remote, notes = paths.remote(data, model)
    remote["paths"] = {"map": paths.items()}
    return remote, notes


def init(req: InitRequest) -> dict[str, Any]:
    """Write DIR/{pool,proxy,base_train}.json, train.yaml, eval.yaml and deft.yaml; return what was written."""
    from skillbank.specification.deft import DeftConfig
    from skillbank.specification.io import write_spec
    from skillbank.specification.overrides import apply_overrides, get_dotted
    from skillbank.specification.pathmap import PathMap
    from skillbank.specification.train import TrainSpec
    from skillbank.specification.validation import validate

    out = req.out.resolve()
    if (out / "run" / "state.json").is_file():
        raise InputError(f"{out / 'run'} holds a DEFT run of an earlier init; new sets would change it under its state", where="--out",
                         fix="choose another --out (or remove that run)")
    req.out = out
    map_ = PathMap.parse(req.path_map)
    settings = config_settings(req)
    gpus, how, backend = _hardware(req)
    planned = plan_sets(req)
    bench = planned["benchmark"]
    _check_family(req.adopt_on, bench)
    pool, pool_idx = planned["pool"]
    _, proxy_idx = planned["proxy"]
    base, base_records, base_from = planned["base"]
    paths = {"pool": out / "pool.json", "proxy": out / "proxy.json", "base": out / "base_train.json"}
    spec, fits = train_spec(req, paths["base"], base.media_dir, len(base_records), gpus)
    data = {
        "model": req.model,
        "pool": {"annotation_path": str(paths["pool"]), "media_dir": os.path.abspath(pool.media_dir)},
        "proxy": {"annotation_path": str(paths["proxy"]), "media_dir": os.path.abspath(pool.media_dir)},
        "benchmark": {"annotation_path": os.path.abspath(bench.annotation_path), "media_dir": os.path.abspath(bench.media_dir)},
        "train_spec": str(out / "train.yaml"), "eval_config": str(out / "eval.yaml"),
        "retrain": {"backend": backend}, "stop": {"adopt_on": req.adopt_on}, "output_dir": str(out / "run"),
    }
    apply_overrides(DeftConfig, data, settings)
    config = validate(DeftConfig, data, source="--set")
    budget = pool_budget(len(pool_idx), config.mining.records_per_round, config.stop.max_rounds)  # after --set, as the loop reads them
    short = pool_budget_warning(budget, _pool_fix(budget))
    spec_data, spec_notes = for_node(map_, spec.model_dump(mode="json"), TrainSpec)
    config_data, config_notes = for_node(map_, config.model_dump(mode="json"), DeftConfig)
    atomic.write_json(paths["pool"], [pool.records[i] for i in pool_idx], indent=None)
    atomic.write_json(paths["proxy"], [pool.records[i] for i in proxy_idx], indent=None)
    atomic.write_json(paths["base"], base_records, indent=None)
    write_spec(out / "train.yaml", spec_data, TrainSpec)
    write_spec(out / "eval.yaml", eval_config(gpus))
    write_spec(out / "deft.yaml", config_data, DeftConfig)  # last: a deft.yaml names sets that are all there
    par = spec.policy.parallelism
    return {
        "ok": True, "config": str(out / "deft.yaml"),
        "sets": {"pool": {"path": str(paths["pool"]), "records": len(pool_idx)},
                 "proxy": {"path": str(paths["proxy"]), "records": len(proxy_idx), "fraction": req.proxy_fraction, "seed": req.seed,
                           "families": count_families([pool.records[i] for i in proxy_idx])},
                 "benchmark": {"path": os.path.abspath(bench.annotation_path), "records": len(bench.records), "written": False},
                 "base": {"path": str(paths["base"]), "records": len(base_records), "from": base_from,
                          "left_out_benchmark": len(planned["base_leaks"])}},
        "pool_left_out_benchmark": [o.to_dict() for o in planned["leaks"]],
        "training_overlap": planned["training_overlap"], "proxy_size": planned["proxy_size"], "pool_budget": budget,
        "train_spec": str(out / "train.yaml"), "eval_config": str(out / "eval.yaml"),
        "rounds_train_on": {"backend": backend, "nodes": par.dp_replicate_size, "gpus_per_node": gpus, "gpus_found_by": how,
                            "ranks_per_node": par.dp_shard_size, "vision": spec.custom.vision.model_dump(mode="json")},
        "adopt_on": req.adopt_on, "path_map": map_.items(),
        "set": {key: get_dotted(config.model_dump(mode="json"), key) for key in settings},
        "fitted": [f.to_dict() for f in fits], "warnings": [*planned["warnings"], *([short] if short else []),
                                                             *dict.fromkeys(config_notes + spec_notes)],
        "next": f"skillbank deft --config {out / 'deft.yaml'} --dry-run" + (" --runs-on node" if map_ or req.gpus_per_node is not None else ""),
    }
