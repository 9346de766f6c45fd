"""The production path, platform side: the training image (Dockerfile + skill_info's pinned tag),
`submit --platform docker` on it, and Slurm scripts that run in a container (pyxis/enroot) or in a
venv and carry no path of the submitting machine except the spec's and their variables' defaults.

No Docker engine, Slurm or GPU here: the scripts are rendered and run under bash with stand-in
`docker` / `srun` / `scontrol` / `python` / `cosmos-rl` executables that log their calls (the real
ones need a cluster); the Dockerfile is checked as text (building it needs a Docker daemon and the
registries of its base image).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from skillbank.platform import context as ctxmod
from skillbank.platform import slurm
from test_platform import ROOT, SECRET, fake_tools, render_slurm, run_cli, submit_json, write_spec  # noqa: F401  (fixtures: autouse _env)
from test_platform import _env  # noqa: F401

SKILL_INFO = ROOT / "skills" / "models" / "tao-finetune-cosmos-reason" / "references" / "skill_info.yaml"


def skill_image() -> str:
    return yaml.safe_load(SKILL_INFO.read_text())["container_image"]


# --- the image -------------------------------------------------------------------------------------


def test_skill_image_is_a_pinned_tag_the_dockerfile_builds():
    image = skill_image()
    name, _, tag = image.rpartition(":")
    assert name and tag and tag != "latest" and "/" not in tag, image
    text = (ROOT / "Dockerfile").read_text()
    assert f"docker build -t {image} ." in text  # the build line the docs and the record's hint show
    [base] = re.findall(r"^ARG BASE_IMAGE=(\S+)$", text, flags=re.M)
    assert re.fullmatch(r"[\w.\-/]+:\d[\w.\-]*", base), f"base image {base} is not pinned to a version tag"
    assert "FROM ${BASE_IMAGE}" in text
    # One install path: the image runs the GPU setup (requirements-gpu.txt), minus the GPU presence check.
    assert "RUN bash scripts/setup.sh --gpu --no-cuda-check" in text and "redis-server" in text
    assert "SKILLBANK_ROOT=/opt/skillbank" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_docker_submit_runs_the_pinned_image(tmp_path, capsys):
    record = submit_json(capsys, "--platform", "docker", "--spec", str(write_spec(tmp_path)), "--dry-run")["record"]
    assert record["image"] == skill_image() and skill_image() in record["argv"]
    command = Path(record["script"]).read_text()
    assert f"# The image is built from skillbank's Dockerfile, once per host: docker build -t {skill_image()} {ROOT}" in command
    # Another image (--image) gets no build hint: it may come from a registry.
    other = submit_json(capsys, "--platform", "docker", "--spec", str(write_spec(tmp_path)), "--image", "nvcr.io/x/y:1.0", "--dry-run")["record"]
    assert "docker build" not in Path(other["script"]).read_text()


def test_docker_launch_without_the_built_image_says_how_to_build(tmp_path, monkeypatch, capsys):
    calls = fake_tools(tmp_path, monkeypatch, {"docker": """
case "$1" in
  info) echo ok ;;
  image) echo "Error: No such image: $5" >&2; exit 1 ;;
  run) echo should-not-run ;;
esac"""})
    code, out, _ = run_cli("submit", "--platform", "docker", "--spec", str(write_spec(tmp_path)), "--json", capsys=capsys)
    doc = json.loads(out)
    assert code == 1 and f"docker build -t {skill_image()}" in doc["error"]["message"]
    assert "docker run" not in calls.read_text()
    record = json.loads(next((tmp_path / "results" / "jobs").glob("*.json")).read_text())
    assert record["status"] == "failed"


# --- slurm: container or venv, and portable -----------------------------------------------------------

IMAGE = "/shared/images/skillbank-cosmos-rl.sqsh"


def variable_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(r'^(export )?[A-Z_]+="\$\{[A-Z_]+:-', ln)]


def foreign_paths(text: str, allowed: list[Path]) -> list[str]:
    """Absolute paths outside the variable lines that are not under a folder the spec names."""
    found = []
    defaults = set(variable_lines(text))
    for line in text.splitlines():
        if line in defaults:
            continue
        line = re.sub(r'"?\$\{?\w+\}?"?/[^\s\'"]*', "", line)  # $VAR/... paths are relative to a variable
        for path in re.findall(r"(?:^|[\s=:'\"(,])(/[^\s'\":,;)]+)", line):
            if path in ("/bin/bash", "/dev/null") or path.startswith("/usr/bin/env"):
                continue
            if not any(path == str(a) or path.startswith(str(a) + "/") for a in allowed):
                found.append(f"{path}  <- {line.strip()[:120]}")
    return found


def spec_folders(ctx) -> list[Path]:
    return [*ctx.dataset_dirs(), ctx.results_dir, ctx.train_output_dir]


def test_slurm_container_render(tmp_path):
    spec_path = write_spec(tmp_path, replicas=2)
    ctx, rendered = render_slurm(tmp_path, spec_path, image=IMAGE)
    text = rendered.script.read_text()
    subprocess.run(["bash", "-n", str(rendered.script)], check=True)
    data = tmp_path / "data"
    mounts = (f"{tmp_path / 'results'}:{tmp_path / 'results'},{data / 'train'}:{data / 'train'}:ro,{data / 'val'}:{data / 'val'}:ro,"
              "$SKILLBANK_WORKDIR:$SKILLBANK_WORKDIR,$JOB_DIR:$JOB_DIR,$HF_HOME:$HF_HOME")  # the submit directory and the job folder wherever they were copied
    for line in (
        f'SKILLBANK_IMAGE="${{SKILLBANK_IMAGE:-{IMAGE}}}"',
        f'SKILLBANK_MOUNTS="${{SKILLBANK_MOUNTS:-{mounts}}}"',
        'IN_ENV=(--container-image="$SKILLBANK_IMAGE" --container-mounts="$SKILLBANK_MOUNTS" --container-workdir="$SKILLBANK_WORKDIR" --container-env=HF_HOME)',
        'export HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}"  # the node\'s model cache',  # never the submitting machine's
        'SKILLBANK_WORKDIR="$(cd "${SKILLBANK_WORKDIR:-$JOB_DIR/../../..}" && pwd)"',  # the submit directory, found from the job folder
    ):
        assert line in text, line
    srun_lines = [ln.strip() for ln in text.splitlines() if re.search(r"(^|\$\(|^run_step )srun ", ln.strip())]
    assert len(srun_lines) == 4 and all('srun ${IN_ENV[@]+"${IN_ENV[@]}"} ' in ln for ln in srun_lines), srun_lines
    assert "SKILLBANK_VENV" not in text and "export PATH=" not in text  # the image's environment, not a venv
    assert rendered.image == IMAGE
    assert not foreign_paths(text, spec_folders(ctx)), foreign_paths(text, spec_folders(ctx))
    assert str(ROOT) not in text and sys.executable not in text


def test_slurm_venv_render_names_the_environment_once(tmp_path):
    ctx, rendered = render_slurm(tmp_path, write_spec(tmp_path))
    text = rendered.script.read_text()
    venv = Path(sys.executable).parent.parent
    assert f'SKILLBANK_VENV="${{SKILLBANK_VENV:-{venv}}}"' in text
    assert f'export SKILLBANK_ROOT="${{SKILLBANK_ROOT:-{ROOT}}}"' in text
    assert 'export PATH="$SKILLBANK_VENV/bin:$PATH"' in text and "IN_ENV=()" in text
    assert "--container-image" not in text
    # The record says truthfully where each step runs: the node's python, as job.sbatch sets it (not "the local venv").
    assert f"every step on the node runs in the Python environment {venv} (SKILLBANK_VENV's default in job.sbatch)" in " ".join(rendered.notes)
    # The submitting machine's venv, bank and python appear only as those defaults.
    bare = "\n".join(ln for ln in text.splitlines() if ln not in variable_lines(text))
    assert str(venv) not in bare and str(ROOT) not in bare and sys.executable not in bare
    assert not foreign_paths(text, spec_folders(ctx)), foreign_paths(text, spec_folders(ctx))


def _cluster(tmp: Path, bin_name: str) -> tuple[Path, Path]:
    """srun (logs its options, runs the command), scontrol (two nodes), python (answers the dataset
    script lookup, passes the rest of skillbank's calls), cosmos-rl (logs)."""
    calls = tmp / f"{bin_name}.log"
    bin_dir = tmp / bin_name
    bin_dir.mkdir(parents=True)
    tools = {
        "srun": f'echo "srun $*" >> {calls}\nwhile [ "${{1#--}}" != "$1" ]; do shift; done\nexec "$@"',
        "scontrol": "printf 'node0\\nnode1\\n'",
        "python": (
            f'echo "python($0) $*" >> {calls}\n'
            'case "$*" in *find_spec*) echo /opt/skillbank/src/skillbank/training/cosmos_rl/script.py;; esac\nexit 0'
        ),
        "cosmos-rl": f'echo "cosmos-rl $*" >> {calls}',
    }
    for name, body in tools.items():
        exe = bin_dir / name
        exe.write_text("#!/usr/bin/env bash\n" + body + "\n")
        exe.chmod(0o755)
    return bin_dir, calls


def _run(script: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_TOKEN", "SKILLBANK_"))}
    base |= {"PATH": path, "SLURM_NNODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "node[0-1]", "SLURM_JOB_ID": "9"}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=base | env, timeout=60)


def test_slurm_container_script_runs_every_step_in_the_image(tmp_path):
    """The same script, moved to another cluster by overriding its variables: every srun carries the
    new image and mounts, cosmos-rl gets the dataset script the image holds."""
    ctx, rendered = render_slurm(tmp_path, write_spec(tmp_path, replicas=2), image=IMAGE)
    bin_dir, calls = _cluster(tmp_path, "cluster-bin")
    done = _run(rendered.script, f"{bin_dir}:/usr/bin:/bin", SKILLBANK_IMAGE="/elsewhere/img.sqsh", SKILLBANK_MOUNTS="/elsewhere:/elsewhere")
    assert done.returncode == 0, done.stdout + done.stderr
    log = calls.read_text().splitlines()
    sruns = [ln for ln in log if ln.startswith("srun ")]
    assert len(sruns) == 5  # env checks, the attempt's bookkeeping (platform.requeue), model download, dataset-script lookup, the node script
    assert all("--container-image=/elsewhere/img.sqsh --container-mounts=/elsewhere:/elsewhere" in ln for ln in sruns)
    assert all(f"--container-workdir={tmp_path}" in ln for ln in sruns)  # the submit directory: the spec's relative paths start there
    assert "--only env --runs-on here" in sruns[0] and "jobs attempt begin" in sruns[1] and "snapshot_download" in sruns[2] and "cosmos-node.sh" in sruns[4]
    [train] = [ln for ln in log if " skillbank.cli train " in ln]  # node 0: skillbank train runs the launcher under its watcher
    assert f"--run-dir results/train/{ctx.job_id}/{ctx.job_id} --log-dir results/train/{ctx.job_id}/{ctx.job_id}/cosmos-rl-logs/node_0" in train
    assert "--launcher-args --num-workers 2 --worker-idx 0 --node-ip-list node0\\;node1 --port 8000 --rdzv-port 29345" in train
    run = tmp_path / "results" / "train" / ctx.job_id / ctx.job_id  # the job's run folder, alone under its run root
    (run / "cosmos_rl.toml").write_text("")  # node 0's TOML: node 1 waits for it, then launches
    env = {"JOB_DIR": str(ctx.job_dir), "SKILLBANK_JOB_DIR": str(ctx.job_dir), "RUN_DIR": str(run), "LOG_DIR": str(run / "cosmos-rl-logs"),
           "RESUME": "", "SCRIPT": "/opt/skillbank/src/skillbank/training/cosmos_rl/script.py", "HEAD_NODE": "node0", "NODE_LIST": "node0;node1",
           "PORT": "8000", "RDZV_PORT": "29345", "SLURM_NODEID": "1"}
    done = _run(ctx.job_dir / "cosmos-node.sh", f"{bin_dir}:/usr/bin:/bin", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    [launch] = [ln for ln in calls.read_text().splitlines() if ln.startswith("cosmos-rl ")]
    assert launch.endswith("--url node0:8000 /opt/skillbank/src/skillbank/training/cosmos_rl/script.py")
    assert "--node-ip-list node0;node1" in launch and f"--config {run}/cosmos_rl.toml" in launch and "--worker-idx 1" in launch


def test_slurm_venv_script_runs_the_python_of_skillbank_venv(tmp_path):
    """SKILLBANK_VENV set on another machine: its bin/ comes first, so its python runs every step."""
    ctx, rendered = render_slurm(tmp_path, write_spec(tmp_path))
    venv = tmp_path / "other-venv"
    bin_dir, calls = _cluster(venv, "bin")
    done = _run(rendered.script, "/usr/bin:/bin", SKILLBANK_VENV=str(venv), SLURM_NNODES="1", SLURM_JOB_NODELIST="node0")
    assert done.returncode == 0, done.stdout + done.stderr
    pythons = [ln for ln in calls.read_text().splitlines() if ln.startswith("python(")]
    assert len(pythons) == 5 and all(ln.startswith(f"python({bin_dir}/python)") for ln in pythons)  # env checks, the attempt's bookkeeping, download, lookup, node 0's train
    assert " skillbank.cli train " in pythons[-1]


def test_slurm_local_backend_in_a_container(tmp_path):
    from skillbank.specification.io import load_spec
    from skillbank.specification.train import TrainSpec

    spec_path = write_spec(tmp_path)
    ctx = ctxmod.build_context(
        platform="slurm", backend="local", skill="tao-finetune-cosmos-reason", spec_path=str(spec_path),
        spec=load_spec(spec_path, TrainSpec), nodes=None, gpus_per_node=None, options=ctxmod.Options(image=IMAGE),
        job_id="train-local", cwd=tmp_path,
    )
    ctxmod.copy_spec(ctx)
    text = slurm.render(ctx).script.read_text()
    assert 'srun ${IN_ENV[@]+"${IN_ENV[@]}"} --nodes=1 --ntasks=1 python -m skillbank.cli train --spec "$JOB_DIR/spec.yaml"' in text
    assert sys.executable not in text
