"""Docker platform: the exact `docker run` for one train job, and its submit / status / logs / cancel.

Host folders are mounted at the same paths inside the container and the working directory is the
job folder (the spec copy names its paths absolute), so every path in the spec means the same thing in there:
datasets and a local model read-only, results and the run folder read-write, the skillbank sources
read-only on PYTHONPATH, the Hugging Face cache at /root/.cache/huggingface. Credentials go by name
(`-e HF_TOKEN`: docker copies the value from the submitting shell), so no value lands in the
command, the record or the job folder.

command.sh (what a person runs on the Docker host) finds its job folder from its own location and
mounts it, so the folder can be copied to the host anywhere; the host's HF_HOME is read there. Under
`--path-map` the spec's folders are mounted at their REMOTE paths, and skillbank's sources are
mounted only when a LOCAL covers them (else the image's own skillbank runs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import skillbank
from skillbank.errors import InputError, RunError
from skillbank.platform.base import FIRST_STEP, Rendered, call, have, job_dir_lines, quote_argv, shell_script
from skillbank.platform.context import JobContext
from skillbank.runs.record import TERMINAL, JobRecord

CONTAINER_HF_HOME = "/root/.cache/huggingface"
NODE_HF_HOME = "${HF_HOME:-$HOME/.cache/huggingface}"  # the Docker host's cache, read where command.sh runs
# What `skillbank train` imports before it reaches torch / cosmos-rl (the image has those).
LIGHT_DEPS = ("pydantic>=2.7,<3", "pyyaml>=6", "tomli-w>=1.0", "jsonschema>=4.20", "qwen-vl-utils")
PASS_ALWAYS = ("HF_TOKEN",)
PASS_WHEN_SET = ("HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")


def default_image(skill: str) -> str | None:
    """The skill's container_image: the image the checkout's Dockerfile builds (a pinned tag)."""
    from skillbank.skillinfo import skill_info

    image = skill_info(skill).get("container_image")
    return str(image) if image else None


def build_command(image: str) -> str:
    """How to build the skill's image on this host, from the checkout that holds the Dockerfile."""
    try:
        from skillbank.paths import bank_root

        root = str(bank_root())
    except InputError:
        root = "<the skillbank checkout>"
    return f"docker build -t {image} {root}"


def image_for(ctx: JobContext) -> str:
    if ctx.options.image:
        return ctx.options.image
    image = default_image(ctx.skill)
    if not image:
        raise InputError(
            f"skill {ctx.skill} names no container_image in references/skill_info.yaml",
            where="--image",
            fix="pass --image IMAGE (a cosmos-rl image, e.g. nvcr.io/nvidia/cosmos/cosmos-rl:<tag>)",
        )
    return image


def host_hf_home() -> Path:
    return Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()


def _spec_folders(ctx: JobContext) -> list[tuple[Path, bool]]:
    """(folder, read_only) for every folder the spec names: the datasets and a local model read-only,
    results_dir and train.output_dir read-write."""
    wanted = [(p, True) for p in ctx.dataset_dirs()]
    model = ctx.local_model_dir()
    if model is not None:
        wanted.append((model, True))
    wanted += [(Path(folder), ro) for folder, ro in ctx.deft.folders] if ctx.deft else []  # a DEFT job: its sets, specs and output_dir
    return [*wanted, (Path(ctx.node(ctx.results_dir)), False), (ctx.train_output_dir, False)]


def spec_mounts(ctx: JobContext) -> list[tuple[Path, bool]]:
    """The spec's folders, nested ones collapsed (what a Slurm container mounts: the image has skillbank)."""
    return _collapse(_spec_folders(ctx))


def _sources(ctx: JobContext) -> tuple[Path | None, Path | None]:
    """skillbank's sources and the bank (skills/, config.json) as the Docker host knows them; under a
    path map only when a LOCAL covers them (else None: the image's own skillbank runs)."""
    src = Path(skillbank.__file__).resolve().parent.parent  # the folder holding the skillbank package
    try:
        from skillbank.paths import bank_root

        root: Path | None = bank_root()
    except InputError:
        root = None
    if not ctx.paths:
        return src, root
    return tuple(Path(ctx.node(p)) if p is not None and ctx.paths.covered(p) else None for p in (src, root))  # type: ignore[return-value]


def mounts(ctx: JobContext) -> list[tuple[Path, Path, bool]]:
    """(host, container, read_only) mounts; nested ones collapse into an ancestor that covers them."""
    wanted: list[tuple[Path, bool]] = [(p, True) for p in _sources(ctx) if p is not None]
    out = [(path, path, ro) for path, ro in _collapse([*wanted, *_spec_folders(ctx)])]
    out.append((host_hf_home(), Path(CONTAINER_HF_HOME), False))
    return out


def _collapse(items: list[tuple[Path, bool]]) -> list[tuple[Path, bool]]:
    """Drop a mount an ancestor already gives with at least its access; merge duplicates (rw wins)."""
    access: dict[Path, bool] = {}
    for path, ro in items:
        path = path.resolve()
        access[path] = access.get(path, True) and ro
    kept: list[tuple[Path, bool]] = []
    for path in sorted(access, key=lambda p: (len(p.parts), str(p))):
        covered = any(_under(path, parent) and (not parent_ro or access[path]) for parent, parent_ro in kept)
        if not covered:
            kept.append((path, access[path]))
    return kept


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def env_names() -> list[str]:
    return [*PASS_ALWAYS, *(n for n in PASS_WHEN_SET if os.environ.get(n))]


def container_script(ctx: JobContext) -> Path:
    """container.sh in the job folder (mounted): install skillbank's light dependencies if the image
    lacks them, check the container's environment (a finding exits 2 before training starts), then
    exec the job's command (train, or automl --resume) on the spec copy."""
    deps = " ".join(quote_argv([d]) for d in LIGHT_DEPS)
    return shell_script(
        ctx.job_dir / "container.sh",
        f"inside the container of docker job {ctx.job_id}",
        [
            *job_dir_lines(ctx.spec_copy.name, ctx.job_id),
            "python -c 'import pydantic, yaml, tomli_w, jsonschema, qwen_vl_utils' 2>/dev/null \\",
            f"  || python -m pip install --quiet --disable-pip-version-check {deps}",
            f"{FIRST_STEP}\n# a finding exits 2 here, before cosmos-rl starts.",
            quote_argv(ctx.preflight_argv("python", in_script=True)),
            f"exec {quote_argv(ctx.job_argv('python', in_script=True))}",
        ],
    )


def docker_argv(ctx: JobContext, *, in_script: bool = False) -> tuple[list[str], str, list[str]]:
    """`docker run` as submit launches it here, or (in_script) as command.sh runs it on the Docker
    host: the job folder found and mounted from where command.sh lies, the host's own HF_HOME."""
    image = image_for(ctx)
    names = env_names()
    src, root = _sources(ctx)
    argv = [
        "docker", "run", "--detach",
        "--name", f"skillbank-{ctx.job_id}",
        "--label", f"skillbank.job={ctx.job_id}",
        *([] if ctx.cpu_only else ["--gpus", "all"]),  # a CPU job (--gpus-per-node 0): no GPU in the container
        "--ipc=host",
        "--shm-size", ctx.options.shm_size,
        "--ulimit", "memlock=-1",
        "--ulimit", "stack=67108864",
    ]
    for host, inside, ro in mounts(ctx):
        host_text = NODE_HF_HOME if in_script and str(inside) == CONTAINER_HF_HOME else str(host)
        argv += ["-v", f"{host_text}:{inside}" + (":ro" if ro else "")]
    if in_script:
        argv += ["-v", "$JOB_DIR:$JOB_DIR"]  # the job folder, wherever command.sh found it
        if ctx.site_rel:
            argv += ["-v", "$SITE_DIR:$SITE_DIR"]  # the submit directory the job works in, found from the job folder
    for name in names:
        argv += ["-e", name]  # by name: docker copies the value from this environment
    argv += ["-e", f"HF_HOME={CONTAINER_HF_HOME}"]
    if src is not None:
        argv += ["-e", f"PYTHONPATH={src}"]
    if root is not None:
        argv += ["-e", f"SKILLBANK_ROOT={root}"]
    workdir = ("$SITE_DIR" if ctx.site_rel else "$JOB_DIR") if in_script else ctx.workdir(in_script=False)  # where relative paths start (ctx.site_rel)
    script = "$JOB_DIR/container.sh" if in_script else str(container_script(ctx))
    argv += ["-w", workdir, image, "bash", script]
    return argv, image, names


def render(ctx: JobContext) -> Rendered:
    notes = []
    if ctx.action == "rl" and ctx.backend == "cosmos-rl":
        from skillbank.platform.grpo import render_grpo_tomls

        notes = render_grpo_tomls(ctx)[2]
    argv, image, names = docker_argv(ctx)
    in_script, _, _ = docker_argv(ctx, in_script=True)
    script = shell_script(
        ctx.job_dir / "command.sh",
        f"docker job {ctx.job_id}: run this on a Docker host with NVIDIA GPUs (credentials pass by name from your shell)",
        [*_build_hint(ctx, image), *job_dir_lines(ctx.spec_copy.name),
         *([f'SITE_DIR="$(cd "$JOB_DIR/{ctx.site_rel}" && pwd)"  # the submit directory: the spec copy\'s relative paths start here'] if ctx.site_rel else []),
         quote_argv(in_script, wrap=2)],
    )
    if ctx.backend == "cosmos-rl":
        notes.append(f"the container runs cosmos-rl on {ctx.gpus_per_node} GPU(s) (policy.parallelism); `--gpus all` exposes every GPU of the host")
    if ctx.cpu_only:
        notes.append(f"a CPU job: {ctx.ranks} CPU rank(s) (the spec's dp_shard_size*tp*cp*pp), no `--gpus` (the container sees no GPU)")
    fixed = ctx.automl is None and (ctx.action != "rl" or ctx.backend == "cosmos-rl")
    return Rendered(argv=argv, script=script, image=image, env=names, notes=notes, run_dir=ctx.run_dir if fixed else None,
                    cosmos_log_dir=ctx.run_dir / "logs" if fixed and ctx.backend == "cosmos-rl" and ctx.action != "rl" else None)


def _build_hint(ctx: JobContext, image: str) -> list[str]:
    if image != default_image(ctx.skill):
        return []
    command = build_command(image)
    if ctx.paths:  # the checkout as the Docker host knows it, or a placeholder
        root = command.rsplit(" ", 1)[-1]
        command = f"docker build -t {image} {ctx.node(root) if ctx.paths.covered(root) else '<the skillbank checkout>'}"
    return [f"# The image is built from skillbank's Dockerfile, once per host: {command}"]


def require_image(ctx: JobContext, image: str) -> None:
    """The skill's image is built on this host, never pulled: without it `docker run` would ask a
    registry for it and fail with an unhelpful 'pull access denied'. Other images may be pulled."""
    if image != default_image(ctx.skill):
        return
    try:
        call(["docker", "image", "inspect", "--format", "{{.Id}}", image], what="docker image inspect", timeout=60)
    except RunError:
        raise RunError(f"the image {image} is not on this Docker host: build it once with `{build_command(image)}`, or pass --image IMAGE") from None


def require_engine() -> None:
    if not have("docker"):
        raise InputError(
            "docker is not installed on this machine",
            where="--platform docker",
            fix="add --dry-run to write the `docker run` command into the job folder, and run it on a Docker host",
        )
    try:
        call(["docker", "info"], what="docker info", timeout=30)
    except RunError as exc:
        raise InputError(
            f"no Docker engine answers here ({exc})",
            where="--platform docker",
            fix="start the Docker daemon, or add --dry-run to write the command and run it on a Docker host",
        ) from None


def launch(ctx: JobContext, rendered: Rendered) -> str:
    require_image(ctx, str(rendered.image))
    return call(rendered.argv, what="docker run", timeout=600).strip().splitlines()[-1]


STATE_MAP = {"created": "submitted", "running": "running", "restarting": "running", "paused": "running", "removing": "running"}


def refresh(record: JobRecord) -> JobRecord:
    if record.dry_run or not record.external_id or record.status in TERMINAL:
        return record
    try:
        state = json.loads(call(["docker", "inspect", "--format", "{{json .State}}", record.external_id], what="docker inspect"))
    except (RunError, InputError, ValueError):
        record.status = "unknown"
        return record
    status = str(state.get("Status", "")).lower()
    if status in STATE_MAP:
        record.status = STATE_MAP[status]  # type: ignore[assignment]
    elif status in ("exited", "dead"):
        code = int(state.get("ExitCode", -1))
        record.exit_code = code
        record.status = "succeeded" if code == 0 else "failed"
        record.ended = _time(state.get("FinishedAt"))
    record.started = _time(state.get("StartedAt")) or record.started
    return record


def logs(record: JobRecord, tail: int) -> str:
    if not record.external_id:
        return ""
    import subprocess

    proc = subprocess.run(
        ["docker", "logs", "--tail", str(tail), record.external_id], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60
    )
    if proc.returncode != 0:
        raise RunError(f"docker logs failed (exit {proc.returncode}): {proc.stdout.strip()[-2000:]}")
    return proc.stdout


def cancel(record: JobRecord) -> JobRecord:
    record = refresh(record)
    if record.status in TERMINAL or not record.external_id:
        return record
    call(["docker", "stop", "--time", "30", record.external_id], what="docker stop", timeout=120)
    record = refresh(record)
    record.status = "cancelled"
    return record


def _time(value: object) -> str | None:
    text = str(value or "")
    return None if not text or text.startswith("0001-") else text
