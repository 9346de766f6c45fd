"""Submit one train job (or one AutoML study) to a platform, and query, tail or stop it later through its record.

Order of a submit: validate the spec -> preflight (a failure submits nothing: InputError, exit 2) ->
check the engine (docker info / sbatch; skipped by --dry-run) -> copy the spec into the job folder ->
render the command or script -> launch (unless --dry-run) -> write the record.

Preflight checks spec and data here for every platform. The environment (HF_TOKEN, redis-server,
GPUs, free disk, the model) is checked here for --platform local only; a Docker or Slurm job runs
elsewhere, so its env findings are "check on the node" (recorded, not errors) and the rendered job
runs `skillbank preflight --only env --runs-on here` as its first step there (JobContext.preflight_argv).

An automl job (`automl=AutomlJob(...)`) passes the same gate on its base train spec and runs
`skillbank automl --resume` in <results_dir>/automl/<study>: the first run creates the study, a
requeued or re-submitted job continues it, and cancel stops the runner, which stops every trial.

An rl job (`action="rl"`, an rl spec) passes preflight of the rl action and runs GRPO: cosmos-rl on
the TOMLs rendered into the job folder (skillbank.platform.grpo), or `skillbank rl --backend local`.
"""

from __future__ import annotations

import importlib
import socket
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from skillbank import atomic
from skillbank.errors import InputError, RunError
from skillbank.runs import record as rec
from skillbank.platform.context import AutomlJob, JobContext, Options, build_context, copy_spec
from skillbank.training.backends import BACKENDS

DEFAULT_SKILL = "tao-finetune-cosmos-reason"
PLATFORMS = ("local", "docker", "slurm")


def platform_module(name: str) -> ModuleType:
    if name not in PLATFORMS:
        raise InputError(f"unknown platform {name!r}", where="--platform", fix=f"one of: {', '.join(PLATFORMS)}")
    return importlib.import_module(f"skillbank.platform.{name}")


def default_backend(platform: str) -> str:
    """One default for train, automl and submit, whatever the platform (skillbank.training.backends)."""
    from skillbank.training.backends import DEFAULT_BACKEND

    return DEFAULT_BACKEND


def load_run_preflight() -> Callable[..., Any] | None:
    """`skillbank.preflight.run.run_preflight`, when that module exists in this installation."""
    try:
        module = importlib.import_module("skillbank.preflight.run")
    except ModuleNotFoundError as exc:
        if exc.name in ("skillbank.preflight", "skillbank.preflight.run"):
            return None
        raise
    return getattr(module, "run_preflight", None)


def runs_on(platform: str, dry_run: bool = False) -> str:
    """Where a platform's job meets its environment: this machine for a local launch, a node (a
    container, a Slurm allocation, or wherever a dry run's command.sh is run) otherwise."""
    return "here" if platform == "local" and not dry_run else "node"


def preflight_gate(ctx: JobContext, *, gpus_per_node: int | None, dry_run: bool = False, loaded: Any = None, described: Any = None) -> dict[str, Any]:
    """Preflight of the job's spec (`loaded`: the LoadedSpec submit read, else the file at ctx.spec_path)."""
    run = load_run_preflight()
    if run is None:
        print("warning: skillbank.preflight.run is not available: submitting without preflight", file=sys.stderr)
        return {"ran": False, "reason": "skillbank.preflight.run.run_preflight not available"}
    action = "rl" if ctx.action == "rl" else "train"
    study = {"study": ctx.automl.shape} if ctx.automl else {}  # env.disk: a worker's share of the study's disk (runs.disk.study_disk)
    report = run(
        skill=ctx.skill, action=action, spec_path=str(ctx.spec_path), **({"spec": loaded} if loaded is not None else {}),
        gpus_per_node=gpus_per_node, nodes=ctx.nodes, backend=ctx.backend, runs_on=runs_on(ctx.platform, dry_run),
        **({"paths": ctx.paths} if ctx.paths else {}), **study,
        **({"records": described.records, "val_records": described.val_records} if described is not None and ctx.action == "train" else {}),
    )
    report.require_ok(skill=ctx.skill, action=action, spec_path=ctx.spec_path, outcome="nothing was submitted")
    ctx.preflight_stats = report.stats
    return {"ran": True, **report.summary()}


def check_study(automl: AutomlJob, skill: str, spec: Any) -> AutomlJob:
    """What `skillbank automl` would refuse on the node, refused here (exit 2, nothing submitted): an
    unknown metric, a search key or range the skill's train schema does not allow. Returns the job with
    the study's shape (runs.disk.study_shape: the most epochs, the largest checkpoint; for the gate's disk)."""
    from dataclasses import replace

    from skillbank.runs.disk import study_shape
    from typing import get_args

    from skillbank.automl.space import build_space, load_schema
    from skillbank.automl.trials import LOSS_METRICS
    from skillbank.skillinfo import schema_path
    from skillbank.specification.evaluate import MetricsSpec

    metrics = (*get_args(MetricsSpec.model_fields["primary"].annotation), *LOSS_METRICS)
    if automl.metric not in metrics:
        raise InputError(f"unknown metric {automl.metric!r}", where="--metric", fix=f"use one of: {', '.join(metrics)}")
    schema = load_schema(schema_path(skill, "train"))
    space = build_space(schema, spec.model_dump(mode="json"), params=list(automl.params) or None,
                        ranges=dict(automl.ranges), choices={k: list(v) for k, v in automl.choices}, search=list(automl.search))
    return replace(automl, shape=study_shape(automl.max_trials, spec.train.epoch, space.params))


def _preflight_gpus(platform: str, flag: int | None, ctx: JobContext, dry_run: bool = False) -> int | None:
    """What preflight should assume about GPUs per node: None for a CPU job (--gpus-per-node 0 on any
    platform: its ranks are the spec's shape, no GPU is checked); the allocation on Slurm and Docker
    (the flag, else the shape the spec asks for); what the flag says on this machine (None: the env
    check counts this machine's GPUs)."""
    if ctx.cpu_only:
        return None
    return flag if platform == "local" and not dry_run else (ctx.gpus_per_node or None)


def node_spec(loaded: Any, skill: str, paths: Any, action: str = "train") -> tuple[Any, dict[str, Any], list[str]]:
    """The train spec (a LoadedSpec) as the node sees it: under a path map every path key REMOTE (and each
    LOCAL checked: it exists here or holds a path the spec names); the spec file's own keys in that view
    (what the job folder's copy holds); notes on paths no LOCAL covers."""
    from skillbank.specification.registry import spec_model
    from skillbank.specification.validation import validate

    model = spec_model(skill, action)
    if not paths:
        return loaded.model(model), loaded.raw(), []
    local = paths.local(loaded.raw(), model)
    paths.check_used(local, model)
    remote, notes = paths.remote(local, model)
    return validate(model, remote, source=loaded.path), remote, notes


def _resume_from(ctx: JobContext, path: str | None) -> list[str]:
    """--resume-from for a train job: a complete checkpoint when this machine has it (refused, exit 2,
    when it is incomplete); a path only the node has is passed on and checked there by `skillbank train`."""
    if not path:
        return []
    if ctx.automl is not None:
        raise InputError("--resume-from starts one training run from a checkpoint; an AutoML study resumes itself",
                         where="--resume-from", fix="drop it, or submit --action train")
    from skillbank.runs import layout

    here = Path(ctx.here(path)).expanduser()  # a node path under --path-map is read at its LOCAL side
    if not here.exists():
        ctx.resume_from = ctx.node(path)
        return [f"--resume-from {path} is not on this machine: `skillbank train` checks it on the node"]
    try:
        ctx.resume_from = ctx.node(layout.resolve_checkpoint(here))
    except ValueError as exc:
        raise InputError(str(exc), where="--resume-from", fix="pass a complete checkpoint (`skillbank jobs diagnose RUN_DIR` names the last one)") from None
    return [f"starts from checkpoint {ctx.resume_from}"]


def _resume_run(ctx: JobContext, path: str | None) -> list[str]:
    """--resume-run DIR (or --retry-of's run): the job continues that run folder on purpose, from its newest complete
    checkpoint (checked here when this machine has it). Without it, a run root that already holds another run's
    checkpoints is refused: a resume scan of that root (cosmos-rl's train.resume = true) could continue the other run."""
    from skillbank.runs import layout

    if path:
        if ctx.automl is not None or ctx.action == "rl":
            raise InputError("--resume-run continues one training run", where="--resume-run", fix="drop it (a study resumes itself), or submit --action train")
        if ctx.resume_from:
            raise InputError("--resume-run continues a run in its own folder; --resume-from starts a new run from a checkpoint: pass one",
                             where="--resume-run", fix="drop --resume-from")
        here = Path(ctx.here(path)).expanduser()
        if not here.is_absolute():
            here = ctx.cwd / here
        ctx.resume_run = ctx.node(here if Path(path).is_absolute() or here.exists() else path)
        if not here.exists():
            return [f"--resume-run {path} is not on this machine: the job continues it where it runs (its newest complete checkpoint, else a new start in it)"]
        newest = layout.newest_complete_checkpoint(here) if (here / "checkpoints").is_dir() else None
        if newest is None:
            raise InputError(f"--resume-run {path} holds no complete checkpoint (checkpoints/step_N/policy with every rank's marker)", where="--resume-run",
                             fix="name a run folder with a complete checkpoint (`skillbank jobs diagnose DIR` says), or drop --resume-run for a new run")
        return [f"continues run {ctx.resume_run} from its newest complete checkpoint (step {layout.step_of(newest)} now; a later one if it has more when the job starts)"]
    root = Path(ctx.here(ctx.run_root))
    root = root if root.is_absolute() else ctx.cwd / root
    others = layout.other_runs(root, Path(ctx.here(ctx.run_dir)))
    if others:
        raise InputError(f"the job's run root {root} already holds another run's checkpoints ({others[0]}): a resume scan there could continue it",
                         where="train.output_dir", fix=f"continue that run on purpose with --resume-run {others[0]}, or give train.output_dir a new folder")
    return []


def _spec_fits(spec: Any) -> list[dict[str, Any]]:
    """The values `skillbank spec` fitted (the spec's fitted block), as the record's `fitted` entries."""
    block = getattr(spec, "fitted", None)
    if block is None or not block.ceilings:
        return []
    from skillbank.specification.overrides import get_dotted

    data = spec.model_dump(mode="json")
    return [{"key": key, "from": ceiling, "to": get_dotted(data, key), "where": "spec", "records": block.records,
             "why": f"`skillbank spec` fitted it to {block.records:,} train records counted at {block.counted}"} for key, ceiling in block.ceilings.items()]


def _fit_described(spec: Any, spec_data: dict[str, Any], described: Any) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """--records N (the real data described): the spec's fitted values fitted again to N records before the copy is written."""
    import copy

    from skillbank.runs import fitting, steps
    from skillbank.specification.overrides import get_dotted, set_dotted

    refit, changes = fitting.refit(spec, steps.train_count(spec, described.records), described.val_records,
                                   counted=f"described: --records {described.records}", where="submit")
    if not changes:
        return spec, spec_data, []
    data = copy.deepcopy(spec_data)
    now = refit.model_dump(mode="json")
    for change in changes:
        if not change["key"].startswith(("steps.", "validation.every")):
            set_dotted(data, change["key"], get_dotted(now, change["key"]))
    data["fitted"] = now["fitted"]
    return refit, data, changes


def _planned_time(ctx: JobContext, described: Any = None) -> str:
    """No --time on Slurm: `skillbank plan`'s suggested time (the total with a margin) from the gate's token tally
    and record counts, or from the described dataset (--records ...: the node's data, not this machine's copy); a CPU
    job, an AutoML study or a DEFT loop gets none (the partition's default applies). Returns the note."""
    if ctx.cpu_only or ctx.automl is not None or ctx.deft is not None:
        what = ("a CPU job" if ctx.cpu_only else "a DEFT loop (its rounds depend on the stop rule; a requeued loop resumes)" if ctx.deft
                else "an AutoML study (its trials' time depends on pruning; a requeued study resumes)")
        return f"no --time given or suggested for {what}: the partition's default time limit applies"
    from dataclasses import replace

    from skillbank.planning.plan import suggest_slurm_time

    if described is not None and ctx.action == "train":
        value, why = _described_time(ctx, described)
    else:
        value, why = suggest_slurm_time(ctx.spec_here(), ctx.preflight_stats, action=ctx.action, nodes=ctx.nodes, gpus_per_node=ctx.gpus_per_node)
    if value:
        ctx.options = replace(ctx.options, time=value)
    return why


def _described_time(ctx: JobContext, described: Any) -> tuple[str | None, str]:
    """`skillbank plan --records ...`'s Slurm time for the job's layout (the described data, not the files here)."""
    from skillbank.planning.inputs import Inputs
    from skillbank.planning.plan import build_plan

    try:
        plan = build_plan(Inputs(ctx.spec_here(), ctx.skill, "train", ctx.nodes, ctx.gpus_per_node, described=described,
                                 has_data=bool(ctx.spec.custom.train_dataset.annotation_path)))
    except InputError as exc:
        return None, f"no --time suggested from the described data: {exc.message}; pass --time"
    slurm = plan.get("slurm_time")
    if not slurm:
        return None, "no --time suggested: the plan has no step count; pass --time"
    return slurm["value"], (f"--time {slurm['value']}: `skillbank plan --records {described.records} --clip-seconds {described.clip_seconds:g}`'s estimate "
                            f"({plan['total_time_h']:.2f} h on h100-80gb, {slurm['margin']}); pass --time to set your own")


def submit(
    *,
    platform: str,
    spec_path: str,
    backend: str | None = None,
    skill: str = DEFAULT_SKILL,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    options: Options | None = None,
    dry_run: bool = False,
    automl: AutomlJob | None = None,
    paths: Any = None,
    action: str = "train",
    model_family: str | None = None,
    resume_from: str | None = None,
    recorded_map: bool = False,
    described: Any = None,
    resume_run: str | None = None,
    time_limit: str | None = None,
) -> tuple[rec.JobRecord, Path]:
    """`paths` (skillbank.specification.pathmap.PathMap): data are checked at LOCAL, every file of the job folder
    and the record's node paths name REMOTE; `recorded_map`: the map the spec file records joins it. The
    spec file is read once here."""
    module = platform_module(platform)
    deft = config = None
    if action == "deft":  # the loop's config: its base train spec gives the job's shape, retrain.backend its backend
        from skillbank.platform.deft_job import prepare

        deft, config, spec_path, paths, backend = prepare(spec_path, backend=backend, paths=paths, recorded_map=recorded_map)
    backend = backend or default_backend(platform)
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}", where="--backend", fix=f"one of: {', '.join(BACKENDS)}")
    if action == "rl" and automl is not None:
        raise InputError("an rl job is not an AutoML study", where="--action")
    given = [flag for flag, value in (("--time-limit", time_limit), ("--exclude", (options or Options()).exclude)) if value]
    if given and platform != "slurm":
        raise InputError(f"{given[0]} is a Slurm option", where=given[0], fix="add --platform slurm, or drop it")
    if model_family is not None and action != "rl":
        raise InputError("--model-family names the family of an rl job's start checkpoint", where="--model-family", fix="add --action rl, or drop it")
    if paths and not dry_run and platform in ("local", "docker"):
        raise InputError(f"--path-map renders a job for another machine, but --platform {platform} launches it on this one", where="--path-map",
                         fix="add --dry-run and run the job folder's command.sh where the REMOTE paths exist, or drop --path-map")
    from skillbank.specification.io import LoadedSpec
    from skillbank.specification.pathmap import PathMap

    loaded = LoadedSpec.read(spec_path)
    if recorded_map:
        paths = loaded.recorded_map().with_flags((paths or PathMap()).items())
    spec, spec_data, path_notes = node_spec(loaded, skill, paths, "rl" if action == "rl" else "train")
    fitted = _spec_fits(spec)
    if described is not None and action == "train":
        spec, spec_data, refitted = _fit_described(spec, spec_data, described)
        fitted += refitted
    if automl is not None:
        automl = check_study(automl, skill, spec)
    ctx = build_context(
        platform=platform, backend=backend, skill=skill, spec_path=spec_path, spec=spec,  # type: ignore[arg-type]
        nodes=nodes, gpus_per_node=gpus_per_node, options=options or Options(), automl=automl,
        action=action, model_family=model_family, spec_data=spec_data, deft=deft, **({"paths": paths} if paths else {}),
    )
    if deft is not None and resume_from:
        raise InputError("--resume-from starts one training run from a checkpoint; a DEFT job resumes its loop", where="--resume-from",
                         fix="drop it: every attempt continues the loop at its interrupted stage")
    notes = _resume_from(ctx, resume_from)
    notes += _resume_run(ctx, resume_run)
    if automl is not None and automl.storage:
        from skillbank.automl.storage import socket_note

        worker = "every job that names this --storage and --study runs one more worker of the study (status, logs, cancel per job)"
        notes += [worker, *([socket_note(automl.storage)] if socket_note(automl.storage) and platform != "local" else [])]
    if deft is not None:
        from skillbank.platform.deft_job import gate, notes as deft_notes

        pre = gate(ctx, config, runs_on=runs_on(platform, dry_run))
        notes += deft_notes(ctx, pre)
    else:
        pre = preflight_gate(ctx, gpus_per_node=_preflight_gpus(platform, gpus_per_node, ctx, dry_run), dry_run=dry_run,
                             loaded=ctx.spec.model_dump(mode="json") if described is not None else loaded, described=described)  # refitted: the copy's spec
    if platform == "slurm":
        from skillbank.platform import slurm_limits

        limit, limit_note = slurm_limits.time_limit(time_limit, ctx.options.partition)
        if not ctx.options.time:
            notes.append(_planned_time(ctx, described))
        notes += slurm_limits.cap_time(ctx, limit, limit_note)
        notes += slurm_limits.exclusion_notes(ctx)
    if not dry_run:
        module.require_engine()
    sha = copy_spec(ctx, rewrite=any(f["where"] == "submit" for f in fitted))
    rendered = module.render(ctx)
    record = rec.JobRecord(
        id=ctx.job_id,
        platform=platform,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        skill=skill,
        action=ctx.action,  # type: ignore[arg-type]
        spec=rec.SpecRef(path=str(ctx.spec_path), sha256=sha, copy_path=str(ctx.spec_copy)),
        path_map=ctx.paths.items(),
        argv=rendered.argv,
        script=str(rendered.script) if rendered.script else None,
        status="rendered" if dry_run else "submitted",
        dry_run=dry_run,
        submitted=rec.now(),
        nodes=ctx.nodes,
        gpus_per_node=ctx.gpus_per_node,
        image=rendered.image,
        env=rendered.env,
        outputs=rec.Outputs(
            results_dir=str(ctx.results_dir),
            job_dir=str(ctx.job_dir),
            train_output_dir=str(ctx.train_output_dir),  # the node's (REMOTE under a path map), as run_dir, logs and study_dir
            run_dir=str(rendered.run_dir) if rendered.run_dir else None,
            log=str(rendered.log) if rendered.log else None,
            cosmos_log_dir=str(rendered.cosmos_log_dir) if rendered.cosmos_log_dir else None,
            study_dir=str(ctx.study_dir) if ctx.study_dir else None,
            study_storage=automl.storage if automl is not None else None,
            deft_dir=deft.output_dir if deft is not None else None,
        ),
        preflight=pre,
        fitted=fitted,
        notes=[*notes, *rendered.notes, *path_notes],
    )
    atomic.write_json(ctx.job_dir / rec.FOLDER_FACTS, rec.folder_facts(record))  # the folder describes itself
    if not dry_run:
        record.external_kind = {"local": "pid", "docker": "docker-container", "slurm": "slurm-job"}[platform]  # type: ignore[assignment]
        try:
            record.external_id = module.launch(ctx, rendered)
        except (RunError, OSError) as exc:
            record.status = "failed"
            record.ended = rec.now()
            record.notes.append(f"launch failed: {exc}")
            rec.save(record)
            raise RunError(f"{platform} launch failed: {exc} (record: {rec.path_of(record)})") from None
        if platform == "slurm":
            record.outputs.log = str(ctx.job_dir / f"slurm-{record.external_id}.out")
    return record, rec.save(record, index=not dry_run)  # a dry run writes nothing outside its job folder's results_dir/jobs


# --- status / logs / cancel ------------------------------------------------------------------------


def refresh(record: rec.JobRecord) -> rec.JobRecord:
    """The platform's answer (a foreground run: its pid), then node.json and the run's progress (platform.follow)."""
    from skillbank.platform.follow import follow

    record = foreground_refresh(record) if record.kind == "foreground" else platform_module(record.platform).refresh(record)
    return follow(record)


def foreground_refresh(record: rec.JobRecord) -> rec.JobRecord:
    """A foreground `skillbank train` finishes its own record; one still "running" whose process is gone was killed."""
    if record.status in rec.TERMINAL or not record.external_id or not record.external_id.isdigit():
        return record
    import psutil

    try:
        alive = psutil.Process(int(record.external_id)).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        alive = False
    if not alive and record.host in (None, socket.gethostname()):
        record.status = "unknown"
        note = f"process {record.external_id} is gone without finishing the record (killed with SIGKILL, or the machine restarted)"
        if note not in record.notes:
            record.notes.append(note)
    return record


def status(job: str, results_dir: str | None = None) -> tuple[rec.JobRecord, Path]:
    record, path = rec.find(job, results_dir)
    record = refresh(record)
    _save(record, path)
    return record, path


def _save(record: rec.JobRecord, path: Path) -> None:
    """Write the record back where it was found (a foreground record's id has no job folder beside it)."""
    from skillbank import atomic

    if record.kind == "foreground":
        atomic.write_json(path, record.model_dump(mode="json"))
    else:
        rec.save(record)


def logs(job: str, *, tail: int = 100, results_dir: str | None = None) -> tuple[rec.JobRecord, str]:
    record, _ = rec.find(job, results_dir)
    if record.dry_run:
        raise InputError(f"job {record.id} was only rendered (--dry-run): it has no logs", where="JOB", fix=f"run {record.script} or submit without --dry-run")
    return record, platform_module(record.platform).logs(record, tail)


def cancel(job: str, results_dir: str | None = None) -> tuple[rec.JobRecord, Path]:
    record, path = rec.find(job, results_dir)
    if record.dry_run:
        raise InputError(f"job {record.id} was only rendered (--dry-run): nothing runs", where="JOB")
    if record.kind == "foreground":
        raise InputError(f"{record.id} is a foreground `skillbank {record.action}` run (pid {record.external_id} on {record.host})", where="JOB",
                         fix=f"stop it with Ctrl-C in its terminal, or `kill {record.external_id}` (SIGTERM: it stops its whole process tree and records cancelled)")
    record = platform_module(record.platform).cancel(record)
    if record.status == "cancelled" and not record.ended:
        record.ended = rec.now()
    from skillbank.platform.follow import follow

    record = follow(record)
    rec.save(record)
    return record, path


# --- wait ------------------------------------------------------------------------------------------

WAIT_EXIT = {"succeeded": 0, "failed": 1, "cancelled": 1, "timeout": 3, "unknown": 4}  # `skillbank jobs wait`'s exit codes
POLL_S = (0.5, 5.0)  # first and longest pause between two looks at the platform (each pause 1.5x the last)


def wait(
    job: str, *, timeout_s: float | None = None, results_dir: str | None = None, on_change: Callable[[rec.JobRecord], None] | None = None,
) -> tuple[rec.JobRecord, Path, str]:
    """Refresh the job (as `jobs status` does) until it reaches a final state or `timeout_s` passes;
    each change of status is written to the record and handed to `on_change`. Returns the record, its
    path and the outcome: its final status, or "timeout". A platform that cannot answer on the first
    look is an error (RunError: nothing to wait on); later, a look that fails is retried."""
    record, path = rec.find(job, results_dir)
    if record.dry_run:
        raise InputError(f"job {record.id} was only rendered (--dry-run): nothing runs to wait for", where="JOB",
                         fix=f"run {record.script} (or sbatch it, then `skillbank jobs attach`), or submit without --dry-run")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pause, seen, looked = POLL_S[0], None, False
    while True:
        try:
            record = refresh(record)
            looked = True
        except RunError:
            if not looked:
                raise
        if record.status != seen:
            seen = record.status
            _save(record, path)
            if on_change is not None:
                on_change(record)
        if record.status in rec.FINAL:
            _save(record, path)  # with the run's last progress
            return record, path, record.status
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return record, path, "timeout"
        time.sleep(pause if left is None else min(pause, left))
        pause = min(pause * 1.5, POLL_S[1])
