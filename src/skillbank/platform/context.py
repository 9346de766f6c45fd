"""Everything a platform needs to render or launch one train job, decided once from the spec and flags.

The job runs from a copy of the spec inside the job folder (the record's sha256 is that copy's), with
the submit directory as its working directory, so relative spec paths mean what they meant at submit.
Nodes and GPUs come from the spec's parallelism (cosmos-rl: one replica of
tp*cp*pp*dp_shard GPUs per node, dp_replicate nodes); flags may only confirm them.
Every rendered job starts with `preflight_argv`: the environment checks, on the machine that trains.
A job's action is train (`skillbank train`) or automl (`skillbank automl ... --resume` on the spec
copy, its study in <results_dir>/automl/<study>): `job_argv` is the command either way.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from skillbank import modelref
from skillbank.errors import InputError
from skillbank.platform import record as rec
from skillbank.spec.train import TrainSpec

TRAIN_COMMAND = ("-m", "skillbank.cli", "train")
AUTOML_COMMAND = ("-m", "skillbank.cli", "automl")
PREFLIGHT_COMMAND = ("-m", "skillbank.cli", "preflight")


@dataclass(frozen=True)
class Options:
    """Platform flags (each platform reads the ones it knows)."""

    image: str | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    shm_size: str = "16g"
    rdzv_port: int = 29345
    port: int = 8000


@dataclass(frozen=True)
class AutomlJob:
    """What an automl job searches (the flags of `skillbank automl`, automl.command.add_search_arguments)."""

    study: str
    algorithm: str
    max_trials: int
    metric: str
    params: tuple[str, ...] = ()
    ranges: tuple[tuple[str, tuple[float, float]], ...] = ()
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def argv(self) -> list[str]:
        out = ["--algorithm", self.algorithm, "--max-trials", str(self.max_trials), "--metric", self.metric]
        for key in self.params:
            out += ["--param", key]
        for key, (low, high) in self.ranges:
            out += ["--range", f"{key}={low!r}:{high!r}"]
        for key, values in self.choices:
            out += ["--choices", f"{key}={','.join(values)}"]
        return out


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

    @property
    def study_dir(self) -> Path | None:
        """An automl job's study folder: <results_dir>/automl/<study> (the same for every submit of a study)."""
        return self.results_dir / "automl" / self.automl.study if self.automl else None

    def job_argv(self, python: str | None = None, *, resume: bool = False) -> list[str]:
        """The job's command: `skillbank train` (resume: a requeued attempt), or `skillbank automl`,
        which always resumes its study (created by the first run, continued by a requeue or resubmit)."""
        return self.automl_argv(python) if self.automl else self.train_argv(python, resume=resume)

    def automl_argv(self, python: str | None = None) -> list[str]:
        """`skillbank automl --resume` on the spec copy, the study named and its folder fixed."""
        assert self.automl is not None
        return [
            python or self.python, *AUTOML_COMMAND, "--skill", self.skill, "--spec", str(self.spec_copy),
            "--study", self.automl.study, "--out", str(self.study_dir), "--resume", "--backend", self.backend, *self.automl.argv(),
        ]

    def abs(self, path: str) -> Path:
        """A spec path as the job sees it: relative paths are relative to the submit directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.cwd / p).resolve()

    def train_argv(self, python: str | None = None, *, resume: bool = False) -> list[str]:
        """`skillbank train` on the spec copy, direct (AutoML routing was decided before submitting)."""
        argv = [python or self.python, *TRAIN_COMMAND, "--spec", str(self.spec_copy), "--backend", self.backend, "--automl-policy", "off"]
        return [*argv, "--resume"] if resume else argv

    @property
    def cpu_only(self) -> bool:
        """A Slurm job submitted with --gpus-per-node 0: the local backend trains on CPU ranks."""
        return self.gpus_per_node == 0

    @property
    def ranks(self) -> int:
        """Training processes per node: dp_shard*tp*cp*pp (GPUs, or CPU ranks for a CPU job)."""
        return parallel_shape(self.spec)[1]

    def preflight_argv(self, python: str | None = None) -> list[str]:
        """The job's first step: `skillbank preflight --only env --runs-on here` on the spec copy, on the
        machine that trains (HF_TOKEN, redis-server, GPUs, free disk at train.output_dir, the model).
        It exits 2 on a finding, so the script stops before cosmos-rl starts; spec and data were
        checked at submit."""
        return [
            python or self.python, *PREFLIGHT_COMMAND, "--skill", self.skill, "--action", "train", "--spec", str(self.spec_copy),
            "--only", "env", "--runs-on", "here", "--backend", self.backend,
            *([] if self.cpu_only else ["--gpus-per-node", str(self.gpus_per_node)]),
        ]

    def dataset_dirs(self) -> list[Path]:
        """Folders the job reads data from: each annotation file's folder and each media folder."""
        out: list[Path] = []
        for split in (self.spec.custom.train_dataset, self.spec.custom.val_dataset):
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


def parallel_shape(spec: TrainSpec) -> tuple[int, int]:
    """(nodes, GPUs per node): dp_replicate_size, and dp_shard * tp * cp * pp."""
    par = spec.policy.parallelism
    return par.dp_replicate_size, par.dp_shard_size * par.tp_size * par.cp_size * par.pp_size


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
) -> JobContext:
    cwd = (cwd or Path.cwd()).resolve()
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
    if n_gpus == 0 and (platform != "slurm" or backend != "local"):
        raise InputError(
            f"--gpus-per-node 0 (a CPU job) is for --platform slurm with --backend local; {platform} with {backend} trains on GPUs",
            where="--gpus-per-node",
            fix="add --backend local (torchrun + FSDP2 on CPU ranks: the spec's dp_shard_size*tp*cp*pp), or ask for GPUs",
        )
    if automl is not None and n_nodes > 1:
        raise InputError(
            f"an automl study runs its trials on one machine but the spec asks for {n_nodes} nodes (policy.parallelism.dp_replicate_size)",
            where="policy.parallelism.dp_replicate_size",
            fix="set policy.parallelism.dp_replicate_size=1 for the study, or submit a multi-node train job with --action train",
        )
    job_id = job_id or rec.new_job_id("automl" if automl else "train")
    results_dir = _abs(spec.results_dir, cwd)
    jdir = rec.job_dir(results_dir, job_id)
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
        spec_copy=jdir / f"spec{src.suffix or '.yaml'}",
        train_output_dir=_abs(spec.train.output_dir, cwd),
        nodes=n_nodes,
        gpus_per_node=n_gpus,
        options=options,
        action="automl" if automl else "train",
        automl=automl,
    )


def copy_spec(ctx: JobContext) -> str:
    """Copy the spec into the job folder (the job runs from the copy) and return its sha256."""
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ctx.spec_path, ctx.spec_copy)
    return rec.sha256_file(ctx.spec_copy)


def _abs(path: str, cwd: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else (cwd / p).resolve()
