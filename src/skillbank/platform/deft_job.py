"""A DEFT loop as one job: `skillbank submit --action deft --platform local|docker|slurm --config deft.yaml`.

- The config is read here, its recorded path map (`deft init --path-map`) and --path-map applied: the
  sets, the base train spec and the model are checked at LOCAL. The job folder's `deft.yaml` is the
  config as the node reads it (every path absolute, REMOTE under a map, no map recorded); the job folder
  is <output_dir>/jobs/<id>/, beside the loop's state.json.
- The job's shape is the base train spec's (dp_shard*tp*cp*pp GPUs on one node, or as many CPU ranks with
  --gpus-per-node 0); flags confirm it as for a train job. The job runs
  `skillbank deft --config "$JOB_DIR/deft.yaml" --resume --nodes 1 --gpus-per-node G`: every round's
  train spec gets the job's allocation, and every attempt (a Slurm requeue, a re-submit of the same
  config) continues the loop at its interrupted stage (state.json; an interrupted round's training from
  its newest complete checkpoint). `--resume` on an output_dir without a state.json starts the loop.
- The gate is the DEFT preflight (sets, every record, benchmark disjointness, budgets, training items),
  the environment checked where the job runs (`runs_on`: here for a local launch, else "check on the
  node"); the job's first step checks the environment on the node with the base train spec
  (`skillbank preflight --only env --runs-on here`, as every rendered job does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillbank import modelref
from skillbank.errors import InputError
from skillbank.platform.context import DeftJob, JobContext, absolute_paths


def _folders(data: dict[str, Any]) -> tuple[tuple[str, bool], ...]:
    """(folder, read_only) the loop reads and writes, as the node names them: each set's file folder and
    media folder, the specs' folders and a local model read-only, output_dir read-write."""
    out: list[tuple[str, bool]] = []
    for role in ("pool", "proxy", "benchmark"):
        s = data.get(role) or {}
        out += [(str(Path(s["annotation_path"]).parent), True)] if s.get("annotation_path") else []
        out += [(s["media_dir"], True)] if s.get("media_dir") else []
    out += [(str(Path(data[k]).parent), True) for k in ("train_spec", "eval_config") if data.get(k)]
    if data.get("model") and modelref.parse(data["model"]).path is not None:
        out.append((data["model"], True))
    return (*dict.fromkeys(out), (data["output_dir"], False))


def prepare(config_path: str, *, backend: str | None, paths: Any, recorded_map: bool,
            cwd: Path | None = None) -> tuple[DeftJob, Any, str, Any, str]:
    """(the job's DeftJob, the config as this machine reads it, the base train spec's path here, the path
    map, the backend: retrain.backend). `paths`: the --path-map flags; `recorded_map`: the config's own map joins them."""
    from skillbank.specification.deft import DeftConfig
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.pathmap import PathMap
    from skillbank.specification.validation import validate

    cwd = (cwd or Path.cwd()).resolve()
    loaded = LoadedSpec.read(config_path)
    flags = paths or PathMap(cwd=cwd)
    map_ = loaded.recorded_map().with_flags(flags.items()) if recorded_map else flags
    local = map_.local(loaded.raw(), DeftConfig) if map_ else loaded.model(DeftConfig).model_dump(mode="json")
    absolute_paths(local, validate(DeftConfig, local, source=config_path).model_dump(mode="json"), DeftConfig, cwd)  # as meant from here
    config = validate(DeftConfig, local, source=config_path)
    if not config.train_spec:
        raise InputError("the DEFT config names no train_spec: the job's shape and every round's training come from it", where="train_spec",
                         fix="skillbank deft init ... writes one (train.yaml)")
    if backend is not None and backend != config.retrain.backend:
        raise InputError(f"--backend {backend} disagrees with the config: retrain.backend is {config.retrain.backend}", where="--backend",
                         fix="drop --backend (the rounds train with retrain.backend), or change retrain.backend (`skillbank deft init --backend`)")
    node = config.model_dump(mode="json")
    if map_:
        map_.check_used(node, DeftConfig)
        node, _ = map_.remote(node, DeftConfig)
    node.pop("paths", None)  # the node's view records no map
    job = DeftJob(config=str((cwd / config_path).resolve()), output_dir=node["output_dir"], train_spec=node["train_spec"], data=node,
                  folders=_folders(node))
    return job, config, config.train_spec, map_, config.retrain.backend


def gate(ctx: JobContext, config: Any, *, runs_on: str) -> dict[str, Any]:
    """The DEFT preflight on the job's allocation (raises InputError: nothing is submitted); the record's preflight block."""
    from skillbank.deft import preflight

    inputs = preflight.run(config, records=True, runs_on=runs_on, gpus_per_node=ctx.gpus_per_node, nodes=ctx.nodes,
                           paths=ctx.paths or None)
    summary = inputs["summary"]
    return {"ran": True, "ok": True, "errors": 0, "warnings": len(summary["warnings"]), "runs_on": runs_on,
            "check_on_node": summary["check_on_node"], "deft": summary}


def notes(ctx: JobContext, pre: dict[str, Any]) -> list[str]:
    """What the record says about a deft job: where rounds train, how an attempt resumes, the gate's warnings."""
    shape = f"{ctx.ranks} CPU rank(s)" if ctx.cpu_only else f"{ctx.gpus_per_node} GPU(s)"
    out = [f"the DEFT loop runs in {ctx.deft.output_dir if ctx.deft else '?'}; every round trains with {ctx.backend} on this job's node ({shape}); "
           "every attempt runs `skillbank deft --resume`: a requeued or re-submitted job continues at its round's interrupted stage"]
    return [*out, *(f"DEFT preflight: {w}" for w in (pre.get("deft") or {}).get("warnings", []))]
