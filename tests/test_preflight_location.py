"""Preflight knows where the job runs: spec and data are checked everywhere, the environment (HF_TOKEN,
redis-server, GPUs, free disk, the model) where the job runs.

This machine has no HF_TOKEN (unset here), no redis-server and no GPU (PATH points at an empty or a
test folder), which is exactly a laptop that plans a job for a GPU node. Stand-ins, because a GPU
and a cluster cannot run here: `nvidia-smi` (lists 8 GPUs), `redis-server`, `srun` / `scontrol`
(run the command on this machine), `cosmos-rl` (logs its call), and a `python` that hands every
command to the real interpreter except `skillbank.cli train` (logged: the trainer itself is not
what these tests are about) and the container's dependency probe (answered "present").
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillbank import cli
from skillbank.platform import context as ctxmod
from skillbank.platform import docker, local, slurm
from skillbank.preflight.report import Finding, Report, group_of, render_table
from skillbank.preflight.run import run_preflight
from skillbank.specification.io import load_spec
from skillbank.specification.train import TrainSpec

ROOT = Path(__file__).resolve().parents[1]
SKILL = "tao-finetune-cosmos-reason"
GATED = "hf_model://nvidia/Cosmos-Reason2-8B"
ENV_CHECKS = {"env.hf_token", "env.redis", "env.gpus"}  # what this machine lacks (env.disk depends on its free space)
EIGHT_GPUS = "\n".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d})'" for i in range(8))


@pytest.fixture(autouse=True)
def _planning_machine(tmp_path, monkeypatch):
    """No token, no redis-server, no nvidia-smi on PATH, an empty hub cache."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SKILLBANK_ROOT", str(ROOT))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.chdir(tmp_path)


def write_spec(tmp: Path, data: Path, *, model: str = GATED, name: str = "train.yaml", **overrides) -> Path:
    spec = {
        "train": {"epoch": 1, "train_batch_per_replica": 2, "train_policy": {"mini_batch": 1}, "output_dir": str(tmp / "out")},
        "validation": {"batch_size": 1},  # 9 val records over 8 ranks: one each (more would validate nothing: an error)
        "policy": {"model_name_or_path": model, "parallelism": {"dp_shard_size": 8}},
        "custom": {
            "train_dataset": {"annotation_path": str(data / "train" / "annotations.json"), "media_path": str(data / "train")},
            "val_dataset": {"annotation_path": str(data / "val" / "annotations.json"), "media_path": str(data / "val")},
        },
        "results_dir": str(tmp / "results"),
    }
    for dotted, value in overrides.items():
        node = spec
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    path = tmp / name
    path.write_text(yaml.safe_dump(spec))
    return path


def local_model(tmp: Path) -> Path:
    """A model folder the env checks accept (config.json, a few bytes of weights): no token, no download."""
    folder = tmp / "models" / "cr2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


def broken_data(tmp: Path, data: Path) -> Path:
    """The demo data with one train record lacking video_fps (a data error wherever the job runs)."""
    records = json.loads((data / "train" / "annotations.json").read_text())
    del records[3]["video_fps"]
    bad = tmp / "bad-train.json"
    bad.write_text(json.dumps(records))
    return bad


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def fake_bin(folder: Path, tools: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in tools.items():
        exe = folder / name
        exe.write_text(f"#!/bin/bash\n{body}\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return folder


# --- groups and severities -------------------------------------------------------------------------


def test_every_check_has_one_group():
    assert [group_of(c) for c in ("spec.schema", "annotations.video_fps", "media.decode", "vision.budget", "cache.stale", "env.gpus")] == [
        "spec", "data", "data", "data", "data", "env"]
    with pytest.raises(ValueError, match="belongs to no group"):
        Finding("disk.free", "error", "x")


def test_env_findings_are_errors_here_and_to_check_on_the_node_elsewhere(tmp_path, demo_dataset_dir):
    spec = write_spec(tmp_path, demo_dataset_dir)
    here = run_preflight(skill=SKILL, action="train", spec_path=spec, backend="cosmos-rl")
    assert not here.ok and ENV_CHECKS <= {f.check for f in here.errors}
    node = run_preflight(skill=SKILL, action="train", spec_path=spec, backend="cosmos-rl", runs_on="node")
    assert node.ok and not node.errors
    assert ENV_CHECKS <= {f.check for f in node.on_node} and {f.group for f in node.on_node} == {"env"}
    doc = node.to_dict()
    assert doc["stats"]["runs_on"] == "node" and doc["stats"]["node"] == len(node.on_node)
    assert all(f["group"] in ("spec", "data", "env") for f in doc["findings"])
    text = render_table(node)
    assert "check on the node" in text and "[env:" in text and "ok to launch there" in text.splitlines()[-1]
    assert node.summary()["check_on_node"] and all(line.startswith("env.") for line in node.summary()["check_on_node"])


def test_gpus_are_counted_with_nvidia_smi(tmp_path, monkeypatch, demo_dataset_dir):
    """nvidia-smi is a stand-in listing 8 GPUs (no GPU here)."""
    spec = write_spec(tmp_path, demo_dataset_dir, model=str(local_model(tmp_path)))
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path / "gpu-bin", {"nvidia-smi": EIGHT_GPUS, "redis-server": "exit 0"})))
    report = run_preflight(skill=SKILL, action="train", spec_path=spec, backend="cosmos-rl", only=["env"])
    assert report.ok and report.stats["gpus"] == {"visible": 8, "need": 8}, report.to_dict()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    [gpus] = [f for f in run_preflight(skill=SKILL, action="train", spec_path=spec, backend="cosmos-rl").findings if f.check == "env.gpus"]
    assert gpus.severity == "error" and "needs 8 GPU(s)" in gpus.message and "2 are visible" in gpus.message
    local_backend = run_preflight(skill=SKILL, action="train", spec_path=spec, backend="local")
    assert "env.gpus" not in {f.check for f in local_backend.findings}  # the local backend also trains on CPU


def test_disk_is_measured_at_output_dir_and_checked_on_the_node_elsewhere(tmp_path, demo_dataset_dir):
    """A model whose checkpoint no disk holds (a local folder with 1 TiB of weights, sparse: ~550B parameters, ~8 TB a
    checkpoint), so the test does not depend on free space."""
    import json as json_module

    from skillbank.models.table import CONFIGS

    huge = tmp_path / "huge-model"
    huge.mkdir()
    config = json_module.loads((CONFIGS / "nvidia--Cosmos-Reason2-2B.json").read_text())
    (huge / "config.json").write_text(json_module.dumps({**config, "text_config": {**config["text_config"], "num_hidden_layers": 5}}))
    with open(huge / "model.safetensors", "wb") as weights:
        weights.truncate(1 << 40)
    spec = write_spec(tmp_path, demo_dataset_dir, model=str(huge))
    [here] = [f for f in run_preflight(skill=SKILL, action="train", spec_path=spec, backend="local").findings if f.check == "env.disk"]
    assert here.severity == "error" and here.where == "train.output_dir" and f"free at {tmp_path}" in here.message
    node = run_preflight(skill=SKILL, action="train", spec_path=spec, backend="local", runs_on="node")
    assert node.ok and "env.disk" in {f.check for f in node.on_node}
    [there] = [f for f in node.on_node if f.check == "env.disk"]  # what the node needs, never this machine's free space
    assert there.message.startswith("needs ") and "where the job runs" in there.message and "free_gb" not in node.stats["disk"] and node.stats["disk"]["measured"] == "on the node"


def test_only_env_checks_the_machine_and_not_the_data(tmp_path, monkeypatch, capsys, demo_dataset_dir):
    spec = write_spec(tmp_path, demo_dataset_dir, custom__train_dataset={
        "annotation_path": str(broken_data(tmp_path, demo_dataset_dir)), "media_path": str(demo_dataset_dir / "train")})
    code, out, _ = run_cli(capsys, "preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--backend", "cosmos-rl", "--only", "env", "--json")
    doc = json.loads(out)
    assert code == 2 and {f["group"] for f in doc["findings"]} == {"env"} and doc["stats"]["records"] == {}  # not scanned
    code, out, _ = run_cli(capsys, "preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--backend", "cosmos-rl",
                           "--only", "spec,data", "--json")
    doc = json.loads(out)
    assert code == 2 and "annotations.video_fps" in {f["check"] for f in doc["findings"]}
    assert "env" not in {f["group"] for f in doc["findings"]}
    code, _, err = run_cli(capsys, "preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--only", "gpu")
    assert code == 2 and "--only" in err


# --- commands that plan for another machine ----------------------------------------------------------


def test_train_dry_run_plans_for_a_gpu_node_on_this_machine(tmp_path, capsys, demo_dataset_dir):
    spec = write_spec(tmp_path, demo_dataset_dir)
    code, out, err = run_cli(capsys, "train", "--spec", str(spec), "--backend", "cosmos-rl", "--automl-policy", "off", "--dry-run", "--json")
    assert code == 0, err + out
    pre = json.loads(out)["preflight"]
    assert pre["ok"] and pre["runs_on"] == "node" and pre["errors"] == 0
    assert ENV_CHECKS <= {line.split(" ", 1)[0] for line in pre["check_on_node"]}
    assert "preflight: check on the node: env.redis" in err  # progress goes to stderr under --json
    code, out, err = run_cli(capsys, "train", "--spec", str(spec), "--backend", "local", "--automl-policy", "off", "--dry-run")
    assert code == 0, err + out
    assert "check on the node: env.hf_token" in out


@pytest.mark.parametrize("platform", ["slurm", "docker"])
def test_submit_dry_run_plans_for_a_gpu_node_on_this_machine(tmp_path, capsys, demo_dataset_dir, platform):
    spec = write_spec(tmp_path, demo_dataset_dir)
    code, out, err = run_cli(capsys, "submit", "--platform", platform, "--spec", str(spec), "--dry-run")
    assert code == 0, err + out
    assert "check on the node: env.hf_token" in out and "check on the node: env.gpus" in out
    record = json.loads(next((tmp_path / "results" / "jobs").glob("*.json")).read_text())
    assert record["preflight"]["runs_on"] == "node" and record["preflight"]["ok"]
    assert ENV_CHECKS <= {line.split(" ", 1)[0] for line in record["preflight"]["check_on_node"]}


def test_spec_and_data_errors_still_stop_everywhere(tmp_path, capsys, demo_dataset_dir):
    bad = broken_data(tmp_path, demo_dataset_dir)
    data_error = write_spec(tmp_path, demo_dataset_dir, name="data.yaml", custom__train_dataset={
        "annotation_path": str(bad), "media_path": str(demo_dataset_dir / "train")})
    spec_error = write_spec(tmp_path, demo_dataset_dir, name="spec.yaml", train__train_batch_per_replica=64, train__train_policy={"mini_batch": 1})
    for spec, check in ((data_error, "annotations.video_fps"), (spec_error, "spec.steps_per_rank")):
        for argv in (
            ("train", "--spec", str(spec), "--backend", "cosmos-rl", "--automl-policy", "off", "--dry-run"),
            ("submit", "--platform", "slurm", "--spec", str(spec), "--dry-run"),
            ("submit", "--platform", "docker", "--spec", str(spec), "--dry-run"),
            ("preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--runs-on", "node"),
        ):
            code, out, err = run_cli(capsys, *argv)
            assert code == 2 and check in out + err, (argv, out, err)
    assert not (tmp_path / "results" / "jobs").exists()  # nothing rendered


# --- the rendered job checks its environment first ------------------------------------------------------


def render(tmp: Path, platform: str, spec_path: Path, python: Path):
    spec = load_spec(spec_path, TrainSpec)
    ctx = ctxmod.build_context(
        platform=platform, backend="cosmos-rl", skill=SKILL, spec_path=str(spec_path), spec=spec,
        nodes=None, gpus_per_node=None, options=ctxmod.Options(image="cosmos-rl:test"), job_id=f"train-{platform}", cwd=tmp,
    )
    ctx.python = str(python)
    ctxmod.copy_spec(ctx)
    module = {"local": local, "docker": docker, "slurm": slurm}[platform]
    rendered = module.render(ctx)
    script = {"local": rendered.script, "docker": ctx.job_dir / "container.sh", "slurm": rendered.script}[platform]
    return ctx, script


def job_tools(tmp: Path, *, gpus: bool) -> tuple[Path, Path]:
    """The node's PATH: stand-ins for python (train logged, not run), srun, scontrol, cosmos-rl; with
    gpus, also nvidia-smi (8 GPUs) and redis-server."""
    calls = tmp / "calls.log"
    tools = {
        "python": (  # the container's dependency probe answers "present" (it would import torch: seconds)
            f'case " $* " in *" skillbank.cli train "*) echo "train $*" >> {calls}; exit 0;; *"import pydantic"*) exit 0;; esac\n'
            f'exec {sys.executable} "$@"'
        ),
        "srun": 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"',
        "scontrol": "echo node0",
        "cosmos-rl": f'echo "cosmos-rl $*" >> {calls}',
    }
    if gpus:
        tools |= {"nvidia-smi": EIGHT_GPUS, "redis-server": "exit 0"}
    return fake_bin(tmp / ("node-bin" if gpus else "bare-bin"), tools), calls


def run_job(script: Path, bin_dir: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_TOKEN", "CUDA_VISIBLE"))}
    base |= {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "node0", "SLURM_JOB_ID": "7"}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=base | env, timeout=120)


@pytest.mark.parametrize("platform", ["local", "docker", "slurm"])
def test_rendered_job_runs_the_env_checks_first(tmp_path, demo_dataset_dir, platform):
    spec = write_spec(tmp_path, demo_dataset_dir, model=str(local_model(tmp_path)))
    bare, calls = job_tools(tmp_path, gpus=False)
    ctx, script = render(tmp_path, platform, spec, bare / "python")
    text = script.read_text()
    from skillbank.platform.base import quote_argv

    step = quote_argv(ctx.preflight_argv("python" if platform == "docker" else None, in_script=True)[1:])  # "$JOB_DIR/spec.yaml": found when it runs
    if platform == "local":  # `"${SKILLBANK[@]}" preflight ...`: the skillbank command.sh found
        step = '"${SKILLBANK[@]}" ' + step.removeprefix("-m skillbank.cli ")
    assert f"{step}" in text and "--only env --runs-on here --backend cosmos-rl --gpus-per-node 8" in step
    trainer = {"slurm": "cosmos-node.sh", "local": '"${SKILLBANK[@]}" train'}.get(platform, "skillbank.cli train")  # slurm: node 0 runs skillbank train
    assert text.index(step) < text.index(trainer)
    if platform == "slurm":
        assert '--nodes="$SLURM_NNODES" --ntasks-per-node=1 python ' + step in text  # on every node, python of SKILLBANK_VENV
    # On a node without GPUs the first step fails and the job ends before training starts.
    failed = run_job(script, bare, CUDA_VISIBLE_DEVICES="-1")
    assert failed.returncode == 2 and "env.gpus" in failed.stdout, failed.stdout + failed.stderr
    assert not calls.exists() or ("cosmos-rl" not in calls.read_text() and "train " not in calls.read_text())
    # On a node that has them, the checks pass and training starts.
    node, calls = job_tools(tmp_path, gpus=True)
    ctx, script = render(tmp_path, platform, spec, node / "python")
    done = run_job(script, node)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "train " in calls.read_text()  # slurm too: node 0's skillbank train launches cosmos-rl under its log watcher
    if platform == "slurm":
        assert "--backend cosmos-rl" in calls.read_text() and "--launcher-args" in calls.read_text()
