"""Everything a platform needs to render or launch one train job, decided once from the spec and flags.

The job runs from a copy of the spec inside the job folder (the record's sha256 is that copy's). Where it
works, and so what a relative path in the copy means (the rule slurm.md states):
- the job folder inside the submit directory (results_dir relative, the default ./results) and no path
  map: the copy keeps the spec's paths as written and the job works in the submit directory, the
  site root, found from the job folder (`$JOB_DIR/../../..` for ./results): a site moved or copied with
  its job folder writes inside itself;
- otherwise (a path map, or a job folder outside the submit directory): the job works in its job folder
  and the copy names every path key absolute, as it was meant at submit (relative to the submit
  directory, a relative default included; under a path map, REMOTE). A spec whose path keys are all
  absolute is copied byte for byte.
An absolute path that does not exist where the job runs is named by the job's first step (preflight's
env.paths), never created there.
Nodes and GPUs come from the spec's parallelism (cosmos-rl: one replica of
tp*cp*pp*dp_shard GPUs per node, dp_replicate nodes); flags may only confirm them.
Every rendered job starts with `preflight_argv`: the environment checks, on the machine that trains.
A job's action is train (`skillbank train`) or automl (`skillbank automl ... --resume` on the spec
copy, its study in <results_dir>/automl/<study>) or rl (GRPO on an rl spec: cosmos-rl on the TOML
rendered into the job folder, or `skillbank rl --backend local`) or deft (`skillbank deft --config
<copy> --resume` on the job's allocation: platform.deft_job; `spec` is then the loop's base train spec,
the job folder lies under the loop's output_dir): `job_argv` is the command either way.

With a path map (`--path-map LOCAL=REMOTE`, skillbank.specification.pathmap) `spec` is the node's view: every
path in it, and so in every file rendered from it, is REMOTE; `spec_here()` is this machine's view
(what preflight and the record count read), and the job folder is written at the LOCAL results_dir.
A rendered script names its spec copy through `JOB_SPEC` ("$JOB_DIR/<name>"), so the job folder
finds its files from wherever it lies.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillbank import modelref
from skillbank.errors import InputError
from skillbank.runs import record as rec
from skillbank.runs.layout import job_run_dir, job_run_root
from skillbank.runs.steps import parallel_shape
from skillbank.specification.pathmap import PathMap
from skillbank.specification.train import TrainSpec

JOB_DIR = "$JOB_DIR"  # the job folder inside a rendered script (skillbank.platform.base.quote_argv keeps it a variable)
TRAIN_COMMAND = ("-m", "skillbank.cli", "train")
AUTOML_COMMAND = ("-m", "skillbank.cli", "automl")
PREFLIGHT_COMMAND = ("-m", "skillbank.cli", "preflight")
RL_COMMAND = ("-m", "skillbank.cli", "rl")
DEFT_COMMAND = ("-m", "skillbank.cli", "deft")
GRPO_SCRIPT_MODULE = "skillbank.training.cosmos_rl.grpo_script"


@dataclass(frozen=True)
class Options:
    """Platform flags (each platform reads the ones it knows)."""

    image: str | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    exclude: str | None = None  # slurm: nodes the job must not run on (--exclude; submit --retry-of adds the ones its diagnosis named)
    shm_size: str = "16g"
    rdzv_port: int = 29345
    port: int = 8000


@dataclass(frozen=True)
class AutomlJob:
    """What an automl job searches (the flags of `skillbank automl`, commands.flags.add_search_arguments)."""

    study: str
    algorithm: str
    max_trials: int
    metric: str
    params: tuple[str, ...] = ()
    ranges: tuple[tuple[str, tuple[float, float]], ...] = ()
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    search: tuple[str, ...] = ()  # --search: keys the spec fixes (user_set), searched anyway
    shape: Any = None  # runs.disk.StudyShape (the most epochs, the largest checkpoint the search can produce): the gate checks a worker's share
    storage: str | None = None  # --storage: a study shared by the workers of many jobs (None: SQLite in the study folder)

    def argv(self) -> list[str]:
        out = ["--algorithm", self.algorithm, "--max-trials", str(self.max_trials), "--metric", self.metric]
        if self.storage:
            out += ["--storage", self.storage]
        for key in self.params:
            out += ["--param", key]
        for key, (low, high) in self.ranges:
            out += ["--range", f"{key}={low!r}:{high!r}"]
        for key, values in self.choices:
            out += ["--choices", f"{key}={','.join(values)}"]
        for key in self.search:
            out += ["--search", key]
        return out


@dataclass(frozen=True)
class DeftJob:
    """What a deft job runs: the DEFT loop of a config, every round on the job's allocation
    (skillbank.platform.deft_job prepares it; the paths are the node's)."""

    config: str  # the config file as given (absolute, this machine): the record's spec path
    output_dir: str  # the loop's run folder (state.json, round_N/, report.html)
    train_spec: str  # the base train spec (the job's environment check reads it)
    data: dict = field(default_factory=dict)  # the config's keys, every path absolute: what the job folder's deft.yaml holds
    folders: tuple[tuple[str, bool], ...] = ()  # (folder, read_only): what the loop reads and writes (container mounts)

    def argv(self, nodes: int, gpus_per_node: int) -> list[str]:
        return ["--resume", "--nodes", str(nodes), "--gpus-per-node", str(gpus_per_node)]


@dataclass
class JobContext:
    job_id: str
    platform: str
    backend: str
    skill: str
    spec_path: Path
    spec: TrainSpec
    cwd: Path
    results_dir: Path
    job_dir: Path
    spec_copy: Path
    train_output_dir: Path
    nodes: int
    gpus_per_node: int
    options: Options = field(default_factory=Options)
    python: str = field(default_factory=lambda: sys.executable)
    action: str = "train"
    automl: AutomlJob | None = None
    resume_from: str | None = None  # train: a checkpoint the run starts from (`skillbank train --resume-from`)
    resume_run: str | None = None  # train: a run folder (the node's) the job continues on purpose (--resume-run, --retry-of) instead of a new one
    paths: PathMap = field(default_factory=PathMap)
    model_family: str | None = None  # rl: --model-family, for a checkpoint only the node has
    spec_data: dict | None = None  # the spec file's own keys as submit read them, node's view under a path map (what the copy holds)
    preflight_stats: dict = field(default_factory=dict)  # the gate's stats (token tally, record counts): what the suggested --time is planned from
    deft: DeftJob | None = None  # a deft job: the loop it runs

    @property
    def study_dir(self) -> Path | None:
        """An automl job's study folder: <results_dir>/automl/<study> (the same for every submit of a
        study), as the node sees it."""
        return Path(self.node(self.results_dir)) / "automl" / self.automl.study if self.automl else None

    def node(self, path: str | Path) -> str:
        """A path of this machine as the node sees it (unchanged without a path map)."""
        return self.paths.to_remote(str(path))

    def here(self, path: str | Path) -> str:
        """A path of the node's as this machine sees it (unchanged without a path map)."""
        return self.paths.to_local(str(path))

    def spec_here(self) -> TrainSpec:
        """The spec with this machine's paths (for reading the data and the model here)."""
        if not self.paths:
            return self.spec
        model = type(self.spec)
        return model.model_validate(self.paths.local(self.spec.model_dump(mode="json"), model))  # type: ignore[return-value]

    def spec_arg(self, in_script: bool) -> str:
        """The spec copy as a command names it: "$JOB_DIR/<name>" inside a rendered script (the job
        folder's own location, found when the script runs), its absolute path here otherwise."""
        return f"{JOB_DIR}/{self.spec_copy.name}" if in_script else str(self.spec_copy)

    def job_argv(self, python: str | None = None, *, resume: bool = False, in_script: bool = False) -> list[str]:
        """The job's command: `skillbank train` (resume: a requeued attempt), or `skillbank automl`,
        which always resumes its study (created by the first run, continued by a requeue or resubmit)."""
        if self.automl:
            return self.automl_argv(python, in_script=in_script)
        if self.deft:  # every attempt resumes the loop at its interrupted stage (a fresh output_dir starts it)
            return [python or self.python, *DEFT_COMMAND, "--config", self.spec_arg(in_script), *self.deft.argv(self.nodes, self.gpus_per_node)]
        if self.action == "rl":
            return self.rl_argv(python, resume=resume, in_script=in_script)
        return self.train_argv(python, resume=resume, in_script=in_script)

    @property
    def run_root(self) -> Path:
        """The job's own run root (the node's): <train.output_dir>/<job id>, what cosmos-rl's resume scan lists (runs.layout.job_run_root)."""
        return Path(self.resume_run).parent if self.resume_run else job_run_root(self.train_output_dir, self.job_id)

    @property
    def run_dir(self) -> Path:
        """The job's run folder (the node's), fixed at submit for every platform and backend: <train.output_dir>/<job id>/<submit
        time>, the only run under its run root (runs.layout.job_run_dir); --resume-run DIR / --retry-of JOB: that run's folder."""
        return Path(self.resume_run) if self.resume_run else job_run_dir(self.train_output_dir, self.job_id)

    @property
    def site_rel(self) -> str | None:
        """The submit directory (the job's work directory, where relative paths start) as seen from the job
        folder, e.g. "../../.." for results_dir ./results; None when the job works in its folder instead
        (a path map, or a job folder outside the submit directory: the copy's paths are absolute)."""
        if self.paths:
            return None
        try:
            self.job_dir.relative_to(self.cwd)
        except ValueError:
            return None
        return os.path.relpath(self.cwd, self.job_dir)

    def workdir(self, in_script: bool) -> str:
        """Where the job works: "$JOB_DIR/<site_rel>" (or "$JOB_DIR") inside a rendered script, the absolute path here."""
        if in_script:
            return f"{JOB_DIR}/{self.site_rel}" if self.site_rel else JOB_DIR
        return str(self.cwd if self.site_rel else self.job_dir)

    def where(self, path: Path) -> str:
        """A path the job's command names: relative to the work directory when the job keeps relative paths
        and the path lies in the site, else the node's absolute path."""
        if self.site_rel:
            try:
                return str(Path(path).relative_to(self.cwd))
            except ValueError:
                pass
        return str(path)

    def rl_argv(self, python: str | None = None, *, resume: bool = False, in_script: bool = False, log_dir: str | None = None,
                toml: str | None = None) -> list[str]:
        """GRPO: `skillbank rl --backend local` on the spec copy, or `skillbank rl --backend cosmos-rl --launch` on the TOML in the
        job folder (resume: the TOML with train.resume): cosmos-rl under skillbank's log watcher (metrics.jsonl, result.json, the
        recipe in every export). `log_dir` / `toml`: the launcher's --log-dir and the TOML as a script names them (a Slurm job's node 0:
        "$LOG_DIR/node_0", "$CONFIG"), else <run>/logs and the job folder's TOML."""
        if self.backend == "local":
            argv = [python or self.python, *RL_COMMAND, "--spec", self.spec_arg(in_script), "--backend", "local"]
            return [*argv, "--resume"] if resume or self.resume_run else argv  # --resume-run / --retry-of: every attempt continues that run
        name = RL_TOMLS[1 if resume else 0]
        config = toml or (f"{JOB_DIR}/{name}" if in_script else str(self.job_dir / name))
        return [python or self.python, *RL_COMMAND, "--spec", self.spec_arg(in_script), "--backend", "cosmos-rl", "--launch", "--toml", config,
                "--log-dir", log_dir or str(self.run_dir / "logs")]

    def automl_argv(self, python: str | None = None, *, in_script: bool = False) -> list[str]:
        """`skillbank automl --resume` on the spec copy, the study named and its folder fixed."""
        assert self.automl is not None
        return [
            python or self.python, *AUTOML_COMMAND, "--skill", self.skill, "--spec", self.spec_arg(in_script),
            "--study", self.automl.study, "--out", self.where(self.study_dir) if self.study_dir else "", "--resume", "--backend", self.backend,
            *self.automl.argv(),
        ]

    def abs(self, path: str) -> Path:
        """A spec path as the job sees it: relative paths are relative to the submit directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.cwd / p).resolve()

    def train_argv(self, python: str | None = None, *, resume: bool = False, in_script: bool = False, run_dir: str | None = None) -> list[str]:
        """`skillbank train` on the spec copy, direct (AutoML routing was decided before submitting), in the job's
        run folder (`run_dir`: as a script names it, e.g. "$RUN_DIR")."""
        argv = [python or self.python, *TRAIN_COMMAND, "--spec", self.spec_arg(in_script), "--backend", self.backend, "--automl-policy", "off",
                "--run-dir", run_dir or self.where(self.run_dir)]
        if self.resume_from:  # a requeued attempt (--resume too) continues its own newest checkpoint when it has one
            argv += ["--resume-from", self.resume_from]
        return [*argv, "--resume"] if resume or self.resume_run else argv  # --resume-run / --retry-of: every attempt continues that run

    @property
    def cpu_only(self) -> bool:
        """A job submitted with --gpus-per-node 0 (any platform): the local backend trains on CPU ranks
        (as many as the spec's dp_shard*tp*cp*pp), and no GPU is asked for or checked."""
        return self.gpus_per_node == 0

    @property
    def ranks(self) -> int:
        """Training processes per node: dp_shard*tp*cp*pp (GPUs, or CPU ranks for a CPU job)."""
        return parallel_shape(self.spec)[1]

    def preflight_argv(self, python: str | None = None, *, in_script: bool = False) -> list[str]:
        """The job's first step: `skillbank preflight --only env --runs-on here` on the spec copy, on the
        machine that trains (HF_TOKEN, redis-server, GPUs, free disk at train.output_dir, the model).
        It exits 2 on a finding, so the script stops before cosmos-rl starts; spec and data were
        checked at submit."""
        spec = self.deft.train_spec if self.deft else self.spec_arg(in_script)  # a deft job: the rounds' base train spec
        return [
            python or self.python, *PREFLIGHT_COMMAND, "--skill", self.skill, "--action", "rl" if self.action == "rl" else "train", "--spec", spec,
            "--only", "env", "--runs-on", "here", "--backend", self.backend,
            *([] if self.cpu_only else ["--gpus-per-node", str(self.gpus_per_node)]),
            *self.study_disk_args(),
        ]

    def study_disk_args(self) -> list[str]:
        """An automl job's gate checks its worker's share of the study's disk (runs.disk.study_disk), as plan --trials and the dry run state it."""
        if self.automl is None:
            return []
        if self.automl.shape is None:
            return ["--trials", str(self.automl.max_trials)]
        return self.automl.shape.preflight_flags()

    def dataset_dirs(self) -> list[Path]:
        """Folders the job reads data from: each annotation file's folder and each media folder."""
        out: list[Path] = []
        for split in (self.spec.custom.train_dataset, getattr(self.spec.custom, "val_dataset", None)):
            if split is None:
                continue
            if split.annotation_path:
                out.append(self.abs(split.annotation_path).parent)
            if split.media_path:
                out.append(self.abs(split.media_path))
        return out

    def model_ref(self) -> modelref.Ref:
        """policy.model_name_or_path, relative paths taken from the submit directory."""
        return modelref.parse(self.spec.policy.model_name_or_path, base=self.cwd)

    def local_model_dir(self) -> Path | None:
        """The model folder when policy.model_name_or_path is a local path (not a hub id); a path
        missing here may exist on the training machine."""
        ref = self.model_ref()
        return self.abs(ref.value) if ref.path is not None else None

    def hub_model(self) -> str | None:
        """owner/repo when the model comes from the hub (hf_model://owner/repo or a bare id); an
        InputError when it names neither a path nor a hub repo."""
        ref = self.model_ref()
        if ref.path is not None:
            return None
        if ref.kind == "invalid":
            raise InputError(
                f"{ref.value!r} {ref.problem}",
                where="policy.model_name_or_path",
                fix="use hf_model://owner/repo, owner/repo, or the path of a folder with config.json",
            )
        return ref.repo


RL_TOMLS = ("cosmos-rl.toml", "cosmos-rl-resume.toml")  # an rl job's TOMLs in its job folder (fresh, train.resume)


def check_shape(spec: TrainSpec, nodes: int | None, gpus_per_node: int | None, *, exact_gpus: bool) -> tuple[int, int]:
    """Flags confirm the spec's shape; a mismatch is an input error naming the key to change.

    Slurm requests exactly the spec's GPUs (`exact_gpus`), or none (0: a CPU job, the spec's shape in CPU
    ranks); on one machine --gpus-per-node says what the machine has, which preflight compares with the spec."""
    spec_nodes, spec_gpus = parallel_shape(spec)
    if nodes is not None and nodes != spec_nodes:
        raise InputError(
            f"--nodes {nodes} disagrees with the spec: policy.parallelism.dp_replicate_size is {spec_nodes}",
            where="policy.parallelism.dp_replicate_size",
            fix=f"set policy.parallelism.dp_replicate_size={nodes} in the spec (nodes = data-parallel replicas), or drop --nodes",
        )
    if exact_gpus and gpus_per_node not in (None, 0) and gpus_per_node != spec_gpus and not hasattr(spec.policy.parallelism, "dp_replicate_size"):
        raise InputError(
            f"--gpus-per-node {gpus_per_node} disagrees with the rl spec: policy {spec.policy_gpus} + rollout {spec.rollout.num_gpus} GPUs = {spec_gpus}",  # type: ignore[attr-defined]
            where="rollout.num_gpus", fix=f"set policy.parallelism.dp_shard_size and rollout.num_gpus so they add up to {gpus_per_node}, or drop --gpus-per-node")
    if exact_gpus and gpus_per_node not in (None, 0) and gpus_per_node != spec_gpus:
        raise InputError(
            f"--gpus-per-node {gpus_per_node} disagrees with the spec: dp_shard_size*tp_size*cp_size*pp_size is {spec_gpus}",
            where="policy.parallelism.dp_shard_size",
            fix=f"set policy.parallelism.dp_shard_size so that dp_shard*tp*cp*pp = {gpus_per_node}, or drop --gpus-per-node",
        )
    return spec_nodes, spec_gpus if gpus_per_node is None else gpus_per_node


def build_context(
    *,
    platform: str,
    backend: str,
    skill: str,
    spec_path: str,
    spec: TrainSpec,
    nodes: int | None,
    gpus_per_node: int | None,
    options: Options,
    job_id: str | None = None,
    cwd: Path | None = None,
    automl: AutomlJob | None = None,
    paths: PathMap | None = None,
    spec_data: dict | None = None,
    action: str | None = None,
    model_family: str | None = None,
    deft: DeftJob | None = None,
) -> JobContext:
    """`spec` is the node's view under a path map (`paths`); `spec_data` the spec file's keys in that view.
    A deft job (`deft`): `spec` is the loop's base train spec; the job folder lies under the loop's output_dir."""
    cwd = (cwd or Path.cwd()).resolve()
    paths = paths or PathMap(cwd=cwd)
    src = Path(spec_path).expanduser()
    src = src if src.is_absolute() else (cwd / src)
    n_nodes, n_gpus = check_shape(spec, nodes, gpus_per_node, exact_gpus=platform == "slurm")
    if platform in ("local", "docker") and n_nodes > 1:
        raise InputError(
            f"{platform} runs on one machine but the spec asks for {n_nodes} nodes (policy.parallelism.dp_replicate_size)",
            where="policy.parallelism.dp_replicate_size",
            fix="use --platform slurm for multi-node training, or set policy.parallelism.dp_replicate_size=1",
        )
    if backend == "local" and n_nodes > 1:
        raise InputError(
            "the local backend (torchrun + FSDP2) trains on one node only",
            where="--backend",
            fix="use --backend cosmos-rl for multi-node training, or set policy.parallelism.dp_replicate_size=1",
        )
    if n_gpus == 0 and backend != "local":
        raise InputError(
            f"--gpus-per-node 0 asks for a CPU job, but the {backend} backend trains on GPUs only",
            where="--gpus-per-node",
            fix="add --backend local (torchrun + FSDP2 on CPU ranks: the spec's dp_shard_size*tp*cp*pp), or ask for GPUs",
        )
    if automl is not None and n_nodes > 1:
        raise InputError(
            f"an automl study runs its trials on one machine but the spec asks for {n_nodes} nodes (policy.parallelism.dp_replicate_size)",
            where="policy.parallelism.dp_replicate_size",
            fix="set policy.parallelism.dp_replicate_size=1 for the study, or submit a multi-node train job with --action train",
        )
    if deft is not None and n_nodes > 1:
        raise InputError(
            f"a DEFT job runs the loop and its rounds on one node, but its train spec asks for {n_nodes} nodes (policy.parallelism.dp_replicate_size)",
            where="policy.parallelism.dp_replicate_size",
            fix="write the loop's train spec for one node (`skillbank deft init ... --nodes 1`); rounds across nodes need a node launcher per round, not there yet",
        )
    action = "automl" if automl else ("deft" if deft else (action or "train"))
    job_id = job_id or rec.new_job_id(action)
    results_dir = _abs(paths.to_local(deft.output_dir if deft else spec.results_dir), cwd)  # where the record and the job folder are written here
    jdir = rec.job_dir(results_dir, job_id)
    if deft:
        src = Path(deft.config)
    return JobContext(
        job_id=job_id,
        platform=platform,
        backend=backend,
        skill=skill,
        spec_path=src.resolve(),
        spec=spec,
        cwd=cwd,
        results_dir=results_dir,
        job_dir=jdir,
        spec_copy=jdir / ("deft.yaml" if deft else f"spec{src.suffix or '.yaml'}"),
        train_output_dir=_abs(deft.output_dir if deft else spec.train.output_dir, cwd),
        nodes=n_nodes,
        gpus_per_node=n_gpus,
        options=options,
        action=action,
        automl=automl,
        paths=paths,
        spec_data=spec_data,
        model_family=model_family,
        deft=deft,
    )


def copy_spec(ctx: JobContext, *, rewrite: bool = False) -> str:
    """Copy the spec into the job folder (the job runs from the copy) and return its sha256. A job that
    works in the submit directory (ctx.site_rel) gets the file byte for byte, its relative paths kept;
    otherwise the copy names every path absolute (`travelling_spec`), and a spec that already does,
    without a path map, is copied byte for byte."""
    try:
        ctx.job_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the job folder {ctx.job_dir} here ({exc.strerror or exc})", where="results_dir",
                         fix="map results_dir to a folder of this machine with --path-map LOCAL=REMOTE, or set results_dir to one") from None
    if ctx.deft:  # the config as the node reads it, every path absolute
        from skillbank.specification.deft import DeftConfig
        from skillbank.specification.io import write_spec

        write_spec(ctx.spec_copy, ctx.deft.data, DeftConfig)
        return rec.sha256_file(ctx.spec_copy)
    if ctx.site_rel:  # the job works in the submit directory: paths as written
        data = copy.deepcopy(ctx.spec_data) if ctx.spec_data is not None else {}
        changed = ["fitted"] if rewrite else []
    else:
        data, changed = travelling_spec(ctx)
        changed = changed or (["fitted"] if rewrite else [])
    if ctx.paths or changed:
        from skillbank.specification.io import write_spec

        write_spec(ctx.spec_copy, data, type(ctx.spec))
    else:
        shutil.copyfile(ctx.spec_path, ctx.spec_copy)
    return rec.sha256_file(ctx.spec_copy)


def travelling_spec(ctx: JobContext) -> tuple[dict, list[str]]:
    """The spec file's keys for the copy, and the path keys made absolute: the job works in its job
    folder, so a relative path (a value of the file, or a relative default such as results_dir
    './results') is written as it was meant at submit: from the submit directory, and under a path map
    as the node names it (one no LOCAL covers stays relative: it starts at the job folder there). A
    model key naming a hub id is left alone."""
    from skillbank.specification.io import read_spec_file

    data = copy.deepcopy(ctx.spec_data) if ctx.spec_data is not None else read_spec_file(ctx.spec_path)
    return data, absolute_paths(data, ctx.spec.model_dump(mode="json"), type(ctx.spec), ctx.cwd, ctx.paths)


def absolute_paths(data: dict, effective: dict, model: type, cwd: Path, paths: PathMap | None = None) -> list[str]:
    """Write into `data` each path key that is relative in `effective` (the validated spec) as meant from
    `cwd` (under `paths`, as the node names it); a hub model id is left alone. Returns the keys written."""
    from skillbank.specification.overrides import get_dotted, set_dotted
    from skillbank.specification.pathmap import path_keys

    changed: list[str] = []
    for key, is_model in path_keys(model):
        value = get_dotted(effective, key)
        if not isinstance(value, str) or not value.strip() or Path(value).expanduser().is_absolute():
            continue
        if is_model and modelref.parse(value, base=cwd).path is None:
            continue  # a hub id (owner/repo, hf_model://)
        moved = paths.to_remote(value) if paths else os.path.normpath(cwd / Path(value).expanduser())  # symlinks kept
        if Path(moved).is_absolute():
            set_dotted(data, key, moved)
            changed.append(key)
    return changed


def _abs(path: str, cwd: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else (cwd / p).resolve()
