"""run_preflight: every known failure of a launch, checked before it, for one skill action.

Nothing is launched and no input is modified. Each action runs the checks that apply to it:
train (spec rules, parallelism, steps per rank, validation data, every record of train and val,
the token budget, redis, model and token, disk, example cache), evaluate (spec, every record of
the evaluation set, model and token), inference / quantize / export (spec, data when given, model
and token, disk), rl (GPUs for policy plus rollout, the starting checkpoint, the answer format
against the rewards, every record and its reference answer; preflight.rl_checks).

Where the job runs decides what an environment finding means (`runs_on`): "here" checks this machine; "node" (a dry
run, Slurm, Docker) reports env findings as "check on the node" and the rendered job runs `skillbank preflight --only env
--runs-on here` first on the node. `only` picks the check groups (spec, data, env); with env alone, train does not rescan the data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.preflight import env_checks, evaluate_checks, spec_checks
from skillbank.preflight.cache_checks import check_cache
from skillbank.preflight.datasets import PROBE_ALL, Dataset, ScanOptions, check_clip, scan
from skillbank.preflight.decode import ALL
from skillbank.preflight.report import RUNS_ON, Findings, Group, Report, parse_groups
from skillbank.preflight.vision import TokenTally, VisionBudget, clip_from_record
from skillbank.training.backends import BACKENDS
from skillbank.runs import steps
from skillbank.specification.io import LoadedSpec, read_spec_file

EXPORT_BYTES = 2  # bf16 safetensors
PROBE_SAMPLE = 64  # train clips whose headers preflight reads for its token tally when the records state no length


@dataclass
class Context:
    findings: Findings
    gpus_per_node: int | None
    nodes: int | None
    backend: str | None
    decode_sample: int
    start_check: str = "off"  # rl: sample the start model (training.local.grpo_start): off, bounded or full
    probe_sample: int = 0  # train records whose clip headers are read for the token tally (PROBE_ALL: every one)
    study: Any = None  # runs.disk.StudyShape of an AutoML study on this base spec: env.disk checks a worker's share
    described: tuple[int, int | None] | None = None  # (train, val) records of the real data described (submit --records): the step checks count these
    datasets: list[Dataset] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    count: Any = None  # the model's ParamCount (skillbank.models.params), once counted; None: not known here

    def wants(self, group: Group) -> bool:
        return self.findings.wants(group)


def run_preflight(
    *,
    skill: str,
    action: str,
    spec_path: str | Path | None = None,
    spec: dict | LoadedSpec | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    backend: str | None = None,
    decode_sample: int = 0,
    runs_on: str = "here",
    only: Iterable[str] | None = None,
    paths: Any = None,
    start_check: bool | str = False,
    probe_sample: int = PROBE_SAMPLE,
    study: Any = None,
    records: int | None = None,
    val_records: int | None = None,
) -> Report:
    """The spec: `spec` (a dict, or the LoadedSpec the command read: its file is not read again), else the
    file at `spec_path`, read once here (an unreadable one is a spec.schema finding).
    `paths` (skillbank.specification.pathmap.PathMap): the spec names the node's paths; they are checked at
    their LOCAL counterparts here. `probe_sample`: train records without a stated clip length whose container
    headers are read for the token tally (K spread over the file; PROBE_ALL every one, as `skillbank plan` does).
    `study` (runs.disk.StudyShape): the spec is an AutoML study's base spec: env.disk checks one worker's share of the study's
    disk (runs.disk.study_disk: its running trials' every epoch + the kept best, at the search's largest checkpoint).
    `start_check` (rl): "bounded" (or True), "full", or "off" (or False): training.local.grpo_start's modes."""
    started = time.perf_counter()
    if runs_on not in RUNS_ON:
        raise InputError(f"unknown location {runs_on!r}", where="--runs-on", fix=f"use one of: {', '.join(RUNS_ON)}")
    groups = parse_groups(only)
    findings = Findings(runs_on=runs_on, only=groups)  # type: ignore[arg-type]
    mode = ("bounded" if start_check else "off") if isinstance(start_check, bool) else start_check
    ctx = Context(findings, gpus_per_node, nodes, backend, int(decode_sample or 0) if decode_sample == ALL else max(0, int(decode_sample or 0)), str(mode),
                  probe_sample=probe_sample, study=study, described=(records, val_records) if records else None)
    _arguments(ctx, action)
    if isinstance(spec, LoadedSpec):
        spec_path, spec = spec.path, spec.raw()
    elif spec is None and spec_path is not None:
        try:
            spec = read_spec_file(spec_path)
        except InputError:
            pass  # spec_checks.load reports it
    paths = paths or _recorded_map(spec)
    if paths:
        spec = _local_view(skill, action, spec, paths)
        ctx.stats["path_map"] = paths.items()
    parsed = spec_checks.load(skill, action, spec_path, spec, ctx.findings)
    checks = ACTIONS.get(action)
    if parsed is not None and checks is not None:
        checks(parsed, ctx)
    records = {d.role: d.records for d in ctx.datasets}
    stats = {
        "skill": skill,
        "action": action,
        "records": records,
        "checked": sum(records.values()),
        "datasets": {d.role: _dataset_stats(d) for d in ctx.datasets},
        "tokens_per_sample": _tokens_per_sample(ctx.datasets),
        **ctx.stats,
        "runs_on": runs_on,
        "only": [g for g in ("spec", "data", "env") if g in groups],
        "errors": ctx.findings.totals["error"],
        "warnings": ctx.findings.totals["warning"],
        "node": ctx.findings.totals["node"],
        "seconds": round(time.perf_counter() - started, 3),
    }
    return Report(ctx.findings.finish(), stats)


def _local_view(skill: str, action: str, spec: dict | None, paths: Any) -> dict | None:
    """The spec dict with the node's paths moved to this machine's (a spec that could not be read is
    left to spec_checks.load, which reports it)."""
    from skillbank.specification.registry import spec_model

    try:
        model = spec_model(skill, action)
    except InputError:
        return spec
    if spec is None:
        return None
    local = paths.local(spec, model)
    paths.check_used(local, model)
    return local


def _recorded_map(spec: dict | None) -> Any:
    """The path map the spec records (paths.map), when it applies on this machine; else None."""
    from skillbank.specification.pathmap import recorded

    return recorded(spec) or None


def _dataset_stats(d: Dataset) -> dict[str, Any]:
    return {
        "file": d.file,
        "records": d.records,
        "videos": d.videos,
        "images": d.images,
        "complete": d.complete,
        "media_folders_listed": d.folders_listed,
        "tokens_per_sample": d.tokens.to_dict(),
    }


def _tokens_per_sample(datasets: list[Dataset]) -> dict[str, Any] | None:
    """The training set's tokens per sample (every set's when there is no train set); None when no length is known."""
    train = [d for d in datasets if d.role == "train"]
    tally = TokenTally()
    for d in train or datasets:
        tally = tally.merge(d.tokens)
    return tally.to_dict()


CPU_ACTIONS, CPU_JOB_ACTIONS = ("evaluate", "inference", "export", "quantize"), ("train", "rl")  # --gpus-per-node 0: a CPU machine; train/rl: a local-backend CPU job


def _arguments(ctx: Context, action: str) -> None:
    f = ctx.findings
    if ctx.backend is not None and ctx.backend not in BACKENDS:
        f.error("spec.schema", f"unknown backend {ctx.backend!r}", f"use one of: {', '.join(BACKENDS)}", "--backend")
    if ctx.gpus_per_node == 0 and action in CPU_JOB_ACTIONS:  # a CPU job, as `skillbank submit --gpus-per-node 0` takes it: no GPU to compare
        if ctx.backend == "cosmos-rl":
            f.error("spec.parallelism", "--gpus-per-node 0 asks for a CPU job, but the cosmos-rl backend trains on GPUs only",
                    "add --backend local (torchrun + FSDP2 on CPU ranks: the spec's dp_shard_size*tp*cp*pp), or pass the GPUs the node has", "--gpus-per-node")
        ctx.gpus_per_node, ctx.stats["cpu_job"] = None, True
    for name, value in (("--gpus-per-node", ctx.gpus_per_node), ("--nodes", ctx.nodes)):
        least = 0 if name == "--gpus-per-node" and action in CPU_ACTIONS else 1
        if value is not None and value < least:
            f.error("spec.parallelism", f"{name} must be at least {least} (got {value})", f"pass a positive {name}", name)


# ---- train -------------------------------------------------------------------------------------------


def _train(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    spec_checks.parallelism(spec, ctx.gpus_per_node, ctx.nodes, f)
    spec_checks.validation_data(spec, f)
    spec_checks.checkpoints(spec, f)
    model = env_checks.resolve("policy.model_name_or_path", spec.policy.model_name_or_path)
    env_checks.check_models([model], f)
    ctx.count = env_checks.model_count(model, f)
    env_checks.check_parallel(spec, model, f)
    if ctx.wants("env"):
        _train_env(spec, model, ctx)
    counted = ctx.count is not None or model.where != "hub"  # an uncountable hub id is spec.model once (model_count), not twice
    patch = env_checks.patch_size(model, f if ctx.backend == "cosmos-rl" and counted else None)
    budget = VisionBudget.from_train_spec(spec, patch)
    _fixed_frames(budget, f)
    if not (ctx.wants("data") or ctx.wants("spec")):
        return  # --only env (the job's first step on the node): the data were checked where it was planned

    custom = spec.custom
    train_file = spec_checks.dataset_file("custom.train_dataset.annotation_path", custom.train_dataset.annotation_path, f)
    train_media = spec_checks.media_folder("custom.train_dataset.media_path", custom.train_dataset.media_path, custom.train_dataset.annotation_path, f)
    media_folders = [train_media]
    val = None
    if custom.val_dataset is not None and custom.val_dataset.annotation_path:
        val_file = spec_checks.dataset_file("custom.val_dataset.annotation_path", custom.val_dataset.annotation_path, f)
        val_media = spec_checks.media_folder("custom.val_dataset.media_path", custom.val_dataset.media_path, custom.val_dataset.annotation_path, f)
        media_folders.append(val_media)
        if val_file:
            # --decode-sample all decodes every video the run reads, the validation set's too; K samples train only
            val_decode = ctx.decode_sample if ctx.decode_sample == ALL else 0
            val = _scan(ctx, "val", val_file, ScanOptions(val_media, keep_keys=True, budget=budget, decode_sample=val_decode))
    train = None
    if train_file:
        train = _scan(ctx, "train", train_file, ScanOptions(train_media, overlap_with=val, budget=budget, decode_sample=ctx.decode_sample,
                                                           probe_sample=ctx.probe_sample))
        if ctx.described is not None or (train.complete and train.records):  # described (submit --records): the real data's steps, not the sample's
            n, m = ctx.described or (train.records, val.records if val else None)
            spec_checks.steps_per_rank(spec, n, m, f, backend=ctx.backend)
            _plan(spec, model, n, None, ctx, val_records=m)
    probed = _probe(ctx, train, budget)
    decoded = _decode(ctx, [train, val], budget)
    for data in (train, val):
        if data is not None:
            _unknown_lengths(data, budget, decoded.get(data.role, 0) + (probed if data is train else 0), f)
    ctx.stats["cache_folders_checked"] = check_cache(spec, patch, media_folders, f)


def _train_env(spec: Any, model: env_checks.ModelRef, ctx: Context) -> None:
    """What only the machine that trains can answer: a job's paths, the token, redis-server, GPUs, free disk."""
    from skillbank.runs.steps import parallel_shape  # the GPUs per node a job asks for, decided once

    f = ctx.findings
    ctx.stats["paths_checked"] = env_checks.check_job_paths(spec, f)  # a job's first step: its spec's absolute paths exist here
    env_checks.check_hf_token([model], f)
    env_checks.check_uploads(spec, f)
    env_checks.check_redis(ctx.backend, f)
    if ctx.backend == "cosmos-rl":
        ctx.stats["gpus"] = env_checks.check_gpus(parallel_shape(spec)[1], f)
    _train_disk(spec, model, ctx)


def _fixed_frames(budget: VisionBudget, f: Findings) -> None:
    est = budget.fixed_frames_overflow()
    if est is not None:
        f.error(
            "vision.budget",
            f"custom.vision.nframes {budget.nframes} gives every sample at least ~{est.vision_low:,} vision tokens "
            f"(+ ~{est.text:,} text), over policy.model_max_length {budget.model_max_length:,}; truncation breaks vision-token alignment",
            "lower custom.vision.nframes or raise policy.model_max_length",
            "custom.vision.nframes",
        )


def _unknown_lengths(data: Dataset, budget: VisionBudget, decoded: int, f: Findings) -> None:
    """One warning for the clips whose length no record states and no decode measured."""
    longest = budget.longest_safe_clip()
    unchecked = data.videos - data.with_meta - decoded
    if longest is None or unchecked <= 0:
        return
    f.warning(
        "vision.budget",
        f"{unchecked:,} of {data.videos:,} video records in the {data.role} set state no clip length (duration or num_frames), "
        f"so their token budget was not checked; at fps {budget.fps:g} clips longer than ~{longest:.0f} s may exceed "
        f"policy.model_max_length {budget.model_max_length:,}",
        "write the lengths from the containers with `skillbank data fix ANNOTATIONS --out FILE` (duration, num_frames), "
        "or run preflight with --decode-sample all to measure every clip (K samples the train set only), "
        "or lower custom.vision.fps / total_pixels",
        data.file,
    )


def _decode(ctx: Context, datasets: list[Dataset | None], budget: VisionBudget | None, *, fps: float | None = None, nframes: int | None = None) -> dict[str, int]:
    """Decode the sampled clips of each dataset (--decode-sample K: K of the first; all: every video of
    each); stats["decoded"] counts the clips tried, stats["decode"] says what was measured (lengths,
    frames sampled at the spec's fps / nframes; per dataset under "datasets" when there are several).
    Returns the clips that decoded, per dataset role."""
    sampled = [d for d in datasets if d is not None and d.sample]
    if not ctx.decode_sample or not sampled:
        ctx.stats["decoded"] = 0
        return {}
    from skillbank.preflight.decode import DecodeSummary, decode_sample

    if budget is not None:
        fps, nframes = budget.fps, budget.nframes
    decoded: dict[str, int] = {}
    total: DecodeSummary | None = None
    per_dataset: dict[str, dict[str, Any]] = {}
    for data in sampled:
        clips, summary = decode_sample(data.sample, data.file, ctx.findings, fps=fps, nframes=nframes, requested=ctx.decode_sample)
        if budget is not None:
            probed = {entry[0] for entry in data.probe}
            for index, record, clip in clips:
                est = check_clip(budget, clip, record, index, f"{data.file}#{index}", ctx.findings, group=data.file)
                if est is not None and clip_from_record(record) is None and index not in probed:
                    data.tokens.add(est, clip)  # a record with metadata was counted by the scan, a probed one by _probe
        decoded[data.role] = len(clips)
        per_dataset[data.role] = {"file": data.file, "clips": summary.clips, "failed": summary.failed}
        total = summary if total is None else total.merge(summary)
    assert total is not None
    ctx.stats["decoded"] = total.clips
    ctx.stats["decode"] = {**total.to_dict(), **({"datasets": per_dataset} if len(per_dataset) > 1 else {})}
    return decoded


def _probe(ctx: Context, data: Dataset | None, budget: VisionBudget) -> int:
    """The scan's kept clips read from their headers into the token tally (preflight.probing); stats["probe"] says how many."""
    if data is None or not data.probe:
        return 0
    from skillbank.preflight.probing import probe_tally

    ctx.stats["probe"], readable = probe_tally(data, budget, ctx.findings, ctx.probe_sample)
    return readable


def _train_disk(spec: Any, model: env_checks.ModelRef, ctx: Context) -> None:
    """env.disk for the checkpoints the run keeps at once (runs.disk.run_disk: LoRA, the backend, max_keep, the steps that decide
    how many are saved), or a worker's share of an AutoML study (runs.disk.study_disk); not checked when the model is not counted here."""
    from skillbank.runs import disk

    if ctx.count is None:
        return

    if ctx.study is not None:  # one figure with plan --trials and the dry run
        counted = ctx.stats.get("plan")
        study = disk.study_disk(spec, ctx.study, records=counted["train_records"] if counted else None, backend=ctx.backend)
        if study is not None:
            ctx.stats["disk"] = env_checks.check_disk("train.output_dir", spec.train.output_dir, study.per_worker_bytes, study.per_worker_bytes,
                                                      study.detail, ctx.findings)
        return
    need = disk.run_disk(spec, plan=_disk_steps(spec, ctx), backend=ctx.backend)
    if need is not None:
        ctx.stats["disk"] = env_checks.check_disk("train.output_dir", spec.train.output_dir, need.checkpoint_bytes, need.total_bytes, need.detail, ctx.findings)


def _disk_steps(spec: Any, ctx: Context) -> steps.StepPlan | None:
    """The step plan when the checkpoint count depends on it (saves by steps, or a max_num_steps cap):
    from the scan when it ran, else a streamed count of the train records; None when they cannot be read."""
    ckpts = steps.checkpoint_plan(spec)
    if ckpts is None or ckpts.exact:
        return None
    plan = ctx.stats.get("plan")
    if plan is not None:
        return steps.step_plan(spec, plan["train_records"])
    try:
        return steps.step_plan(spec, steps.read_train_count(spec).train)
    except InputError:
        return None


def _plan(spec: Any, model: env_checks.ModelRef, train_records: int, val: Dataset | None, ctx: Context, *, val_records: int | None = None) -> None:
    """stats["plan"]: the run's arithmetic (records per rank, global batch, steps, checkpoints, disk); steps_from names described records."""
    from skillbank.runs.disk import run_disk

    count = steps.train_count(spec, train_records)
    need = run_disk(spec, plan=steps.step_plan(spec, count.train), backend=ctx.backend) if ctx.count is not None else None
    ctx.stats["plan"] = steps.run_plan(spec, count, val_records=val.records if val else val_records, disk=need)
    ctx.stats["steps_from"] = f"--records {train_records:,} (the real data described)" if ctx.described else "the records here"


def _output_disk(key: str, output_dir: str, model: env_checks.ModelRef, bytes_per_param: float, ctx: Context) -> None:
    count = env_checks.model_count(model, ctx.findings)
    if count is None:
        return
    params, how = float(count.total), count.source
    need = params * bytes_per_param
    what = f"the output needs ~{env_checks.gib_text(need)} ({params / 1e9:.1f}B parameters from {how})"
    ctx.stats["disk"] = env_checks.check_disk(key, output_dir, need, need, what, ctx.findings)


def _scan(ctx: Context, role: str, file: str, options: ScanOptions) -> Dataset:
    data = scan(role, file, options, ctx.findings)
    ctx.datasets.append(data)
    return data


# ---- rl (GRPO) ----------------------------------------------------------------------------------------


def _rl(spec: Any, ctx: Context) -> None:
    """GRPO through cosmos-rl: GPUs for policy plus rollout, the start (an SFT export), the answer
    format against the rewards, every record's reference, samples per policy step (preflight.rl_checks).
    With the local backend, the batch holds whole prompt groups instead of the GPU split."""
    from skillbank.preflight import rl_checks
    from skillbank.training.cosmos_rl.grpo import system_prompt

    f = ctx.findings
    local = ctx.backend == "local"  # one process on this machine samples its own rollouts: no GPU split, no redis
    if local:
        rl_checks.local_batch(spec, f)
    else:
        rl_checks.gpus(spec, ctx.gpus_per_node, ctx.nodes, f)
    prompt = system_prompt(spec)
    rl_checks.answer_format(spec, prompt, f)
    model = env_checks.resolve("policy.model_name_or_path", spec.policy.model_name_or_path) if spec.policy.model_name_or_path.strip() else None
    rl_checks.start(spec, model, f)
    _rl_recipe(spec, f)
    counted = True
    if model is not None:
        env_checks.check_models([model], f)
        counted = env_checks.model_count(model, f) is not None or model.where != "hub"  # a hub id the bank cannot count: the one refusal
        env_checks.check_parallel(spec, model, f)
    if ctx.wants("env"):
        if model is not None:
            env_checks.check_hf_token([model], f)
        if not local:
            env_checks.check_redis("cosmos-rl", f)
            env_checks.check_vllm(f)  # the rollout engine, in the job's environment
            ctx.stats["gpus"] = rl_checks.visible_gpus(spec, f)
    patch = env_checks.patch_size(model, f if counted else None) if model is not None else 16
    custom = spec.custom
    budget = rl_checks.rl_budget(spec, patch)
    _fixed_frames(budget, f)
    if not (ctx.wants("data") or ctx.wants("spec")):
        return
    file = spec_checks.dataset_file("custom.train_dataset.annotation_path", custom.train_dataset.annotation_path, f)
    media = spec_checks.media_folder("custom.train_dataset.media_path", custom.train_dataset.media_path, custom.train_dataset.annotation_path, f)
    if not file:
        return
    data = _scan(ctx, "train", file, ScanOptions(media, budget=budget, decode_sample=ctx.decode_sample, probe_sample=ctx.probe_sample))
    probed = _probe(ctx, data, budget)
    decoded = _decode(ctx, [data], budget)
    _unknown_lengths(data, budget, decoded.get(data.role, 0) + probed, f)
    if data.complete and data.records:
        from skillbank.data.records import load_records

        usable = rl_checks.references(spec, load_records(file), file, f)
        ctx.stats["rl_plan"] = rl_checks.samples_per_step(spec, usable, f)  # not "plan": that is the SFT run_plan shape
        if ctx.start_check != "off" and ctx.wants("spec") and not f.totals["error"]:
            _start_check(spec, model, ctx)


def _start_check(spec: Any, model: Any, ctx: Context) -> None:
    """Sample the start model (training.local.grpo_start: torch inside) and warn when every group's
    rewards are equal; stats["start_check"] holds the result, or why it was skipped."""
    from skillbank.training.local import grpo_start

    why = grpo_start.skipped_because(spec, model)
    if why:
        ctx.stats["start_check"] = {"skipped": why}
        return
    try:
        result = grpo_start.start_check(spec, str(model.path), bounds=grpo_start.Bounds.of(ctx.start_check))
    except Exception as exc:  # noqa: BLE001 - a check that cannot sample must not hide the other findings
        ctx.stats["start_check"] = {"skipped": f"sampling the start model failed: {type(exc).__name__}: {exc}"}
        return
    ctx.stats["start_check"] = result
    problem = grpo_start.finding(result)
    if problem:
        ctx.findings.warning("spec.start_rewards", *problem, "policy.model_name_or_path")


def _rl_recipe(spec: Any, f: Findings) -> None:
    """spec.recipe warnings where the rl spec's vision settings, system prompt (when set) or answer type
    differ from the start model's recipe: the policy would sample at settings its SFT never saw (a
    reasoning spec on a short-answer start scores 0 on the format and the extraction)."""
    from skillbank import recipe

    found = recipe.read(spec.policy.model_name_or_path)
    if found is None:
        return
    v = spec.custom.vision
    user = {"fps": v.fps, "nframes": v.nframes, "total_pixels": v.total_pixels, "max_pixels": v.max_pixels,
            "system_prompt": spec.custom.system_prompt, "answer_type": spec.custom.answer_type}
    names = {k: f"custom.vision.{k}" for k in recipe.VISION_KEYS} | {"system_prompt": "custom.system_prompt", "answer_type": "custom.answer_type"}
    applied = recipe.apply(user, found.recipe, dict.fromkeys(user), names=names, recipe_source=f"the start model's recipe ({found.source})")
    for warning in applied.warnings:
        f.warning("spec.recipe", warning, "set it to the recipe's value to sample as SFT trained, or keep it on purpose",
                  warning.split(" ", 1)[0])


# ---- the other actions -----------------------------------------------------------------------------


def _models(ctx: Context, refs: list[env_checks.ModelRef]) -> None:
    env_checks.check_models(refs, ctx.findings)
    env_checks.check_hf_token(refs, ctx.findings)


def _evaluate(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    refs = [env_checks.resolve("model.model_name", spec.model.model_name, "adapter")]  # a whole model or an adapter (evaluation.model)
    if spec.model.enable_lora and spec.model.base_model_path:
        refs.append(env_checks.resolve("model.base_model_path", spec.model.base_model_path))
    _models(ctx, refs)
    if ctx.gpus_per_node is not None and spec.num_gpus > ctx.gpus_per_node:
        fix = "set num_gpus = 0 (evaluate runs on CPU with engine transformers)" if ctx.gpus_per_node == 0 else f"set num_gpus={ctx.gpus_per_node} or fewer"
        f.error("spec.parallelism", f"num_gpus {spec.num_gpus} but --gpus-per-node is {ctx.gpus_per_node}", fix, "num_gpus")
    spec = evaluate_checks.resolved_spec(spec, f)
    file = spec_checks.dataset_file("dataset.annotation_path", spec.dataset.annotation_path, f)
    media = spec_checks.media_folder("dataset.media_dir", spec.dataset.media_dir, spec.dataset.annotation_path, f)
    if file:
        data = _scan(ctx, "eval", file, ScanOptions(media, decode_sample=ctx.decode_sample))
        _decode(ctx, [data], None, fps=spec.vision.fps, nframes=spec.vision.num_frames)
        evaluate_checks.training_overlap(spec, file, f)


def _inference(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    _models(ctx, [env_checks.resolve("model_path", spec.model_path, "adapter")])
    if spec.annotation_path:
        file = spec_checks.dataset_file("annotation_path", spec.annotation_path, f)
        media = spec_checks.media_folder("media_dir", spec.media_dir, spec.annotation_path, f)
        if file:
            from skillbank.evaluation.inference import settings_of

            used = settings_of(spec).values  # unset fps / num_frames: the model's recipe, else fps 2
            _decode(ctx, [_scan(ctx, "inference", file, ScanOptions(media, decode_sample=ctx.decode_sample))], None,
                    fps=used["fps"], nframes=used["nframes"])
    elif spec.video:
        if not Path(spec.video).expanduser().is_file():
            f.error("annotations.media_exists", f"video {spec.video!r} does not exist", "pass the path of an existing video file", "video")
    else:
        f.error("spec.dataset_paths", "neither video (single mode) nor annotation_path (batch mode) is set", "set video and prompt, or annotation_path and media_dir", "video")


def _quantize(spec: Any, ctx: Context) -> None:
    f = ctx.findings
    model = env_checks.resolve("model_path", spec.model_path)
    _models(ctx, [model])
    if spec.calibration_annotation_path:
        f.warning("spec.calibration_unused", "calibration_annotation_path is set, but no scheme calibrates today: the weights are rounded to "
                  "nearest from their own min / max (GPTQ needs llm-compressor, which has no release for this transformers / torch)",
                  "do not report the model as calibrated; leave calibration_* empty (references/export-and-quantize.md)", "calibration_annotation_path")
        file = spec_checks.dataset_file("calibration_annotation_path", spec.calibration_annotation_path, f)
        media = spec_checks.media_folder("calibration_media_dir", spec.calibration_media_dir, spec.calibration_annotation_path, f)
        if file:
            _scan(ctx, "calibration", file, ScanOptions(media))
    if model.where == "local":
        _output_disk("output_dir", spec.output_dir, model, {"FP8_DYNAMIC": 1, "W8A16": 1, "W4A16": 0.5}.get(spec.scheme, 2), ctx)


def _export(spec: Any, ctx: Context) -> None:
    source = env_checks.resolve("source", spec.source, "checkpoint")
    refs = [source]
    is_adapter = source.path is not None and (source.path / "adapter_config.json").is_file()
    if is_adapter and spec.merge_lora:
        if spec.base_model_path:
            refs.append(env_checks.resolve("base_model_path", spec.base_model_path))
        else:
            ctx.findings.error(
                "spec.model",
                "source is a LoRA adapter and merge_lora is true, but base_model_path is empty",
                "set base_model_path to the model the adapter was trained on",
                "base_model_path",
            )
    _models(ctx, refs)
    weights = refs[-1]
    if weights.where == "local":
        _output_disk("output_dir", spec.output_dir, weights, EXPORT_BYTES if spec.dtype != "float32" else 4, ctx)


ACTIONS: dict[str, Callable[[Any, Context], None]] = {
    "train": _train,
    "evaluate": _evaluate,
    "inference": _inference,
    "quantize": _quantize,
    "export": _export,
    "rl": _rl,
}
