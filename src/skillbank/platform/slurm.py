"""Slurm platform: an sbatch script for multi-node cosmos-rl SFT and GRPO, and its submit / status / logs / cancel.

Shape (docs: shared/docs/cosmos-rl.md; cosmos_rl/launcher/launch_all.py, v0.4.7):
- one cosmos-rl replica spans the allocation: `--nodes` = policy.parallelism.dp_replicate_size,
  `--gpus-per-node` = dp_shard_size * tp_size * cp_size * pp_size, one task per node;
- `srun` runs cosmos-node.sh (rendered beside job.sbatch) once per node. Node 0 runs `skillbank train
  --backend cosmos-rl --run-dir <run> --log-dir <run>/cosmos-rl-logs/node_0 --launcher-args ...`: the same
  launch and log watcher as a foreground `skillbank train` (its TOML rendered on the node from the real
  files, metrics.jsonl, tensorboard/, result.json, the recipe in every export, a summary with the final
  validation loss), its exit code the watcher's verdict, so Slurm's final state is the run's. The other
  nodes run cosmos-rl's launcher alone on the TOML node 0 wrote. Every launcher gets `--num-workers
  $SLURM_NNODES --worker-idx $SLURM_NODEID --node-ip-list <nodes from scontrol show hostnames,
  ';'-separated>` (the launcher splits the list on ';'); node 0 starts the controller on --port, the
  other nodes get `--url <first node>:<port>` and connect to it;
- an rl job (GRPO) has the same shape: node 0 runs `skillbank rl --backend cosmos-rl --launch --toml <the job folder's TOML>`
  (cosmos-rl.toml, or cosmos-rl-resume.toml when the run folder has a checkpoint), the same launcher and log watcher
  (metrics.jsonl with the rewards, tensorboard/, result.json, the recipe in every export), the other nodes the launcher
  on the same TOML;
- each node logs to `--log-dir <run>/cosmos-rl-logs/node_<i>`; the watcher reads every node's;
- the first step runs `skillbank preflight --only env --runs-on here` on every node (HF_TOKEN,
  redis-server, GPUs, free disk, the model): a finding ends the job before the download and cosmos-rl;
- `#SBATCH --requeue`: a requeued (or re-submitted) job whose run folder has a checkpoint runs
  `skillbank train --resume`: it continues from its own run's newest complete checkpoint;
- a time limit: `#SBATCH --signal=B:USR1@<lead>`, the training step in the background and a USR1 trap that
  requeues the same job id after the no-progress guard (platform.requeue); --time capped by the partition's
  limit, --exclude checked against sinfo (platform.slurm_limits);
- the run folder is fixed at submit (<train.output_dir>/<job id>/<stamp>, alone under its run root: the record's outputs.run_dir) for
  both backends.
- where it runs: with `--image IMAGE`, every srun goes into that container through pyxis/enroot
  (`--container-image`, `--container-mounts` of the spec's folders and HF_HOME at the same paths);
  without, the Python environment skillbank was submitted from (SKILLBANK_VENV) comes first on PATH;
- portable: the job folder is found when the script runs (SKILLBANK_JOB_DIR, else the submitted script's
  folder from `scontrol show job`, SLURM_SUBMIT_DIR, the script's folder: base.job_dir_lines), and the
  spec copy, the node script, the batch log (`--output` is relative: submit runs `sbatch --chdir <job
  folder>`) are named from it, so the folder can be copied anywhere; the job works in SKILLBANK_WORKDIR
  (default: the submit directory found from the job folder when the spec's relative paths stay relative,
  else the job folder: context.JobContext.site_rel); HF_HOME defaults to the node's own
  (~/.cache/huggingface there); the other locations are variables with defaults (SKILLBANK_VENV +
  SKILLBANK_ROOT, or SKILLBANK_IMAGE + SKILLBANK_MOUNTS, which mount the job folder too); every other
  path in it is one the spec names (REMOTE under --path-map), and the dataset script is looked up where the job runs.
- a CPU job (`--gpus-per-node 0`, local backend only): `--cpus-per-task` = the spec's ranks instead of
  GRES and `--exclusive`, CUDA_VISIBLE_DEVICES empty; the training srun passes the CPUs on (srun >= 22.05
  does not inherit them).
- status / logs / cancel live in `slurm_jobs`: squeue, then `scontrol show job`, then sacct, the final
  state kept in the record; cancel waits for Slurm's end of the job, then stops any process on this
  machine that still carries the job's SKILLBANK_JOB_ID (exported by the script).
The TOML is rendered on node 0 when each attempt starts (`skillbank train`, training.cosmos_rl.toml),
from the spec copy and the files as the node sees them; submit renders one into the job folder for
review (cosmos-rl.toml). Credentials are inherited by name (`--export=ALL`), never written.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from skillbank.errors import InputError, RunError
from skillbank.platform.base import FIRST_STEP, Rendered, call, have, job_dir_lines, quote_argv
from skillbank.platform import requeue
from skillbank.platform.context import JobContext
from skillbank.runs.layout import TOML_FILE as TOML_NAME
from skillbank.platform.slurm_jobs import cancel, logs, refresh  # noqa: F401 - the platform interface: status / logs / cancel

TIME_FORMAT = re.compile(r"^(\d+-)?\d{1,3}:\d{2}:\d{2}$")
SCRIPT_NAME = "job.sbatch"


def _q(value: object) -> str:
    return shlex.quote(str(value))


def check_options(ctx: JobContext) -> None:
    if ctx.options.time and not TIME_FORMAT.match(ctx.options.time):
        raise InputError(f"--time {ctx.options.time!r} is not a Slurm time limit", where="--time", fix="use HH:MM:SS or D-HH:MM:SS, e.g. 04:00:00")


def resources(ctx: JobContext) -> list[str]:
    """What a node must give: all of a GPU node (its GPUs as GRES, --exclusive), or for a CPU job
    (--gpus-per-node 0) one CPU per training rank and no GRES, so it shares a node like any CPU job."""
    if ctx.cpu_only:
        return [f"#SBATCH --cpus-per-task={ctx.ranks}"]
    return [f"#SBATCH --gpus-per-node={ctx.gpus_per_node}", "#SBATCH --exclusive"]


def sbatch_header(ctx: JobContext, *, signal: bool = True) -> list[str]:
    """The #SBATCH lines; `signal`: the body traps USR1 (requeue_lines), so the time limit's signal is asked for (an
    untrapped USR1 would end the batch shell)."""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=skillbank-{ctx.job_id}",
        f"#SBATCH --nodes={ctx.nodes}",
        "#SBATCH --ntasks-per-node=1",
        *resources(ctx),
        "#SBATCH --output=slurm-%j.out",  # relative: the job folder (submit runs sbatch --chdir <job folder>; by hand: cd there first)
        "#SBATCH --open-mode=append",
        "#SBATCH --requeue",  # a preempted job (or one on a failed node) goes back to the queue under the same id
        *([f"#SBATCH --signal=B:USR1@{lead(ctx)}"] if signal else []),  # USR1 to the batch shell before the limit: it requeues itself (platform.requeue)
        "#SBATCH --export=ALL",
    ]
    for flag, value in (("partition", ctx.options.partition), ("account", ctx.options.account), ("time", ctx.options.time),
                        ("exclude", ctx.options.exclude)):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    return lines


def lead(ctx: JobContext) -> int:
    """Seconds before --time that Slurm signals the job (platform.requeue.signal_lead)."""
    return requeue.signal_lead(requeue.limit_seconds(ctx.options.time))


def requeue_lines(ctx: JobContext, run_dir: Path | None) -> list[str]:
    """RUN_DIR (the run the guard judges; none for a study) and the USR1 trap (platform.requeue.script_lines)."""
    lines = [f"RUN_DIR={_q(ctx.where(run_dir))}  # the run folder, fixed at submit" + (" (relative: to SKILLBANK_WORKDIR)" if ctx.site_rel else "")] if run_dir else []
    return [*lines, *requeue.script_lines("$RUN_DIR" if run_dir else None, requeue.limit_seconds(ctx.options.time), lead(ctx)), ""]


def venv_dir(ctx: JobContext) -> Path:
    """The Python environment skillbank was submitted from (the default of SKILLBANK_VENV)."""
    return Path(ctx.python).parent.parent


def container_mounts(ctx: JobContext) -> str:
    """pyxis `--container-mounts`: the folders the spec names, each at the same path inside (data and a
    local model read-only), and HF_HOME (a variable, expanded on the node)."""
    from skillbank.platform.docker import spec_mounts

    items = [f"{host}:{host}" + (":ro" if ro else "") for host, ro in spec_mounts(ctx)]
    site = ["$SKILLBANK_WORKDIR:$SKILLBANK_WORKDIR"] if ctx.site_rel else []  # the submit directory the relative paths start at
    return ",".join([*items, *site, "$JOB_DIR:$JOB_DIR", "$HF_HOME:$HF_HOME"])  # the job folder wherever it lies, the node's HF_HOME


def environment(ctx: JobContext) -> list[str]:
    """The variables at the top of the script: where the job folder, the environment, the bank and the
    caches live. JOB_DIR is found when the script runs; HF_HOME is the node's own; the others default
    to the submitting machine's locations as the node sees them (--path-map): export one before
    `sbatch` (or edit its line) to run the same script elsewhere. Under a path map a location of this
    machine that no LOCAL covers is not written at all (the node's own is used)."""
    lines = [
        *job_dir_lines(ctx.spec_copy.name),
        "# --- Where things are. Export a variable before sbatch, or edit its line, to run this script elsewhere.",
        "# --- Every other path is one the spec names.",
        'export HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}"  # the node\'s model cache',
        f'SKILLBANK_WORKDIR="$(cd "${{SKILLBANK_WORKDIR:-{ctx.workdir(in_script=True)}}}" && pwd)"  # {_workdir_note(ctx)}',
        *(['export CUDA_VISIBLE_DEVICES=""  # a CPU job: no GPU, whatever the node has'] if ctx.cpu_only else []),
    ]
    if ctx.options.image:
        lines += [
            "# The container (pyxis/enroot): the image provides python, skillbank (its SKILLBANK_ROOT), cosmos-rl, redis-server.",
            f"SKILLBANK_IMAGE=\"${{SKILLBANK_IMAGE:-{ctx.options.image}}}\"  # a registry reference or an .sqsh file",
            f"SKILLBANK_MOUNTS=\"${{SKILLBANK_MOUNTS:-{container_mounts(ctx)}}}\"",
            'IN_ENV=(--container-image="$SKILLBANK_IMAGE" --container-mounts="$SKILLBANK_MOUNTS" '
            '--container-workdir="$SKILLBANK_WORKDIR" --container-env=HF_HOME)',
        ]
    else:
        root = _bank_root()
        venv = _node_or(ctx, venv_dir(ctx), "")
        root = _node_or(ctx, root, "") if root else None
        lines += [
            "# The Python environment with skillbank, cosmos-rl and redis-server (bash scripts/setup.sh --gpu), on a shared filesystem.",
            f"SKILLBANK_VENV=\"${{SKILLBANK_VENV:-{venv}}}\"" + ("" if venv else "  # empty: the python first on the node's PATH"),
            *([f"export SKILLBANK_ROOT=\"${{SKILLBANK_ROOT:-{root}}}\"  # the bank: config.json and skills/"] if root else []),
            'if [ -n "$SKILLBANK_VENV" ]; then export PATH="$SKILLBANK_VENV/bin:$PATH"; fi',
            "IN_ENV=()  # srun options; a container job puts pyxis' here",
        ]
    return lines


def _workdir_note(ctx: JobContext) -> str:
    if ctx.site_rel:
        return f"the submit directory, {ctx.site_rel} from the job folder: the spec copy's relative paths start here"
    return "the job works in its folder: the spec copy names its paths absolute"


def python_where(ctx: JobContext) -> str:
    """Where the job's python comes from, as the script says it (the record's note tells the same)."""
    if ctx.options.image:
        return f"the container {ctx.options.image} (pyxis/enroot: srun --container-image; the spec's folders and HF_HOME mounted at the same paths)"
    venv = _node_or(ctx, venv_dir(ctx), "")
    if venv:
        return f"the Python environment {venv} (SKILLBANK_VENV's default in job.sbatch" + (", this machine's as the node names it)" if ctx.paths else ")")
    return "the python first on the node's PATH (no --path-map LOCAL covers this machine's environment; export SKILLBANK_VENV before sbatch to pick one)"


def _node_or(ctx: JobContext, path: object, fallback: str) -> str:
    """A location of this machine as the node knows it: itself without a path map, its REMOTE under
    one, `fallback` when no LOCAL covers it (never bake this machine's path into a node's script)."""
    if not ctx.paths:
        return str(path)
    return ctx.node(str(path)) if ctx.paths.covered(str(path)) else fallback


def _bank_root() -> str | None:
    from skillbank.paths import bank_root

    try:
        return str(bank_root())
    except InputError:
        return None


def srun(*options: str) -> str:
    """srun in the job's environment (the container's options when there is one)."""
    return " ".join(['srun ${IN_ENV[@]+"${IN_ENV[@]}"}', *options])  # empty-array safe under set -u on bash < 4.4


def _prelude(ctx: JobContext) -> list[str]:
    par = ctx.spec.policy.parallelism
    where = "in the container SKILLBANK_IMAGE names (pyxis/enroot)" if ctx.options.image else "in the Python environment SKILLBANK_VENV names"
    what = (f"AutoML study {ctx.automl.study} ({ctx.backend} trials)" if ctx.automl else f"DEFT loop ({ctx.backend} rounds)" if ctx.deft
            else f"{ctx.backend} {'GRPO' if ctx.action == 'rl' else 'SFT'}")
    shape = f"{ctx.ranks} CPU rank(s), no GPU" if ctx.cpu_only else f"{ctx.gpus_per_node} GPU(s)"
    layout = (f"policy tp {par.tp_size} x dp_shard {par.dp_shard_size} + rollout.num_gpus {ctx.spec.rollout.num_gpus}" if ctx.action == "rl"  # type: ignore[attr-defined]
              else f"policy.parallelism: dp_replicate {par.dp_replicate_size}, dp_shard {par.dp_shard_size}, tp {par.tp_size}, cp {par.cp_size}, pp {par.pp_size}")
    return [
        f"# skillbank job {ctx.job_id}: {what} on {ctx.nodes} node(s) x {shape}",
        f"#   ({layout}).",
        f"# Submit from the job folder, wherever it was copied: cd <job folder> && sbatch {SCRIPT_NAME}  (or: skillbank submit --platform slurm ...).",
        "# HF_TOKEN / WANDB_API_KEY are inherited from the submitting shell by name (--export=ALL); no value is written here.",
        f"# Every step runs {where}.",
        "set -euo pipefail",
        "",
        *environment(ctx),
        "",
        'cd "$SKILLBANK_WORKDIR"',
        "ATTEMPT=${SLURM_RESTART_COUNT:-0}  # 0 on the first start, N after the Nth requeue",
        "export SKILLBANK_ATTEMPT=$ATTEMPT  # the run records its attempt in the job folder's node.json",
        f"export SKILLBANK_JOB_ID={ctx.job_id}  # marks every process of this job (jobs cancel checks none is left)",
        'echo "skillbank: job ${SLURM_JOB_ID:-?} attempt $ATTEMPT on $(hostname) at $(date -u +%FT%TZ)"',
    ]


def render_toml(ctx: JobContext, run_dir: Path) -> tuple[Path, list[str]]:
    """cosmos-rl's TOML as submit sees it, into the job folder for review (cosmos-rl.toml): node 0 renders the
    one the run uses into the run folder when each attempt starts, from the files where the job runs."""
    from skillbank.training.cosmos_rl import toml as cosmos_toml
    from skillbank.training.cosmos_rl.family import family_of

    model_dir = ctx.local_model_dir()  # the node's path under a path map
    model = str(model_dir) if model_dir is not None else str(ctx.hub_model())
    here = Path(ctx.here(model_dir)) if model_dir is not None else None  # read config.json where it is on this machine
    family = family_of(str(here) if here is not None and here.exists() else model if model_dir is not None else ctx.spec.policy.model_name_or_path)
    counts = cosmos_toml.train_steps(ctx.spec_here())  # the records are counted where they are here
    review = ctx.job_dir / "cosmos-rl.toml"
    try:
        built = cosmos_toml.build_toml(ctx.spec, model=model, family=family, run_dir=run_dir, run_id=ctx.job_id, resume=ctx.resume_from or False, counts=counts)
    except TypeError as exc:  # the backend's API moved: say so instead of writing a wrong file
        raise RunError(f"cannot render the cosmos-rl TOML with skillbank.training.cosmos_rl.toml: {exc}") from None
    cosmos_toml.write_toml(review, built.data)
    return review, list(built.notes)


SCRIPT_MODULE = "skillbank.training.cosmos_rl.script"  # the dataset script cosmos-rl runs, found where the job runs
NODE_SCRIPT = "cosmos-node.sh"  # one node's command of a cosmos-rl train job (srun runs it on every node)
TOML_WAIT_S = 3600  # the other nodes wait this long for node 0's TOML (a hub download comes first)


def node_script(ctx: JobContext) -> Path:
    """cosmos-node.sh: node 0 runs skillbank (launcher + log watcher), the other nodes the launcher alone. SFT: `skillbank
    train`, the others on the TOML node 0 renders into the run folder; GRPO: `skillbank rl --launch` on the TOML job.sbatch
    picked from the job folder ($CONFIG: fresh, or with train.resume), the others on the same TOML. Reads the variables
    job.sbatch exports."""
    from skillbank.platform.base import shell_script

    launch_args = '    --launcher-args "$(printf \'%q \' "${LAUNCH[@]}")"'
    if ctx.action == "rl":
        quoted = quote_argv(ctx.rl_argv("python", in_script=True, toml="$CONFIG", log_dir="$LOG_DIR/node_0"))
        first, config, others = [f"  exec {quoted} \\", launch_args], '"$CONFIG"', []
        what = "skillbank rl --launch"
    else:
        quoted = quote_argv(ctx.train_argv("python", in_script=True, run_dir="$RUN_DIR"))  # the run folder as job.sbatch names it
        first, config = [f'  exec {quoted} --log-dir "$LOG_DIR/node_0" $RESUME \\', launch_args], f'"$RUN_DIR/{TOML_NAME}"'
        others = [
            f"for _ in $(seq {TOML_WAIT_S // 2}); do [ -f \"$RUN_DIR/{TOML_NAME}\" ] && break; sleep 2; done",
            f'if [ ! -f "$RUN_DIR/{TOML_NAME}" ]; then echo "skillbank: node $NODE: node 0 wrote no $RUN_DIR/{TOML_NAME} in {TOML_WAIT_S} s" >&2; exit 1; fi',
        ]
        what = "skillbank train"
    return shell_script(ctx.job_dir / NODE_SCRIPT, f"one node of skillbank job {ctx.job_id} (srun runs it on every node of job.sbatch's allocation)", [
        f"# Node 0: {what}, the cosmos-rl launcher under skillbank's log watcher (metrics.jsonl, tensorboard/, result.json, the",
        "# recipe in every export; its exit code is the run's outcome). Other nodes: the launcher alone, on the same TOML.",
        'JOB_DIR="$SKILLBANK_JOB_DIR"  # exported by job.sbatch, as RUN_DIR, LOG_DIR, RESUME / CONFIG, SCRIPT, HEAD_NODE, NODE_LIST, PORT, RDZV_PORT',
        'NODE="${SLURM_NODEID:-0}"',
        'LAUNCH=(--num-workers "${SLURM_NNODES:-1}" --worker-idx "$NODE" --node-ip-list "$NODE_LIST" --port "$PORT" --rdzv-port "$RDZV_PORT")',
        'if [ "$NODE" = 0 ]; then',
        *first,
        "fi",
        *others,
        f'exec cosmos-rl --config {config} --log-dir "$LOG_DIR/node_$NODE" "${{LAUNCH[@]}}" --url "$HEAD_NODE:$PORT" "$SCRIPT"',
    ])


def _cosmos_body(ctx: JobContext) -> tuple[list[str], Path, Path, list[str]]:
    run_dir = ctx.run_dir
    log_dir = run_dir / "cosmos-rl-logs"
    if ctx.action == "rl":  # GRPO: its TOMLs and its dataset script (policy and rollout ranks on the allocation)
        return _grpo_body(ctx)
    review, notes = render_toml(ctx, run_dir)
    node_script(ctx)
    lines = [
        *requeue_lines(ctx, run_dir),
        'LOG_DIR="$RUN_DIR/cosmos-rl-logs"',
        f"PORT={ctx.options.port}",
        f"RDZV_PORT={ctx.options.rdzv_port}",
        "",
        "# Resume-safe: a requeued or re-submitted job continues from its own run's newest complete checkpoint.",
        'RESUME=""',
        'if compgen -G "$RUN_DIR/checkpoints/step_*" > /dev/null; then',
        '  RESUME="--resume"',
        '  echo "skillbank: resuming from the newest complete checkpoint under $RUN_DIR/checkpoints"',
        "fi",
        *_hub_download(ctx),
        "",
        "# Node wiring: the first node hosts the controller; every node runs one launcher (one task per node).",
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'HEAD_NODE="${NODES[0]}"',
        "NODE_LIST=$(IFS=';'; echo \"${NODES[*]}\")",
        'echo "skillbank: nodes $NODE_LIST, controller on $HEAD_NODE:$PORT"',
        "# The other nodes run skillbank's dataset script by path: where it lies in the job's environment.",
        _find_script(SCRIPT_MODULE),
        "export RUN_DIR LOG_DIR RESUME SCRIPT HEAD_NODE NODE_LIST PORT RDZV_PORT",
        'mkdir -p "$LOG_DIR"',
        f'rm -f "$RUN_DIR/{TOML_NAME}"  # node 0 renders this attempt\'s; the other nodes wait for it',
        "",
        "# Node 0's skillbank train decides the outcome (cosmos-rl's own exit code cannot be trusted): its exit code is the job's.",
        "run_step " + srun('--nodes="$SLURM_NNODES"', "--ntasks-per-node=1", "--kill-on-bad-exit=1", f'bash "$JOB_DIR/{NODE_SCRIPT}"'),
    ]
    notes = [*notes, f"node 0 runs `skillbank train` (cosmos-rl under skillbank's log watcher) in {run_dir}; {review.name} in the job folder "
             "is the TOML as submit counted the data, for review: node 0 renders the run's own from the files where it runs"]
    return lines, run_dir, log_dir, notes


def _find_script(module: str) -> str:
    """SCRIPT=<where the job's environment has the dataset script> (cosmos-rl runs it by path)."""
    code = 'import importlib.util as u; print(u.find_spec("%s").origin)' % module
    return "SCRIPT=$(" + srun("--nodes=1", "--ntasks=1", "python -c " + _q(code)) + ")"


def _hub_download(ctx: JobContext) -> list[str]:
    hub = ctx.hub_model()
    if not hub:
        return []
    return [
        "",
        "# Download the model once, before any node starts (HF_TOKEN from the environment for gated models).",
        srun("--nodes=1", "--ntasks=1", f"python -c \"from huggingface_hub import snapshot_download; snapshot_download('{hub}')\""),
    ]


def _grpo_body(ctx: JobContext) -> tuple[list[str], Path, Path, list[str]]:
    """An rl job (GRPO): the TOMLs rendered into the job folder at submit (a requeued attempt with a checkpoint takes the one with
    train.resume); node 0 runs `skillbank rl --launch` on it (cosmos-rl under the log watcher, as an SFT job's node 0 runs
    `skillbank train`), the other nodes the launcher on the same TOML (cosmos-node.sh)."""
    from skillbank.platform.context import GRPO_SCRIPT_MODULE
    from skillbank.platform.grpo import render_grpo_tomls

    run_dir = ctx.run_dir
    log_dir = run_dir / "cosmos-rl-logs"
    fresh, resume, notes = render_grpo_tomls(ctx)
    node_script(ctx)
    lines = [
        *requeue_lines(ctx, run_dir),
        'LOG_DIR="$RUN_DIR/cosmos-rl-logs"',
        f'CONFIG="$JOB_DIR/{fresh.name}"',
        f"PORT={ctx.options.port}",
        f"RDZV_PORT={ctx.options.rdzv_port}",
        "",
        "# Resume-safe: a requeued or re-submitted job continues from its own run's newest checkpoint (train.resume).",
        'if compgen -G "$RUN_DIR/checkpoints/step_*" > /dev/null; then',
        f'  CONFIG="$JOB_DIR/{resume.name}"',
        '  echo "skillbank: resuming from the newest checkpoint under $RUN_DIR/checkpoints"',
        "fi",
        *_hub_download(ctx),
        "",
        "# Node wiring: the first node hosts the controller; every node runs one launcher (one task per node).",
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'HEAD_NODE="${NODES[0]}"',
        "NODE_LIST=$(IFS=';'; echo \"${NODES[*]}\")",
        'echo "skillbank: nodes $NODE_LIST, controller on $HEAD_NODE:$PORT"',
        "# The other nodes run skillbank's GRPO dataset script by path: where it lies in the job's environment.",
        _find_script(GRPO_SCRIPT_MODULE),
        "export RUN_DIR LOG_DIR CONFIG SCRIPT HEAD_NODE NODE_LIST PORT RDZV_PORT",
        'mkdir -p "$LOG_DIR"',
        "",
        "# Node 0's skillbank rl --launch decides the outcome (cosmos-rl's own exit code cannot be trusted): its exit code is the job's.",
        "run_step " + srun('--nodes="$SLURM_NNODES"', "--ntasks-per-node=1", "--kill-on-bad-exit=1", f'bash "$JOB_DIR/{NODE_SCRIPT}"'),
    ]
    notes = [*notes, f"node 0 runs `skillbank rl --launch` (cosmos-rl under skillbank's log watcher: metrics.jsonl, tensorboard/, result.json, "
             f"the recipe in every export) in {run_dir}, on {fresh.name} (a requeued attempt with a checkpoint: {resume.name})"]
    return lines, run_dir, log_dir, notes


def _one_task(ctx: JobContext) -> tuple[str, ...]:
    """srun options of the one task that trains: a CPU job hands the task all its CPUs (srun of Slurm
    >= 22.05 does not inherit the batch job's --cpus-per-task)."""
    return ("--nodes=1", "--ntasks=1", *(['--cpus-per-task="$SLURM_CPUS_PER_TASK"'] if ctx.cpu_only else []))


def _local_body(ctx: JobContext) -> list[str]:
    fresh = quote_argv(ctx.job_argv("python", in_script=True))
    resume = quote_argv(ctx.job_argv("python", resume=True, in_script=True))
    return [
        *requeue_lines(ctx, ctx.run_dir if ctx.action != "rl" else None),
        "# The local backend (torchrun + FSDP2) on one node"
        + (f", {ctx.ranks} CPU rank(s)" if ctx.cpu_only else "")
        + "; a requeued attempt resumes (train --resume: the newest complete checkpoint of this job's run folder, else a new start in it).",
        ('if true; then  # --resume-run / --retry-of: every attempt continues that run' if ctx.resume_run else 'if [ "$ATTEMPT" -gt 0 ]; then'),
        "  run_step " + srun(*_one_task(ctx), resume),
        "else",
        "  run_step " + srun(*_one_task(ctx), fresh),
        "fi",
    ]


def _automl_body(ctx: JobContext) -> list[str]:
    """`skillbank automl --resume` on one node: the first attempt creates the study, a requeued or
    re-submitted one continues it (finished trials kept, failed or stopped ones run again)."""
    return [
        *requeue_lines(ctx, None),
        "# The AutoML study: its trials run one after another on this node; every attempt resumes the study.",
        "run_step " + srun(*_one_task(ctx), quote_argv(ctx.job_argv("python", in_script=True))),
    ]


def _deft_body(ctx: JobContext) -> list[str]:
    """`skillbank deft --resume` on one node (skillbank.platform.deft_job): every round trains on the
    allocation; a job near its --time requeues itself (the USR1 trap, as a study's: no single run folder for the
    no-progress guard to judge), and a requeued or re-submitted job continues the loop at its interrupted stage."""
    return [
        *requeue_lines(ctx, None),
        "# The DEFT loop on this node: every round trains on the allocation; every attempt resumes at the interrupted stage (state.json),",
        "# a round's interrupted training at its newest complete checkpoint.",
        "run_step " + srun(*_one_task(ctx), quote_argv(ctx.job_argv("python", in_script=True))),
    ]


def first_step(ctx: JobContext) -> list[str]:
    """The environment checks on every node of the allocation, before anything else runs there."""
    return [
        FIRST_STEP,
        "# on every node; a finding exits 2 and ends the job before the model download and cosmos-rl.",
        srun('--nodes="$SLURM_NNODES"', "--ntasks-per-node=1", quote_argv(ctx.preflight_argv("python", in_script=True))),
        "",
    ]


def render(ctx: JobContext) -> Rendered:
    check_options(ctx)
    run_dir = log_dir = None
    notes: list[str] = []
    if ctx.deft is not None:
        body = _deft_body(ctx)
    elif ctx.automl is not None:
        body = _automl_body(ctx)
        notes = [f"the study runs its trials on one node ({ctx.backend} backend); a requeued or re-submitted job resumes it in {ctx.study_dir}"]
    elif ctx.backend == "cosmos-rl":
        body, run_dir, log_dir, notes = _cosmos_body(ctx)
    else:
        body = _local_body(ctx)
        run_dir = ctx.run_dir if ctx.action != "rl" else None  # `skillbank rl --backend local` picks its own run folder
        notes = [f"a requeued attempt runs `skillbank train --resume`: it continues from the newest complete checkpoint of its run folder {ctx.run_dir}"
                 if ctx.action != "rl" else "a requeued attempt runs `skillbank rl --resume`"]
    if ctx.cpu_only:
        notes = [*notes, f"a CPU job: {ctx.ranks} CPU rank(s) (--cpus-per-task={ctx.ranks}, the spec's dp_shard_size*tp*cp*pp), no GPU GRES, not --exclusive"]
    notes = [*notes, f"every step on the node runs in {python_where(ctx)}" + ("" if ctx.options.image else "; --image IMAGE runs it in a container instead"),
             "the job's first step re-fits the values fitted to a sample (the spec's fitted block) to the files on the node and checks the spec's "
             "absolute paths there; what it changes is in the record's `fitted` (jobs status)"]
    lines = [*sbatch_header(ctx, signal=requeue.TRAP in body), *_prelude(ctx), "", *first_step(ctx)]
    from skillbank import atomic

    path = ctx.job_dir / SCRIPT_NAME
    atomic.write_text(path, "\n".join([*lines, *body]) + "\n")
    path.chmod(0o755)
    return Rendered(
        argv=["sbatch", "--parsable", f"--chdir={ctx.job_dir}", str(path)],
        script=path,
        run_dir=run_dir,
        cosmos_log_dir=log_dir,
        image=ctx.options.image,
        env=["HF_TOKEN", "WANDB_API_KEY"],
        notes=notes,
    )


def require_engine() -> None:
    if not have("sbatch"):
        raise InputError(
            "sbatch is not on PATH: this is not a Slurm submit host",
            where="--platform slurm",
            fix="add --dry-run to write the sbatch script into the job folder, then `sbatch` it on the cluster's login node",
        )


def launch(ctx: JobContext, rendered: Rendered) -> str:
    out = call(rendered.argv, what="sbatch", timeout=120).strip()
    job_id = out.split(";")[0].strip()
    if not job_id.isdigit():
        raise RunError(f"sbatch answered {out!r}, not a job id")
    return job_id

