"""The local backend: torchrun + FSDP2 on CPU with 2 ranks, checkpoints, exports, resume after SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from skillbank.errors import InputError
from skillbank.runs import layout
from skillbank.training.local import schedule
from skillbank.runs.steps import StepPlan

from conftest import local_train_spec
from helpers import ROOT, json_out, skillbank

RUN = {"train.epoch": 2}  # 24 train records / (2 ranks x 2 per rank) = 6 steps per epoch
STEPS = 12


def write_spec(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def cli(*args: str, **popen) -> list[str]:
    return [sys.executable, "-m", "skillbank.cli", *args]


# --- pure pieces -----------------------------------------------------------------------------------


@pytest.mark.parametrize("decay,mid,end", [("none", 1.0, 1.0), ("linear", 0.55, 0.1), ("cosine", 0.55, 0.1), ("sqrt", None, 0.1)])
def test_lr_schedule_warms_up_then_decays_to_the_floor(decay, mid, end):
    total, warm = 21, 1
    factors = [schedule.lr_factor(s, total_steps=total, warmup=warm, decay=decay, min_factor=0.1) for s in range(total + 1)]
    assert factors[0] == 1.0 / warm or warm == 0
    assert factors[-1] == pytest.approx(end)
    if mid is not None:
        assert factors[warm + (total - warm) // 2] == pytest.approx(mid)
    assert all(a >= b - 1e-12 for a, b in zip(factors[warm:], factors[warm + 1 :]))
    assert schedule.warmup_steps(0.1, 200) == 20 and schedule.warmup_steps(30, 200) == 30 and schedule.warmup_steps(0.05, 30) == 1
    ramp = [schedule.lr_factor(s, total_steps=100, warmup=4, decay="none", min_factor=0) for s in range(5)]
    assert ramp == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0, 1.0])  # cosmos-rl's ramp from 0 (tests/test_lr_schedule.py)


def test_step_plan_drops_partial_batches():
    """cosmos-rl's count (skillbank.runs.steps; tests/test_run_arithmetic.py checks it against torch)."""
    plan = StepPlan(records=25, ranks=2, batch_per_rank=3, epochs=2)
    assert (plan.global_batch, plan.steps_per_epoch, plan.total_steps) == (6, 4, 8)
    assert StepPlan(25, 2, 3, 2, max_num_steps=5).total_steps == 5
    assert StepPlan(5, 2, 3, 2).total_steps == 2  # each rank padded to 3 records: one batch per epoch
    assert StepPlan(5, 2, 4, 2).total_steps == 0


def _fake_checkpoint(run: Path, step: int, ranks: int, marked: int, *, config: bool = True) -> Path:
    policy = layout.checkpoint_dir(run, step)
    policy.mkdir(parents=True)
    if config:
        (policy / layout.CONFIG_FILE).write_text(json.dumps({"skillbank_local": {"saving_ranks": ranks}}))
    for r in range(marked):
        (policy / f".rank_{r}_complete").write_text("")
    return policy


def test_layout_never_picks_a_half_written_checkpoint(tmp_path):
    old, new = tmp_path / "20250101000000", tmp_path / "20250102000000"
    _fake_checkpoint(old, 10, 2, 2)
    assert layout.newest_complete_checkpoint(tmp_path) == layout.checkpoint_dir(old, 10)
    _fake_checkpoint(new, 5, 2, 2)
    _fake_checkpoint(new, 8, 2, 1)  # rank 1 never finished
    _fake_checkpoint(new, 9, 2, 2, config=False)  # cosmos_config missing
    assert layout.newest_complete_checkpoint(tmp_path) == layout.checkpoint_dir(new, 5)
    assert layout.newest_complete_checkpoint(new) == layout.checkpoint_dir(new, 5)
    assert layout.list_checkpoint_steps(new) == [5] and layout.list_checkpoint_steps(new, complete_only=False) == [5, 8, 9]
    assert layout.remove_incomplete(new) == [8, 9] and layout.list_checkpoint_steps(new, complete_only=False) == [5]
    assert [p.name for p in layout.run_dirs(tmp_path)] == [old.name, new.name]
    assert layout.newest_complete_checkpoint(tmp_path / "nothing") is None


def test_layout_prunes_to_max_keep(tmp_path):
    run = tmp_path / "20250101000000"
    for step in (2, 4, 6):
        _fake_checkpoint(run, step, 1, 1)
        export = layout.safetensors_dir(run, step)
        export.mkdir(parents=True)
        (export / "config.json").write_text("{}")
        (export / "model.safetensors").write_text("")
    _fake_checkpoint(run, 8, 2, 1)  # someone may still be writing it: left alone
    assert layout.prune(run, 2) == [2]
    assert layout.list_checkpoint_steps(run) == [4, 6] and layout.list_safetensors_steps(run) == [4, 6]
    assert layout.list_checkpoint_steps(run, complete_only=False) == [4, 6, 8]
    assert layout.prune(run, -1) == []


def test_job_record_never_writes_secrets(tmp_path, monkeypatch):
    from skillbank.training.jobrecord import JobRecord

    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "awsSECRET123")
    spec = tmp_path / "spec.yaml"
    spec.write_text("train: {}\n")
    job = JobRecord.start(action="train", backend="local", spec_path=spec, results_dir=tmp_path,
                          argv=["skillbank", "train", "--token", "hf_supersecretvalue", "WANDB_API_KEY=abcdef"])
    job.update(run_dir=tmp_path / "run", status="running")
    job.finish("failed", exit_code=1, error="auth failed for awsSECRET123")
    text = job.path.read_text()
    assert "hf_supersecretvalue" not in text and "awsSECRET123" not in text and "abcdef" not in text
    doc = json.loads(text)
    assert doc["status"] == "failed" and doc["outputs"]["run_dir"] == str(tmp_path / "run")
    assert len(doc["spec"]["sha256"]) == 64 and doc["started"] and doc["ended"] and doc["kind"] == "foreground"


def test_the_foreground_record_is_the_job_records_shape_and_version_1_still_reads(tmp_path, monkeypatch):
    """One shape for a `skillbank train` record and a submitted job's (schema_version 2): it validates against the
    bank's job_record.schema.json, `jobs status ID` finds it, and a version-1 record (job_id, started_at, error,
    outputs.val_loss_last) still reads."""
    import jsonschema

    from skillbank.runs import record as rec
    from skillbank.training.jobrecord import JobRecord

    monkeypatch.setenv("SKILLBANK_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "spec.yaml"
    spec.write_text("train: {}\n")
    job = JobRecord.start(action="train", backend="local", spec_path=spec, results_dir=tmp_path / "results", argv=["skillbank", "train"])
    run = tmp_path / "run"
    run.mkdir()
    (run / layout.METRICS_FILE).write_text(json.dumps({"step": 3, "total_steps": 8, "epoch": 1, "loss": 0.5, "time": 1.0}) + "\n")
    job.update(run_dir=run)  # the progress follows the run as it goes, not only at its end
    doc = json.loads(job.path.read_text())
    schema = json.loads((ROOT / "skills/platform/tao-run-platform/references/job_record.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["schema_version"] == rec.SCHEMA_VERSION == 2 and (doc["progress"]["last_step"], doc["progress"]["total_steps"]) == (3, 8)
    assert rec.find(doc["id"])[0].kind == "foreground"
    old = {"schema_version": 1, "job_id": "train-20250101-000000-abcdef", "skill": "tao-finetune-cosmos-reason", "action": "train", "backend": "local",
           "spec_path": str(spec), "spec_sha256": "0" * 64, "argv": ["skillbank", "train"], "status": "failed", "started_at": "2025-01-01T00:00:00Z",
           "ended_at": "2025-01-01T00:01:00Z", "exit_code": 1, "error": "boom", "host": "h", "pid": 12,
           "outputs": {"run_dir": str(run), "val_loss_last": 0.4, "last_step": 3}}
    path = tmp_path / "results" / "jobs" / "train-20250101-000000-abcdef.json"
    path.write_text(json.dumps(old))
    read = rec.load(path)
    assert (read.kind, read.id, read.status, read.error, read.outputs.run_dir) == ("foreground", old["job_id"], "failed", "boom", str(run))
    jsonschema.validate(read.model_dump(mode="json"), schema)


@pytest.mark.parametrize("raised,status,exit_code", [
    (None, "succeeded", 0),
    (InputError("zero steps"), "failed", 2),
    (RuntimeError("rank 1 died"), "failed", 1),
    (KeyboardInterrupt(), "cancelled", None),
])
def test_tracking_finishes_the_record_however_the_job_ends(tmp_path, raised, status, exit_code):
    """train and demo share this lifecycle: no record stays "running" after the command is gone."""
    from skillbank.training.jobrecord import JobRecord

    spec = tmp_path / "spec.yaml"
    spec.write_text("train: {}\n")
    job = JobRecord.start(action="train", backend="local", spec_path=spec, results_dir=tmp_path, argv=["skillbank", "train"])
    with pytest.raises(type(raised)) if raised else contextlib.nullcontext():
        with job.tracking():
            if raised:
                raise raised
    doc = json.loads(job.path.read_text())
    assert (doc["status"], doc["exit_code"]) == (status, exit_code) and doc["ended"]


def test_loss_falls_on_one_batch(tiny_model_dir, demo_dataset_dir):
    """The model, the data path and the labels fit together: a few dozen steps memorise one batch; the
    trainer's loss (logits at the answer positions only) is the model's own loss from labels."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from skillbank.data.examples import ExampleBuilder, VisionSettings, collate
    from skillbank.data.records import load_records
    from skillbank.training.local.worker import answer_loss

    torch.manual_seed(0)
    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    build = ExampleBuilder(processor, model_path=tiny_model_dir, vision=VisionSettings(fps=2.0), system_prompt="S",
                           media_path=demo_dataset_dir / "train", cache_root=None)
    batch = collate([build(r) for r in load_records(demo_dataset_dir / "train" / "annotations.json")[:4]], processor.tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: one thread is as fast and immune to a busy second core
    losses = []
    try:
        for _ in range(30):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    assert losses[-1] < 0.25 * losses[0], losses
    assert len({int(n) for n in batch["attention_mask"].sum(dim=1)}) > 1  # rows of other lengths: answers at other positions
    with torch.no_grad():
        assert answer_loss(model, batch).item() == pytest.approx(model(**batch).loss.item(), rel=1e-5)


def test_linear_patch_embedding_is_the_convolution():
    """skillbank.compat.patch_embed_linear: both Qwen-VL patch embeddings give the Conv3d's output and
    gradients from the same weights (the local backend installs it)."""
    from types import SimpleNamespace

    import torch
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionPatchEmbed
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionPatchEmbed

    from skillbank.compat import patch_embed_linear

    torch.manual_seed(0)
    modules = [Qwen2_5_VisionPatchEmbed(patch_size=14, temporal_patch_size=2, in_channels=3, embed_dim=32),
               Qwen3VLVisionPatchEmbed(SimpleNamespace(patch_size=16, temporal_patch_size=2, in_channels=3, hidden_size=32))]
    patch_embed_linear.install()
    assert not patch_embed_linear.install() and all(getattr(type(m), patch_embed_linear.MARK) for m in modules)
    for module in modules:
        p, t = module.patch_size, module.temporal_patch_size
        x = torch.randn(10, 3 * t * p * p)
        conv = module.proj(x.view(-1, 3, t, p, p)).view(-1, 32)  # what the original forward computes
        (conv_grad,) = torch.autograd.grad(conv.square().sum(), module.proj.weight)
        linear = module(x)
        (linear_grad,) = torch.autograd.grad(linear.square().sum(), module.proj.weight)
        assert torch.allclose(linear, conv, atol=1e-5) and torch.allclose(linear_grad, conv_grad, atol=1e-4)


# --- the CLI without launching ---------------------------------------------------------------------


def test_dry_run_prints_the_plan_and_launches_nothing(tiny_model_dir, demo_dataset_dir, tmp_path):
    out = tmp_path / "out"
    spec = write_spec(tmp_path / "spec.yaml", local_train_spec(tiny_model_dir, demo_dataset_dir, out, RUN))
    proc = skillbank("train", "--spec", str(spec), "--backend", "local", "--automl-policy", "off", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    result = doc["result"]
    assert doc["ok"] and doc["route"]["route"] == "direct" and result["dry_run"]
    assert result["world_size"] == 2 and result["total_steps"] == STEPS and result["train_records"] == 24
    assert result["argv"][1:5] == ["-m", "skillbank.training.local.torchrun", "--standalone", "--nproc_per_node=2"]
    assert "skillbank.training.local.worker" in result["argv"]
    assert not out.exists() and not (tmp_path / "results").exists()


def test_zero_steps_is_bad_input(tiny_model_dir, demo_dataset_dir, tmp_path):
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import plan_local

    data = local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {"train.train_batch_per_replica": 64})
    with pytest.raises(InputError, match="zero training steps"):
        plan_local(TrainSpec.model_validate(data), dry_run=True)
    proc = skillbank("train", "--spec", str(write_spec(tmp_path / "spec.yaml", data)), "--backend", "local", "--automl-policy", "off", "--json")
    assert proc.returncode == 2  # preflight (or the plan) refuses before anything starts
    assert "zero" in json_out(proc)["error"]["message"]
    assert not (tmp_path / "out").exists()


def test_a_crash_at_model_load_says_no_checkpoint_and_names_only_files_that_exist(tiny_model_dir, demo_dataset_dir, tmp_path):
    """Weights that do not load: the run fails before its first step; no "resume with --resume" (no checkpoint was
    written), and every file the message names exists; result.json says failed."""
    import re
    import shutil

    from skillbank.errors import RunError
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    for weights in model.glob("*.safetensors"):
        weights.write_bytes(b"not a safetensors file")
    spec = TrainSpec.model_validate(local_train_spec(model, demo_dataset_dir, tmp_path / "out", {"train.max_num_steps": 2}, dp_shard_size=1))
    with pytest.raises(RunError) as failed:
        train_local(spec, log=lambda _: None, stdout=subprocess.DEVNULL)
    message = str(failed.value)
    assert "--resume" not in message and "no checkpoint was written" in message, message
    named = re.findall(r"(/[^\s:;()]+\.(?:txt|log))", message)
    assert all(Path(p).is_file() for p in named), (named, message)
    [run] = list((tmp_path / "out").iterdir())
    assert json.loads((run / "result.json").read_text())["status"] == "failed"


# --- real runs: 2 CPU ranks ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_run(tiny_model_dir, demo_dataset_dir, tmp_path_factory):
    """An uninterrupted 2-rank run: 12 steps (2 epochs), checkpoints every 3 steps, validation at 0, 6 and 12."""
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    root = tmp_path_factory.mktemp("reference")
    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, root / "out", RUN))
    lines: list[str] = []
    result = train_local(spec, log=lines.append)
    return {"root": root, "result": result, "run_dir": Path(result["run_dir"]), "lines": lines, "spec": spec}


def test_two_rank_run_trains_checkpoints_and_exports(reference_run):
    run = reference_run["run_dir"]
    rows = layout.read_metrics(run)
    train_rows = [r for r in rows if "loss" in r]
    assert [r["step"] for r in train_rows] == list(range(1, STEPS + 1))
    assert all({"epoch", "lr", "grad_norm", "samples_per_s"} <= set(r) for r in train_rows)
    vals = [r for r in rows if r.get("val_loss") is not None]
    assert [r["step"] for r in vals] == [0, STEPS // 2, STEPS] and vals[2]["val_loss"] < vals[1]["val_loss"] < vals[0]["val_loss"]
    assert [r["epoch"] for r in train_rows] == [1] * 6 + [2] * 6
    assert train_rows[-1]["loss"] < train_rows[0]["loss"]
    assert train_rows[0]["lr"] == pytest.approx(3e-4)  # warm-up of 1 step
    # cosmos-rl's layout: per-rank files, markers, config; exports with the processor
    assert layout.list_checkpoint_steps(run) == [3, 6, 9, STEPS]
    policy = layout.checkpoint_dir(run, STEPS)
    for rank in (0, 1):
        for part in ("model", "optimizer", "scheduler", "extra_info"):
            assert (policy / f"{part}_rank_{rank}.pth").is_file()
        assert (policy / f".rank_{rank}_complete").exists()
    assert json.loads((policy / "cosmos_config").read_text())["skillbank_local"]["saving_ranks"] == 2
    assert layout.list_safetensors_steps(run) == [3, 6, 9, STEPS]
    assert "Step: 12/12, Loss:" in (run / "train.log").read_text()
    assert reference_run["result"]["final_safetensors"] == str(layout.safetensors_dir(run, STEPS))


def test_exported_folder_loads_and_holds_the_trained_weights(reference_run, tiny_model_dir):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    export = layout.safetensors_dir(reference_run["run_dir"], STEPS)
    processor = AutoProcessor.from_pretrained(export)
    model = AutoModelForImageTextToText.from_pretrained(export)
    base = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    assert processor.tokenizer.eos_token == "<|im_end|>"
    trained, initial = model.state_dict(), base.state_dict()
    assert set(trained) == set(initial)
    assert not torch.equal(trained["model.language_model.layers.0.self_attn.q_proj.weight"], initial["model.language_model.layers.0.self_attn.q_proj.weight"])
    assert not torch.equal(trained["model.visual.blocks.0.attn.qkv.weight"], initial["model.visual.blocks.0.attn.qkv.weight"])


def test_sigkill_at_a_random_moment_then_resume_finishes_with_the_same_losses(reference_run, tiny_model_dir, demo_dataset_dir, tmp_path):
    out = tmp_path / "out"
    spec = write_spec(tmp_path / "spec.yaml", local_train_spec(tiny_model_dir, demo_dataset_dir, out, RUN))
    args = ["train", "--spec", str(spec), "--backend", "local", "--automl-policy", "off"]
    with open(tmp_path / "first.log", "wb") as log:
        proc = subprocess.Popen(cli(*args), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while layout.newest_complete_checkpoint(out) is None and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(random.uniform(0.0, 2.0))  # anywhere in steps 4-12: a step, a save, an export, validation
    assert proc.poll() is None, "the run ended before the kill: nothing to resume"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole job: launcher, torchrun and both ranks
    proc.wait()
    killed_run = layout.newest_run_dir(out)
    killed_at = layout.step_of(layout.newest_complete_checkpoint(out))
    assert 3 <= killed_at <= STEPS
    from skillbank.platform.diagnose import diagnose

    seen = diagnose(killed_run, stale_after_s=0)  # what `skillbank jobs diagnose` says of it (logs not moving: not running)
    assert seen.launched_by == "skillbank-local" and seen.last_step is not None
    assert seen.last_complete_checkpoint == str(layout.newest_complete_checkpoint(out).resolve())
    if seen.state == "finished":  # killed after the last step was saved and exported, while the process was ending
        assert killed_at == STEPS and layout.list_safetensors_steps(killed_run)[-1] == STEPS
    else:
        assert seen.state == "failed", seen.to_dict()
        assert f"--resume-from {seen.last_complete_checkpoint}" in seen.resume_command and "spec.json" in seen.resume_command

    resumed = subprocess.run(cli(*args, "--resume", "--json"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    doc = json.loads(resumed.stdout)
    run = Path(doc["result"]["run_dir"])
    assert run == killed_run  # continued in place, not a fresh run
    assert f"Resumed from step {killed_at}/{STEPS}" in (run / "train.log").read_text()
    rows = [r for r in layout.read_metrics(run) if "loss" in r]
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    reference = [r["loss"] for r in layout.read_metrics(reference_run["run_dir"]) if "loss" in r]
    assert [r["loss"] for r in rows] == pytest.approx(reference, rel=1e-4)  # the curve continues where it was
    assert layout.list_checkpoint_steps(run)[-1] == STEPS and layout.list_safetensors_steps(run)[-1] == STEPS
    job = json.loads(Path(doc["job_record"]).read_text())
    assert job["status"] == "succeeded" and job["backend"] == "local" and any(n.startswith("started from checkpoint ") for n in job["notes"])


def test_resume_from_a_chosen_checkpoint_starts_a_new_run_that_continues_its_curve(reference_run, tiny_model_dir, demo_dataset_dir, tmp_path):
    """--resume-from a checkpoint of another run (by its step_N folder): a new run folder under this
    spec's output_dir continues at the next step, with the reference run's losses (same data order)."""
    out = tmp_path / "out"
    spec = write_spec(tmp_path / "spec.yaml", local_train_spec(tiny_model_dir, demo_dataset_dir, out, RUN))
    step6 = layout.checkpoint_dir(reference_run["run_dir"], 6).parent
    done = skillbank("train", "--spec", str(spec), "--backend", "local", "--automl-policy", "off", "--resume-from", str(step6), "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json_out(done)
    run = Path(doc["result"]["run_dir"])
    assert run.parent == out and run != reference_run["run_dir"]
    rows = [r for r in layout.read_metrics(run) if "loss" in r]
    assert [r["step"] for r in rows] == list(range(7, STEPS + 1))
    reference = {r["step"]: r["loss"] for r in layout.read_metrics(reference_run["run_dir"]) if "loss" in r}
    assert [r["loss"] for r in rows] == pytest.approx([reference[s] for s in range(7, STEPS + 1)], rel=1e-4)
    assert f"started from checkpoint {step6 / 'policy'}" in json.loads(Path(doc["job_record"]).read_text())["notes"]  # the record v2 says it in notes
    from skillbank.platform.diagnose import diagnose

    assert diagnose(run).state == "finished"
    # an incomplete checkpoint, or a folder without one, is refused before anything starts (exit 2)
    half = _fake_checkpoint(tmp_path / "other" / "20250101000000", 4, 2, 1)
    for bad, words in ((half, "1 of 2 saving ranks"), (tmp_path / "other", "no complete checkpoint"), (tmp_path / "nowhere", "does not exist")):
        refused = skillbank("train", "--spec", str(spec), "--backend", "local", "--automl-policy", "off", "--resume-from", str(bad))
        assert refused.returncode == 2 and words in refused.stderr and "Traceback" not in refused.stderr, refused.stderr


def test_lora_with_gradient_checkpointing_exports_the_adapter(tiny_model_dir, demo_dataset_dir, tmp_path):
    """A LoRA run exports the adapter, as cosmos-rl does (tests/test_lora_export.py: its config against
    cosmos-rl's, and evaluate on it); the base weights are not in it."""
    import torch
    from safetensors.torch import load_file

    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {
        "train.max_num_steps": 2,
        "train.optm_lr": 1e-2,
        "train.ckpt.save_freq": 100,
        "validation.enable": False,
        "policy.model_gradient_checkpointing": True,
        "policy.lora": {"enable": True, "r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
    }, dp_shard_size=1))
    result = train_local(spec, log=lambda line: None)
    run = Path(result["run_dir"])
    assert layout.list_checkpoint_steps(run) == [2] and result["val_loss_last"] is None
    folder = layout.safetensors_dir(run, 2)
    assert not (folder / "model.safetensors").exists() and (folder / "config.json").is_file()
    adapter = load_file(folder / "adapter_model.safetensors")
    assert adapter and all(k.startswith("base_model.model.") and (k.endswith(".lora_A.weight") or k.endswith(".lora_B.weight")) for k in adapter)
    assert {k.split(".")[-3] for k in adapter} == {"q_proj", "v_proj"}  # the targets only
    assert any(k.endswith("lora_B.weight") and bool(torch.any(v != 0)) for k, v in adapter.items())  # trained (B starts at zero)


def test_resume_with_other_parallelism_is_refused(reference_run, tiny_model_dir, demo_dataset_dir):
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import plan_local

    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, reference_run["root"] / "out", RUN, dp_shard_size=1))
    with pytest.raises(InputError, match="written by 2 rank"):
        plan_local(spec, resume=True, dry_run=True)
    same = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, reference_run["root"] / "out", RUN))
    plan = plan_local(same, resume=True, dry_run=True)
    assert plan.resume_from == layout.checkpoint_dir(reference_run["run_dir"], STEPS)


def test_the_run_keeps_the_pixel_budget_it_trained_with_and_evaluation_reads_it(tmp_path, tiny_model_dir, demo_dataset_dir):
    """spec.json in the run folder has custom.vision.total_pixels resolved for the model (as the
    cosmos-rl TOML has), so `evaluate --run` and AutoML trials evaluate with training's budget."""
    from skillbank.data.video import default_total_pixels
    from skillbank.evaluation.evaluate import spec_from_run
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import _as_run

    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out"))
    assert spec.custom.vision.total_pixels is None
    run_spec = _as_run(spec, str(tiny_model_dir))
    assert run_spec.custom.vision.total_pixels == default_total_pixels(spec.policy.model_max_length, 28 * 28)
    assert spec.custom.vision.total_pixels is None  # the caller's spec is not modified
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / layout.SPEC_FILE).write_text(run_spec.model_dump_json())
    assert spec_from_run(tmp_path / "run").vision.total_pixels == run_spec.custom.vision.total_pixels
