"""The platform skill: submit (local / docker / slurm), the job record, status / logs / cancel.

No Docker engine and no Slurm here: their commands are rendered and checked (bash -n, golden text
written by the test), and launched through stand-in `docker` / `sbatch` / `squeue` / `sacct` /
`scancel` executables on PATH that answer like the real ones. Preflight is stubbed (its own tests
live with it); one test checks that a failing preflight submits nothing.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from skillbank import cli
from skillbank.platform import context as ctxmod
from skillbank.runs import layout, record as rec
from skillbank.platform import submit as submod
from skillbank.preflight.report import Finding, Report

ROOT = Path(__file__).resolve().parents[1]
SECRET = "hf_" + "Zq9" * 10  # token-shaped, must never be written anywhere


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLBANK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SKILLBANK_ROOT", str(ROOT))
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(submod, "load_run_preflight", lambda: _passing_preflight)


def _passing_preflight(**kwargs):
    _passing_preflight.calls.append(kwargs)
    return Report([Finding("spec.parallelism", "warning", "w")])


_passing_preflight.calls = []


def write_spec(tmp: Path, *, replicas: int = 1, shard: int = 8, tp: int = 1, val: bool = True, model: str | None = None) -> Path:
    data_dir = tmp / "data"
    for split in ("train", "val"):
        (data_dir / split).mkdir(parents=True, exist_ok=True)
        records = [{"id": str(i), "video": f"{i}.mp4", "video_fps": 8, "conversations": [
            {"from": "human", "value": "<video>\nIs it red?"}, {"from": "gpt", "value": "yes"}]} for i in range(64)]
        (data_dir / split / "annotations.json").write_text(json.dumps(records))
    spec = {
        "train": {"train_batch_per_replica": 2, "train_policy": {"mini_batch": 1}, "output_dir": "./results/train"},
        "policy": {"parallelism": {"dp_replicate_size": replicas, "dp_shard_size": shard, "tp_size": tp}},
        "custom": {"train_dataset": {"annotation_path": "data/train/annotations.json", "media_path": "data/train"}},
        "results_dir": "./results",
    }
    if val:
        spec["custom"]["val_dataset"] = {"annotation_path": "data/val/annotations.json", "media_path": "data/val"}
    if model:
        spec["policy"]["model_name_or_path"] = model
    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_cli(*argv: str, capsys) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def submit_json(capsys, *argv: str) -> dict:
    code, out, err = run_cli("submit", *argv, "--json", capsys=capsys)
    assert code == 0, err + out
    return json.loads(out)


def all_text_under(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def fake_tools(tmp: Path, monkeypatch, tools: dict[str, str]) -> Path:
    """Executables that stand in for docker / sbatch / squeue / ...; each logs its argv to calls.log."""
    bin_dir = tmp / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in tools.items():
        exe = bin_dir / name
        exe.write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> {tmp}/calls.log\n{body}\n')
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp / "calls.log"


# --- slurm -----------------------------------------------------------------------------------------

SLURM_GOLDEN_HEADER = """#!/bin/bash
#SBATCH --job-name=skillbank-train-golden
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --output=slurm-%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=B:USR1@300
#SBATCH --export=ALL
#SBATCH --partition=batch
#SBATCH --account=proj
#SBATCH --time=04:00:00
"""


def render_slurm(tmp: Path, spec_path: Path, job_id: str = "train-golden", **options):
    from skillbank.platform import slurm
    from skillbank.specification.io import load_spec
    from skillbank.specification.train import TrainSpec

    spec = load_spec(spec_path, TrainSpec)
    ctx = ctxmod.build_context(
        platform="slurm", backend="cosmos-rl", skill=submod.DEFAULT_SKILL, spec_path=str(spec_path), spec=spec,
        nodes=None, gpus_per_node=None, options=ctxmod.Options(**options), job_id=job_id, cwd=tmp,
    )
    ctxmod.copy_spec(ctx)
    return ctx, slurm.render(ctx)


def test_slurm_script_matches_golden_and_parses(tmp_path):
    spec_path = write_spec(tmp_path, replicas=2, shard=4, tp=2)
    ctx, rendered = render_slurm(tmp_path, spec_path, partition="batch", account="proj", time="04:00:00")
    text = rendered.script.read_text()
    golden = tmp_path / "golden" / "job.sbatch"
    golden.parent.mkdir()
    golden.write_text(text)
    # Rendering is deterministic: the same job renders byte-identical scripts.
    _, again = render_slurm(tmp_path, spec_path, partition="batch", account="proj", time="04:00:00")
    assert again.script.read_text() == golden.read_text()
    assert text.startswith(SLURM_GOLDEN_HEADER.format(job_dir=ctx.job_dir))  # nodes = dp_replicate, GPUs = shard*tp
    subprocess.run(["bash", "-n", str(rendered.script)], check=True)
    for line in (
        'run_step srun ${IN_ENV[@]+"${IN_ENV[@]}"} --nodes="$SLURM_NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash "$JOB_DIR/cosmos-node.sh"',
        "trap on_usr1 USR1",  # the time limit's signal: the guard, then scontrol requeue of the same id (platform.requeue)
        'HOOK_ARGS=(--job-dir "$JOB_DIR" --run-dir "$RUN_DIR" --limit-s 14400 --lead-s 300)',
        '    scontrol requeue "$SLURM_JOB_ID"',
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        'if compgen -G "$RUN_DIR/checkpoints/step_*" > /dev/null; then',
        "snapshot_download('nvidia/Cosmos-Reason2-8B')",
        "export RUN_DIR LOG_DIR RESUME SCRIPT HEAD_NODE NODE_LIST PORT RDZV_PORT",
    ):
        assert line in text, line
    node = (ctx.job_dir / "cosmos-node.sh").read_text()  # node 0: skillbank train (launcher + watcher); the others: the launcher
    subprocess.run(["bash", "-n", str(ctx.job_dir / "cosmos-node.sh")], check=True)
    for line in (
        'LAUNCH=(--num-workers "${SLURM_NNODES:-1}" --worker-idx "$NODE" --node-ip-list "$NODE_LIST" --port "$PORT" --rdzv-port "$RDZV_PORT")',
        f'exec python -m skillbank.cli train --spec "$JOB_DIR/spec.yaml" --backend cosmos-rl --automl-policy off --run-dir "$RUN_DIR" --log-dir "$LOG_DIR/node_0" $RESUME',
        'exec cosmos-rl --config "$RUN_DIR/cosmos_rl.toml" --log-dir "$LOG_DIR/node_$NODE" "${LAUNCH[@]}" --url "$HEAD_NODE:$PORT" "$SCRIPT"',
    ):
        assert line in node, line
    assert SECRET not in all_text_under(ctx.job_dir)


def test_slurm_review_toml(tmp_path):
    """The job folder's cosmos-rl.toml is submit's view, for review: node 0 renders the run's own when each attempt starts."""
    ctx, rendered = render_slurm(tmp_path, write_spec(tmp_path, replicas=2))
    fresh = tomllib.loads((ctx.job_dir / "cosmos-rl.toml").read_text())
    assert fresh["train"]["resume"] is False and not (ctx.job_dir / "cosmos-rl-resume.toml").exists()
    assert fresh["train"]["output_dir"] == str(rendered.run_dir) == str(ctx.train_output_dir / ctx.job_id / ctx.job_id)  # cosmos-rl scans its parent: this job's alone
    assert fresh["policy"]["parallelism"]["dp_replicate_size"] == 2
    assert fresh["policy"]["model_name_or_path"] == "nvidia/Cosmos-Reason2-8B"  # hf_model:// resolved before launch


def test_submit_resume_from_a_checkpoint(tmp_path, capsys):
    """--resume-from: the slurm job's node 0 passes it to `skillbank train` (a requeue resumes its own run's newest
    checkpoint instead); local / docker jobs pass it too; an incomplete one is refused; a node-only path is passed on
    with a note."""
    spec = write_spec(tmp_path)
    ckpt = tmp_path / "old" / "20250101000000" / "checkpoints" / "step_40" / "policy"
    ckpt.mkdir(parents=True)
    (ckpt / "cosmos_config").write_text(json.dumps({"policy": {"parallelism": {"dp_shard_size": 8}}}))
    for rank in range(7):
        (ckpt / f".rank_{rank}_complete").write_text("")
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--resume-from", str(ckpt.parent), "--dry-run", capsys=capsys)
    assert code == 2 and "7 of 8 saving ranks" in err
    (ckpt / ".rank_7_complete").write_text("")
    code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--resume-from", str(ckpt.parent), "--dry-run", "--json", capsys=capsys)
    assert code == 0
    job_dir = Path(json.loads(out)["record"]["outputs"]["job_dir"])
    assert tomllib.loads((job_dir / "cosmos-rl.toml").read_text())["train"]["resume"] == str(ckpt.resolve())
    assert f"--resume-from {ckpt.resolve()}" in (job_dir / "cosmos-node.sh").read_text()
    code, out, _ = run_cli("submit", "--platform", "local", "--spec", str(spec), "--resume-from", "/cluster/only/step_9", "--dry-run", "--json", capsys=capsys)
    record = json.loads(out)["record"]
    assert code == 0 and record["argv"][-2:] == ["--resume-from", "/cluster/only/step_9"]
    assert any("not on this machine" in n for n in record["notes"])


def test_slurm_requeue_resumes_only_with_a_checkpoint(tmp_path):
    """Run the script's resume block in bash: no --resume without a checkpoint in the job's own run folder, --resume with one."""
    ctx, rendered = render_slurm(tmp_path, write_spec(tmp_path))
    text = rendered.script.read_text()
    block = text[text.index("RUN_DIR="): text.index("# Download")]
    probe = tmp_path / "probe.sh"
    probe.write_text(block + 'echo "RESUME=$RESUME"\n')
    out = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True, cwd=ctx.workdir(in_script=False)).stdout
    assert out.strip().endswith("RESUME=")
    (rendered.run_dir / "checkpoints" / "step_10").mkdir(parents=True)
    out = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True, cwd=ctx.workdir(in_script=False)).stdout
    assert out.strip().endswith("RESUME=--resume")


def test_slurm_dry_run_cli_and_shape_checks(tmp_path, capsys):
    spec = write_spec(tmp_path, replicas=2)
    code, out, _ = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--dry-run", capsys=capsys)
    assert code == 0
    script = Path(out.splitlines()[1])
    assert script.name == "job.sbatch" and script.is_file()
    record = json.loads(next((tmp_path / "results" / "jobs").glob("*.json")).read_text())
    assert record["status"] == "rendered" and record["dry_run"] and record["external_id"] is None
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--nodes", "3", "--dry-run", capsys=capsys)
    assert code == 2 and "dp_replicate_size" in err
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--gpus-per-node", "4", "--dry-run", capsys=capsys)
    assert code == 2 and "dp_shard_size" in err
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(spec), "--time", "4h", "--dry-run", capsys=capsys)
    assert code == 2 and "--time" in err


def test_slurm_submit_status_cancel_with_stand_in_tools(tmp_path, monkeypatch, capsys):
    calls = fake_tools(tmp_path, monkeypatch, {
        "sbatch": "echo 4242",
        "squeue": 'if [ -f "$(dirname "$0")/cancelled" ]; then exit 0; fi; echo RUNNING',
        "sacct": "echo 'CANCELLED by 0|0:15'",
        "scancel": 'touch "$(dirname "$0")/cancelled"',
    })
    doc = submit_json(capsys, "--platform", "slurm", "--spec", str(write_spec(tmp_path, replicas=2)))
    record = doc["record"]
    assert record["external_kind"] == "slurm-job" and record["external_id"] == "4242" and record["status"] == "submitted"
    assert record["outputs"]["log"].endswith("slurm-4242.out")
    assert "sbatch --parsable " in calls.read_text()
    code, out, _ = run_cli("jobs", "status", record["id"], "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["record"]["status"] == "running"
    Path(record["outputs"]["log"]).write_text("line 1\nline 2\n")
    code, out, _ = run_cli("jobs", "logs", record["id"], "--tail", "1", capsys=capsys)
    assert out == "line 2\n"
    code, out, _ = run_cli("jobs", "cancel", record["id"], "--json", capsys=capsys)
    assert json.loads(out)["record"]["status"] == "cancelled" and "scancel 4242" in calls.read_text()


def test_slurm_without_sbatch_asks_for_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, _, err = run_cli("submit", "--platform", "slurm", "--spec", str(write_spec(tmp_path)), capsys=capsys)
    assert code == 2 and "--dry-run" in err
    assert not (tmp_path / "results" / "jobs").exists()  # nothing rendered, nothing recorded


# --- docker ----------------------------------------------------------------------------------------


def test_docker_dry_run_argv(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-value-123")
    model = tmp_path / "models" / "base"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    doc = submit_json(capsys, "--platform", "docker", "--spec", str(write_spec(tmp_path, model=str(model))), "--dry-run")
    record = doc["record"]
    argv = record["argv"]
    assert argv[:3] == ["docker", "run", "--detach"]
    assert ["--gpus", "all"] == argv[argv.index("--gpus"): argv.index("--gpus") + 2]
    assert "--ipc=host" in argv and argv[argv.index("--shm-size") + 1] == "16g"
    volumes = {argv[i + 1] for i, a in enumerate(argv) if a == "-v"}
    assert f"{tmp_path / 'data' / 'train'}:{tmp_path / 'data' / 'train'}:ro" in volumes
    assert f"{tmp_path / 'data' / 'val'}:{tmp_path / 'data' / 'val'}:ro" in volumes
    assert f"{model}:{model}:ro" in volumes
    assert f"{tmp_path / 'results'}:{tmp_path / 'results'}" in volumes  # read-write; train.output_dir is inside it
    assert f"{tmp_path / 'hf'}:/root/.cache/huggingface" in volumes
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert "HF_TOKEN" in envs and "WANDB_API_KEY" in envs  # by name only
    assert not any(e.startswith(("HF_TOKEN=", "WANDB_API_KEY=")) for e in envs)
    assert record["image"] == "skillbank/cosmos-rl:0.4.7-torch2.10-cu128" and record["image"] in argv  # skill_info's pinned tag
    assert argv[argv.index("-w") + 1] == str(tmp_path)  # the job works in the submit directory: the spec copy keeps its relative paths
    assert record["outputs"]["run_dir"] == str(layout.job_run_dir(tmp_path / "results" / "train", record["id"]))  # fixed at submit, every platform
    assert Path(record["outputs"]["run_dir"]).parent.name == record["id"]  # nested in the job's own run root
    container = Path(argv[-1]).read_text()
    assert "--backend cosmos-rl --automl-policy off" in container and '--spec "$JOB_DIR/spec.yaml"' in container
    job_dir = Path(record["outputs"]["job_dir"])
    subprocess.run(["bash", "-n", str(job_dir / "command.sh")], check=True)
    text = all_text_under(job_dir) + json.dumps(record)
    assert SECRET not in text and "wandb-secret-value-123" not in text
    assert record["env"] == ["HF_TOKEN", "WANDB_API_KEY"]


def test_docker_image_flag_and_multinode_refused(tmp_path, capsys):
    doc = submit_json(capsys, "--platform", "docker", "--spec", str(write_spec(tmp_path)), "--image", "my/img:1", "--dry-run")
    assert doc["record"]["image"] == "my/img:1" and "my/img:1" in doc["record"]["argv"]
    code, _, err = run_cli("submit", "--platform", "docker", "--spec", str(write_spec(tmp_path, replicas=2)), "--dry-run", capsys=capsys)
    assert code == 2 and "--platform slurm" in err


def test_docker_without_engine_is_an_input_error(tmp_path, monkeypatch, capsys):
    fake_tools(tmp_path, monkeypatch, {"docker": 'echo "Cannot connect to the Docker daemon" >&2; exit 1'})
    code, _, err = run_cli("submit", "--platform", "docker", "--spec", str(write_spec(tmp_path)), capsys=capsys)
    assert code == 2 and "--dry-run" in err and "Docker" in err


def test_docker_submit_status_logs_cancel_with_stand_in_engine(tmp_path, monkeypatch, capsys):
    calls = fake_tools(tmp_path, monkeypatch, {"docker": """
case "$1" in
  info) echo ok ;;
  run) echo abc123container ;;
  inspect) if [ -f "$(dirname "$0")/stopped" ]; then echo '{"Status":"exited","ExitCode":143,"StartedAt":"2026-01-01T00:00:00Z","FinishedAt":"2026-01-01T01:00:00Z"}'; else echo '{"Status":"running","ExitCode":0,"StartedAt":"2026-01-01T00:00:00Z","FinishedAt":"0001-01-01T00:00:00Z"}'; fi ;;
  logs) echo "step 1"; echo "step 2" >&2 ;;
  stop) touch "$(dirname "$0")/stopped" ;;
esac"""})
    record = submit_json(capsys, "--platform", "docker", "--spec", str(write_spec(tmp_path)))["record"]
    assert record["external_kind"] == "docker-container" and record["external_id"] == "abc123container"
    code, out, _ = run_cli("jobs", "status", record["id"], "--json", capsys=capsys)
    assert json.loads(out)["record"]["status"] == "running"
    code, out, _ = run_cli("jobs", "logs", record["id"], capsys=capsys)
    assert "step 1" in out and "step 2" in out
    code, out, _ = run_cli("jobs", "cancel", record["id"], "--json", capsys=capsys)
    final = json.loads(out)["record"]
    assert final["status"] == "cancelled" and final["exit_code"] == 143
    log = calls.read_text()
    assert "docker stop --time 30 abc123container" in log and SECRET not in log


# --- local -----------------------------------------------------------------------------------------


def _fake_train(monkeypatch, code: str) -> None:
    """Replace the train command the local platform runs with a small python program."""
    monkeypatch.setattr(ctxmod.JobContext, "train_argv", lambda self, python=None, resume=False, in_script=False, **_: [sys.executable, "-c", code])


def _wait_status(job_id: str, want: set[str], capsys, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        code, out, _ = run_cli("jobs", "status", job_id, "--json", capsys=capsys)
        record = json.loads(out)["record"]
        if record["status"] in want or time.monotonic() > deadline:
            return record
        time.sleep(0.1)


def test_local_submit_runs_detached_and_records_the_end(tmp_path, monkeypatch, capsys):
    _fake_train(monkeypatch, "import sys; print('trained', flush=True); sys.exit(3)")
    record = submit_json(capsys, "--platform", "local", "--spec", str(write_spec(tmp_path)))["record"]
    assert record["external_kind"] == "pid" and record["backend"] == "cosmos-rl"  # the one default of train, automl and submit
    assert _passing_preflight.calls[-1]["backend"] == "cosmos-rl" and _passing_preflight.calls[-1]["action"] == "train"
    final = _wait_status(record["id"], {"succeeded", "failed"}, capsys)
    assert final["status"] == "failed" and final["exit_code"] == 3 and final["ended"]
    code, out, _ = run_cli("jobs", "logs", record["id"], capsys=capsys)
    assert "trained" in out
    # The record is where the id index says, and its spec hash is the copy's.
    path = rec.record_path(tmp_path / "results", record["id"])
    assert path.is_file() and rec.sha256_file(record["spec"]["copy_path"]) == record["spec"]["sha256"]


def test_local_cancel_stops_the_process_tree(tmp_path, monkeypatch, capsys):
    child = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(child)!r}, 'w').write(str(p.pid))\n"
        "print('running', flush=True)\n"
        "time.sleep(60)\n"
    )
    _fake_train(monkeypatch, code)
    record = submit_json(capsys, "--platform", "local", "--spec", str(write_spec(tmp_path)))["record"]
    assert _wait_status(record["id"], {"running"}, capsys)["status"] == "running"
    deadline = time.monotonic() + 20
    while not child.is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    code_, out, _ = run_cli("jobs", "cancel", record["id"], "--json", capsys=capsys)
    assert json.loads(out)["record"]["status"] == "cancelled"
    grandchild = int(child.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:  # pragma: no cover - a leak
        pytest.fail("the job's grandchild (own session) survived cancel")


def test_failed_preflight_submits_nothing(tmp_path, monkeypatch, capsys):
    bad = Report([Finding("spec.steps_per_rank", "error", "records per rank < train_batch_per_replica", "lower it", "train.train_batch_per_replica")])
    monkeypatch.setattr(submod, "load_run_preflight", lambda: (lambda **kw: bad))
    code, out, _ = run_cli("submit", "--platform", "local", "--spec", str(write_spec(tmp_path)), "--json", capsys=capsys)
    doc = json.loads(out)
    assert code == 2 and doc["ok"] is False and "train.train_batch_per_replica" in doc["error"]["message"]
    assert not (tmp_path / "results" / "jobs").exists()


def test_failed_launch_is_one_json_document_and_a_failed_record(tmp_path, monkeypatch, capsys):
    from skillbank.errors import RunError
    from skillbank.platform import local

    def refuse(ctx, rendered):
        raise RunError("no such interpreter")

    monkeypatch.setattr(local, "launch", refuse)
    code, out, err = run_cli("submit", "--platform", "local", "--spec", str(write_spec(tmp_path)), "--json", capsys=capsys)
    doc = json.loads(out)  # a RunError under --json is reported like bad input, with exit 1
    assert code == 1 and doc["ok"] is False and "no such interpreter" in doc["error"]["message"] and not err
    record = json.loads(next((tmp_path / "results" / "jobs").glob("*.json")).read_text())
    assert record["status"] == "failed" and record["ended"]


def test_missing_preflight_module_is_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(submod, "load_run_preflight", lambda: None)
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(write_spec(tmp_path)), "--dry-run")["record"]
    assert record["preflight"]["ran"] is False


def test_jobs_lookup_errors_and_list(tmp_path, capsys):
    code, out, _ = run_cli("jobs", "status", "train-nope", "--json", capsys=capsys)
    assert code == 2 and json.loads(out)["ok"] is False
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(write_spec(tmp_path)), "--dry-run")["record"]
    code, out, _ = run_cli("jobs", "list", "--json", capsys=capsys)
    assert record["id"] not in [j["id"] for j in json.loads(out)["jobs"]]  # a dry run writes nothing under the cache: no index entry
    code, out, _ = run_cli("jobs", "list", "--results-dir", "results", "--json", capsys=capsys)
    assert record["id"] in [j["id"] for j in json.loads(out)["jobs"]]
    code, _, err = run_cli("jobs", "logs", record["id"], capsys=capsys)
    assert code == 2 and "dry-run" in err


def test_record_schema_file_is_current():
    path = ROOT / "skills" / "platform" / "tao-run-platform" / "references" / "job_record.schema.json"
    assert json.loads(path.read_text()) == rec.json_schema(), "regenerate: skillbank jobs schema -o " + str(path.relative_to(ROOT))


def test_jobs_on_a_foreground_run_record_and_its_old_shape(tmp_path, capsys):
    """A foreground train / rl run writes the job record's one shape (kind foreground): `jobs status` follows it by id
    (its pid, its run folder's progress) and `jobs cancel` says how to stop it; a version-1 foreground record (job_id,
    started_at, outputs.val_loss_last) is still read; any other JSON: exit 2, no validation dump."""
    from skillbank.training.jobrecord import JobRecord

    spec = tmp_path / "rl.yaml"
    spec.write_text("train: {}\n")
    job = JobRecord.start(action="rl", backend="local", spec_path=spec, argv=["skillbank", "rl"], results_dir=tmp_path / "results")
    run = tmp_path / "rl" / "20260101000000"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1, "total_steps": 3, "epoch": 1, "loss": 2.5, "time": 1.0}\n')
    job.update(run_dir=run)
    assert json.loads(job.path.read_text())["progress"]["last_step"] == 1  # read as the run goes
    assert cli.main(["jobs", "status", job.record.id, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["record"]["kind"] == "foreground" and doc["record"]["status"] == "running" and doc["progress"]["total_steps"] == 3
    assert cli.main(["jobs", "cancel", job.record.id]) == 2 and f"kill {os.getpid()}" in capsys.readouterr().err
    old = tmp_path / "results" / "jobs" / "train-20250101-000000-abcdef.json"
    old.write_text(json.dumps({"schema_version": 1, "job_id": "train-20250101-000000-abcdef", "action": "train", "backend": "local",
                               "spec_path": str(spec), "spec_sha256": "0" * 64, "argv": ["skillbank", "train"], "status": "succeeded",
                               "started_at": "2025-01-01T00:00:00Z", "ended_at": "2025-01-01T01:00:00Z", "exit_code": 0, "error": None,
                               "pid": 1, "outputs": {"run_dir": str(run), "val_loss_last": 0.5, "last_step": 3}}))
    assert cli.main(["jobs", "status", str(old), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["record"]["id"] == "train-20250101-000000-abcdef" and doc["record"]["status"] == "succeeded" and doc["record"]["kind"] == "foreground"
    assert doc["record"]["outputs"]["run_dir"] == str(run) and doc["progress"]["state"] == "succeeded"
    other = tmp_path / "other.json"
    other.write_text('{"x": 1}')
    assert cli.main(["jobs", "status", str(other)]) == 2
    err = capsys.readouterr().err
    assert "not a skillbank job record (id: Field required)" in err and "validation error" not in err
    other = tmp_path / "other.json"
    other.write_text('{"x": 1}')
    assert cli.main(["jobs", "status", str(other)]) == 2
    err = capsys.readouterr().err
    assert "not a skillbank job record (id: Field required)" in err and "validation error" not in err


# --- fitted to the cluster's data --------------------------------------------------------------------------------


def test_submit_fits_a_sample_fitted_spec_to_the_described_data_and_merges_what_the_node_refitted(tmp_path, capsys, monkeypatch):
    """A spec whose batch `skillbank spec` fitted to a sample (its fitted block): `submit --records N --clip-seconds S`
    fits the copy to N records (record `fitted`, where submit) and plans --time from N; what the job's first step
    re-fits on the node (runs.node.Attempt.fit -> node.json) joins the record (where node) at the next look."""
    from skillbank.platform.follow import follow
    from skillbank.runs import node

    spec = write_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["train"]["train_batch_per_replica"] = 2
    data["fitted"] = {"records": 24, "counted": "/laptop/sample/annotations.json", "ceilings": {"train.train_batch_per_replica": 32}}
    spec.write_text(yaml.safe_dump(data))
    record = submit_json(capsys, "--platform", "slurm", "--spec", str(spec), "--dry-run", "--records", "20000", "--clip-seconds", "4")["record"]
    fits = [(f["key"], f["from"], f["to"], f["where"]) for f in record["fitted"]]
    assert fits[0] == ("train.train_batch_per_replica", 32, 2, "spec") and ("train.train_batch_per_replica", 2, 32, "submit") in fits
    assert any(f[0] == "steps.total" and f[3] == "submit" for f in fits)
    copy = yaml.safe_load((Path(record["outputs"]["job_dir"]) / "spec.yaml").read_text())
    assert copy["train"]["train_batch_per_replica"] == 32 and copy["fitted"]["records"] == 20000
    assert any("--records 20000" in n and "--time" in n for n in record["notes"]), record["notes"]
    assert data == yaml.safe_load(spec.read_text())  # the input untouched

    monkeypatch.setenv(node.JOB_DIR_ENV, record["outputs"]["job_dir"])
    monkeypatch.setenv(node.JOB_ID_ENV, record["id"])
    attempt = node.Attempt(*node.current_job(), now="2026-01-01T00:00:00Z")
    attempt.fit([{"key": "train.train_batch_per_replica", "from": 32, "to": 16, "where": "node", "records": 300, "why": "300 records here"}])
    followed = follow(rec.load(Path(record["outputs"]["job_dir"]).parent / f"{record['id']}.json"))
    assert [(f["key"], f["to"], f["where"]) for f in followed.fitted if f["where"] == "node"] == [("train.train_batch_per_replica", 16, "node")]
    assert [a["attempt"] for a in followed.attempts] == [0] and followed.progress.attempts[0]["status"] == "running"
