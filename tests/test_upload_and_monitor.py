"""Checkpoint uploads (train.ckpt.upload_s3 / upload_hf) and monitoring (TensorBoard, wandb) of training.

S3 runs for real against moto's S3-compatible server, started on 127.0.0.1 by the `s3` fixture and
read back with boto3. The Hugging Face Hub cannot be reached here: its upload goes to a test double
standing in for huggingface_hub.HfApi (whoami / create_repo / upload_folder), and the tests say so.
wandb runs for real in its offline mode (no network here).
"""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path

import pytest

from skillbank.errors import InputError
from skillbank.specification.train import CheckpointSpec, TrainSpec
from skillbank.training import monitor, upload
from skillbank.runs import layout

from conftest import local_train_spec

SECRET_KEY = "awsSecretKeyThatMustNeverAppear42"


# --- fixtures ----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on a free local port for the module; stopped at the end."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The AWS_* variables boto3 reads by name, pointing at the local server; a boto3 client to read back."""
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return boto3.client("s3")


@pytest.fixture
def dead_s3(monkeypatch):
    """An endpoint where nothing listens, one try per request: every upload fails at once."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")


class FakeHfApi:
    """Test double for huggingface_hub.HfApi: the hub cannot be reached from the test machines.
    Records what would have been sent (and copies the folder's file list) instead of sending it."""

    def __init__(self, *, fail: bool = False):
        self.fail = fail
        self.calls: list[tuple[str, dict]] = []

    def whoami(self):
        return {"name": "tester"}

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))

    def upload_folder(self, *, folder_path, repo_id, **kw):
        if self.fail:
            raise RuntimeError(f"403 Forbidden: token {SECRET_KEY} has no write access")
        files = sorted(str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file())
        self.calls.append(("upload_folder", {"folder_path": folder_path, "repo_id": repo_id, "files": files, **kw}))


def _keys(client, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", []))


def _fake_save(run: Path, step: int) -> None:
    policy = layout.checkpoint_dir(run, step)
    policy.mkdir(parents=True)
    (policy / "model_rank_0.pth").write_bytes(b"weights" * 10)
    (policy / ".rank_0_complete").write_text("")
    export = layout.safetensors_dir(run, step)
    export.mkdir(parents=True)
    (export / "model.safetensors").write_bytes(b"tensors" * 10)
    (export / "config.json").write_text("{}")


def _spec(**ckpt) -> TrainSpec:
    return TrainSpec.model_validate({"train": {"ckpt": ckpt}})


# --- the spec keys ---------------------------------------------------------------------------------


def test_upload_keys_follow_cosmos_rl_rules(tmp_path):
    from skillbank.specification.io import load_spec

    assert CheckpointSpec(upload_s3=True, s3_bucket="b").upload_s3 == "final"  # cosmos-rl rejects true
    assert CheckpointSpec(upload_s3="all", s3_bucket="b").upload_s3 == "all"
    assert CheckpointSpec().upload_s3 is False and CheckpointSpec().upload_hf is False
    cases = {
        "upload_s3: final": "train.ckpt.s3_bucket",
        "upload_hf: true\n    hf_repo_name: me/model": "train.ckpt.hf_repo_name",
        "upload_hf: true\n    enable_checkpoint: false": "train.ckpt.upload_hf",
        "upload_s3: all\n    s3_bucket: b\n    enable_checkpoint: false": "train.ckpt.upload_s3",
    }
    for text, key in cases.items():
        path = tmp_path / "spec.yaml"
        path.write_text(f"train:\n  ckpt:\n    {text}\n")
        with pytest.raises(InputError) as err:
            load_spec(path, TrainSpec)
        assert key in str(err.value.where) or key in str(err.value), (text, str(err.value))


def test_toml_carries_the_upload_keys_and_cosmos_config_accepts_them(tmp_path):
    """The emitted [train.ckpt] is validated by cosmos-rl 0.4.7's own Config."""
    from cosmos_rl.policy.config import Config

    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.toml import build_toml

    ann = tmp_path / "train.json"
    record = {"id": "r", "video": "v.mp4", "conversations": [{"from": "human", "value": "<video>\nq"}, {"from": "gpt", "value": "a"}]}
    ann.write_text(json.dumps([dict(record, id=f"r{i}") for i in range(64)]))
    for mode in (True, "all"):
        spec = TrainSpec.model_validate({
            "train": {"train_batch_per_replica": 4, "ckpt": {"upload_hf": True, "hf_repo_name": "my-sft", "upload_s3": mode,
                                                            "s3_bucket": "bkt", "s3_prefix": "team/runs"}},
            "policy": {"parallelism": {"dp_shard_size": 1}},
            "custom": {"train_dataset": {"annotation_path": str(ann)}},
        })
        out = build_toml(spec, model="nvidia/Cosmos-Reason2-8B", family=family_of("nvidia/Cosmos-Reason2-8B"),
                         run_dir=tmp_path / "20250101000000", run_id="20250101000000", resume=False)
        ckpt = Config.from_dict(copy.deepcopy(out.data)).train.ckpt
        assert ckpt.upload_s3 == ("final" if mode is True else "all")
        assert (ckpt.upload_hf, ckpt.hf_repo_name, ckpt.s3_bucket) == (True, "my-sft", "bkt")
        assert ckpt.s3_prefix == "team/runs/20250101000000" == upload.s3_run_prefix("team/runs", "20250101000000")
    plain = TrainSpec.model_validate({"train": {"train_batch_per_replica": 4}, "policy": {"parallelism": {"dp_shard_size": 1}},
                                      "custom": {"train_dataset": {"annotation_path": str(ann)}}})
    data = build_toml(plain, model="nvidia/Cosmos-Reason2-8B", family=family_of("nvidia/Cosmos-Reason2-8B"),
                      run_dir=tmp_path / "r", run_id="r", resume=False).data
    assert data["train"]["ckpt"]["upload_s3"] is False and "s3_bucket" not in data["train"]["ckpt"]
    assert Config.from_dict(copy.deepcopy(data)).train.ckpt.upload_s3 is False


def test_preflight_names_missing_upload_credentials_as_warnings(tiny_model_dir, demo_dataset_dir, tmp_path, monkeypatch):
    from skillbank.preflight.run import run_preflight

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    spec = local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.ckpt.upload_s3": "all", "train.ckpt.s3_bucket": "b", "train.ckpt.upload_hf": True})
    report = run_preflight(skill="tao-finetune-cosmos-reason", action="train", spec=spec, backend="local")
    found = {f.where: f for f in report.findings if f.check == "env.upload"}
    assert set(found) == {"train.ckpt.upload_s3", "train.ckpt.upload_hf"} and report.ok  # warnings: the run goes on
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in found["train.ckpt.upload_s3"].message
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 20)
    report = run_preflight(skill="tao-finetune-cosmos-reason", action="train", spec=spec, backend="local")
    assert not [f for f in report.findings if f.check == "env.upload"] and SECRET_KEY not in json.dumps(report.to_dict())


# --- S3 against a local server ----------------------------------------------------------------------


def test_s3_final_and_all_upload_checkpoint_and_export(s3, tmp_path):
    run = tmp_path / "20250101000000"
    _fake_save(run, 2)
    _fake_save(run, 4)
    lines: list[str] = []
    final = _spec(upload_s3="final", s3_bucket="final-bkt", s3_prefix="p")
    assert upload.after_save(final, run, 2, final=False, log=lines.append) == []  # "final": not this one
    done = upload.after_save(final, run, 4, final=True, log=lines.append)
    assert [u.status for u in done] == ["uploaded", "uploaded"]
    assert _keys(s3, "final-bkt") == [
        "p/20250101000000/checkpoints/step_4/policy/.rank_0_complete",
        "p/20250101000000/checkpoints/step_4/policy/model_rank_0.pth",
        "p/20250101000000/safetensors/step_4/config.json",
        "p/20250101000000/safetensors/step_4/model.safetensors",
    ]
    body = s3.get_object(Bucket="final-bkt", Key="p/20250101000000/safetensors/step_4/model.safetensors")["Body"].read()
    assert body == (layout.safetensors_dir(run, 4) / "model.safetensors").read_bytes()
    every = _spec(upload_s3="all", s3_bucket="all-bkt")
    upload.after_save(every, run, 2, final=False, log=lines.append)
    assert {k.split("/")[2] for k in _keys(s3, "all-bkt")} == {"checkpoints", "safetensors"}
    rows = upload.read_uploads(run)
    assert len(rows) == 4 and all(r["status"] == "uploaded" for r in rows) and upload.failed_uploads(run) == []
    assert rows[0]["destination"] == "s3://final-bkt/p/20250101000000/checkpoints/step_4/policy" and rows[0]["files"] == 2
    assert any("Uploaded safetensors step 4 to s3://final-bkt/" in line for line in lines)


def test_failed_s3_upload_is_reported_and_keeps_the_local_files(dead_s3, tmp_path):
    run = tmp_path / "20250101000000"
    _fake_save(run, 3)
    before = sorted(p for p in run.rglob("*"))
    lines: list[str] = []
    done = upload.after_save(_spec(upload_s3="all", s3_bucket="bkt"), run, 3, final=True, log=lines.append)
    assert [u.status for u in done] == ["failed", "failed"]
    assert sorted(p for p in run.rglob("*") if p.name != upload.UPLOADS_FILE) == before  # nothing local is lost
    assert len(upload.failed_uploads(run)) == 2 and "Could not connect" in upload.failed_uploads(run)[0]["error"]
    assert all("WARNING: upload of" in line and "is kept" in line for line in lines)
    stored = (run / upload.UPLOADS_FILE).read_text() + "\n".join(lines)
    assert SECRET_KEY not in stored


# --- the Hub (a test double: no network here) ----------------------------------------------------------


def test_hf_upload_sends_the_final_export_to_the_run_repo(tmp_path, monkeypatch):
    """The hub cannot be reached here: FakeHfApi stands in for huggingface_hub.HfApi."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    run = tmp_path / "20250101000000"
    _fake_save(run, 2)
    _fake_save(run, 4)
    api = FakeHfApi()
    spec = _spec(upload_hf=True, hf_repo_name="my-sft")
    done = upload.after_run(spec, run, log=lambda _: None, api=api)
    assert done[0].status == "uploaded" and done[0].destination == "https://huggingface.co/tester/my-sft-20250101000000"
    (_, create), (_, sent) = api.calls
    assert create["repo_id"] == sent["repo_id"] == "tester/my-sft-20250101000000"  # cosmos-rl's <user>/<name>-<timestamp>
    assert sent["folder_path"] == str(layout.safetensors_dir(run, 4)) and sent["files"] == ["config.json", "model.safetensors"]
    lines: list[str] = []
    failed = upload.after_run(spec, run, log=lines.append, api=FakeHfApi(fail=True))
    assert failed[0].status == "failed" and "403" in failed[0].error and SECRET_KEY not in failed[0].error
    assert layout.list_safetensors_steps(run) == [2, 4] and "WARNING" in lines[0]
    assert SECRET_KEY not in (run / upload.UPLOADS_FILE).read_text()
    assert upload.after_run(_spec(), run, api=FakeHfApi()) == []  # upload_hf false: nothing


# --- monitoring --------------------------------------------------------------------------------------


def _event_scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(monitor.tensorboard_dir(run)))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_monitor_writes_tensorboard_events_under_the_shared_names(tmp_path):
    run = tmp_path / "20250101000000"
    m = monitor.Monitor(run, loggers=["console"], log=lambda _: None)
    m.write({"step": 0, "epoch": 0, "val_loss": 2.5})
    m.write({"step": 1, "epoch": 1, "loss": 2.0, "lr": 1e-4, "grad_norm": 0.5, "samples_per_s": 8.0, "iteration_time": 0.5,
             "gpu_memory_allocated_gib": 30.5, "gpu_memory_reserved_gib": 33.0})  # the memory keys: the local backend on a GPU
    m.write({"step": 2, "epoch": 1, "loss": None, "lr": 1e-4})  # a non-finite loss is left out, not written as 0
    m.write({"step": 3, "reward_mean": 0.5, "reward_std": 0.25, "kl": 0.01, "response_length": 42.0, "entropy": 0.5,
             "val_reward_mean": 0.6})  # GRPO's keys: the local GRPO loop and the cosmos-rl watcher write them
    m.close()
    got = _event_scalars(run)
    assert set(got) == set(monitor.SCALARS.values())
    assert got["train/loss_avg"] == [(1, 2.0)] and got["val/avg_loss"] == [(0, 2.5)]
    assert got["optimizer/lr"][0] == (1, pytest.approx(1e-4)) and got["optimizer/grad_norm"] == [(1, 0.5)]
    assert got["memory/max_allocated_gib"] == [(1, 30.5)]
    assert got["train/reward_mean"] == [(3, 0.5)] and got["rollout/completion_length_mean"] == [(3, 42.0)] and got["val/reward_avg"][0][0] == 3
    assert monitor.where_to_look(run)[0].endswith(f"tensorboard --logdir {run / 'tensorboard'}")


def test_cosmos_rl_step_lines_become_the_same_scalars(tmp_path):
    """The cosmos-rl log watcher reads cosmos-rl 0.4.7's step line into the local backend's keys and
    hands the rows to the same Monitor: one set of names whichever backend trained."""
    from skillbank.training.cosmos_rl.watcher import LogWatcher

    run = tmp_path / "20250101000000"
    watcher = LogWatcher(tmp_path / "logs", run, metrics_path=run / "metrics.jsonl", progress=False, log=lambda _: None,
                         monitor=monitor.Monitor(run, log=lambda _: None))
    for step in (1, 2):
        watcher.feed(f"[rank0]:Step: {step}/2, Loss: {1.0 / step:.5f}, Grad norm: 0.75000, Iteration time: 0.50s, "
                     "optimizer/lr_model: 2.00000e-05", source="policy_0.log")
    watcher.feed("[rank0]:[SFT] Validation loss: 0.4 for train step 2/2, epoch 0", source="policy_0.log")
    watcher.finish(0)
    rows = layout.read_metrics(run)
    assert isinstance(rows[0].pop("time"), float)
    assert rows[0] == {"step": 1, "total_steps": 2, "epoch": None, "loss": 1.0, "grad_norm": 0.75, "lr": 2e-5, "iteration_time": 0.5}
    got = _event_scalars(run)
    assert got["train/loss_avg"] == [(1, 1.0), (2, 0.5)] and got["val/avg_loss"] == [(2, pytest.approx(0.4))]
    assert got["optimizer/grad_norm"] == [(1, 0.75), (2, 0.75)] and [s for s, _ in got["optimizer/lr"]] == [1, 2]


# --- the local backend, end to end (2 CPU ranks) ----------------------------------------------------------


def test_local_run_uploads_logs_curves_and_says_where(s3, tiny_model_dir, demo_dataset_dir, tmp_path, monkeypatch):
    """A 4-step run with upload_s3 "all" (local S3 server), upload_hf (FakeHfApi: the hub cannot be reached
    here) and logging.logger [console, wandb] (wandb offline: no key, no network)."""
    from skillbank.training.local.launch import train_local

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    api = FakeHfApi()
    monkeypatch.setattr(upload, "hf_api", lambda: api)
    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.max_num_steps": 4, "train.ckpt.save_freq": 2, "validation.enable": True,
        "train.ckpt.upload_s3": "all", "train.ckpt.s3_bucket": "runs", "train.ckpt.upload_hf": True, "train.ckpt.hf_repo_name": "tiny",
        "logging.logger": ["console", "wandb"],
    }))
    lines: list[str] = []
    result = train_local(spec, log=lines.append)
    run = Path(result["run_dir"])
    assert any(line.strip() == f"curves     : tensorboard --logdir {run / 'tensorboard'}" for line in lines)
    assert any("wandb      : offline under" in line for line in lines)
    # S3: both checkpoints and both exports, read back
    keys = _keys(s3, "runs")
    for step in (2, 4):
        assert f"outputs/{run.name}/checkpoints/step_{step}/policy/model_rank_1.pth" in keys
        assert f"outputs/{run.name}/safetensors/step_{step}/model.safetensors" in keys
    # the Hub: the final export, after the run
    (_, sent), = [c for c in api.calls if c[0] == "upload_folder"]
    assert sent["repo_id"] == f"tester/tiny-{run.name}" and sent["folder_path"] == str(layout.safetensors_dir(run, 4))
    assert len(result["uploads"]) == 5 and all(r["status"] == "uploaded" for r in result["uploads"])
    # curves: the event file holds every step's loss and the validation losses
    got = _event_scalars(run)
    rows = layout.read_metrics(run)
    assert [s for s, _ in got["train/loss_avg"]] == [1, 2, 3, 4]
    assert [v for _, v in got["train/loss_avg"]] == pytest.approx([r["loss"] for r in rows if "loss" in r])
    assert [s for s, _ in got["val/avg_loss"]] == [0, 4]
    assert {"optimizer/lr", "optimizer/grad_norm", "train/samples_per_s"} <= set(got)
    assert result["tensorboard"] == str(run / "tensorboard")
    assert list((run / "wandb").glob("offline-run-*/run-*.wandb"))


def test_dry_run_says_where_the_curves_and_uploads_go(tiny_model_dir, demo_dataset_dir, tmp_path, monkeypatch):
    from skillbank.training.local.launch import train_local

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.ckpt.upload_s3": True, "train.ckpt.s3_bucket": "bkt", "logging.logger": ["console", "wandb"]}))
    lines: list[str] = []
    plan = train_local(spec, dry_run=True, log=lines.append)
    text = "\n".join(lines)
    assert f"tensorboard --logdir {Path(plan['run_dir']) / 'tensorboard'}" in text and "wandb      : offline under" in text
    assert "upload_s3 'final' -> s3://bkt/outputs/<run timestamp>/ (unset: AWS_ACCESS_KEY_ID" in text
    assert not (tmp_path / "out").exists()


def test_a_failed_upload_never_stops_the_run_or_loses_the_checkpoint(dead_s3, tiny_model_dir, demo_dataset_dir, tmp_path):
    from skillbank.training.local.launch import train_local

    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.max_num_steps": 2, "train.ckpt.save_freq": 2, "validation.enable": False,
        "train.ckpt.upload_s3": "final", "train.ckpt.s3_bucket": "runs",
    }))
    from skillbank.training.jobrecord import JobRecord

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    job = JobRecord.start(action="train", backend="local", spec_path=spec_file, argv=["skillbank", "train"], results_dir=tmp_path / "results")
    lines: list[str] = []
    result = train_local(spec, job=job, log=lines.append)
    run = Path(result["run_dir"])
    recorded = json.loads(job.path.read_text())  # the job record's one shape: a failed upload is a note
    assert [n.split(" to ")[0] for n in recorded["notes"] if n.startswith("upload of")] == ["upload of checkpoint step 2", "upload of safetensors step 2"]
    assert recorded["outputs"]["run_dir"] == str(run) and recorded["progress"]["export"] == str(layout.safetensors_dir(run, 2))
    assert result["last_step"] == 2 and result["final_safetensors"] == str(layout.safetensors_dir(run, 2))
    assert layout.list_checkpoint_steps(run) == [2]
    assert [(r["what"], r["status"]) for r in result["uploads"]] == [("checkpoint", "failed"), ("safetensors", "failed")]
    assert sum("WARNING: upload of" in line and "the local copy is kept" in line for line in lines) == 2
    assert "upload of safetensors step 2" in (run / layout.LOG_FILE).read_text()
    assert SECRET_KEY not in (run / layout.LOG_FILE).read_text() + (run / upload.UPLOADS_FILE).read_text()
