"""The cosmos-rl backend: TOML (checked by cosmos-rl's own Config), dataset script, launch, log watcher.

Only the `cosmos` fixture imports cosmos_rl (6-13 s, once for the module); everything else runs in
milliseconds on files the tests write, with a fake `cosmos-rl` / `redis-server` for the launch.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import time
import types
import typing
from pathlib import Path

import pytest
import toml as toml_pkg  # the reader cosmos-rl itself uses
from pydantic import BaseModel

from skillbank.errors import InputError, RunError
from skillbank.specification.train import TrainSpec
from skillbank.training.cosmos_rl import launch as launch_mod
from skillbank.training.cosmos_rl.family import FAMILIES, family_of
from skillbank.training.cosmos_rl.launch import RunLayout, prepare, train_cosmos_rl
from skillbank.training.cosmos_rl.toml import build_toml, write_toml
from skillbank.runs.steps import StepPlan
from skillbank.training.cosmos_rl.watcher import LogWatcher, watch
from skillbank.redaction import redact

SECRET = "hf_SecretValueThatMustNeverAppear1234"


# --- fixtures and builders ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cosmos():
    """cosmos-rl's config module and packer package, imported once (slow and noisy)."""
    import cosmos_rl.dispatcher.data.packer as packers
    from cosmos_rl.policy import config

    return types.SimpleNamespace(config=config, packers=packers)


def write_annotations(path: Path, n: int, *, video: str | list[str] = "clips/v{i}.mp4") -> Path:
    records = [
        {
            "id": f"r{i}",
            "video": [v.format(i=i) for v in video] if isinstance(video, list) else video.format(i=i),
            "video_fps": 8,
            "conversations": [{"from": "human", "value": "<video>\nIs the ball red?"}, {"from": "gpt", "value": "yes"}],
        }
        for i in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def make_spec(tmp_path: Path, n: int = 100, *, val: int | None = None, **sections) -> TrainSpec:
    train_ann = write_annotations(tmp_path / "data" / "train.json", n)
    data = {
        "train": {"train_batch_per_replica": 4, "train_policy": {"mini_batch": 2}, "output_dir": str(tmp_path / "results")},
        "custom": {"train_dataset": {"annotation_path": str(train_ann), "media_path": str(tmp_path / "data")}},
    }
    if val is not None:
        val_ann = write_annotations(tmp_path / "data" / "val.json", val)
        data["custom"]["val_dataset"] = {"annotation_path": str(val_ann), "media_path": str(tmp_path / "data")}
    for section, values in sections.items():
        data.setdefault(section, {})
        _merge(data[section], values)
    return TrainSpec.model_validate(data)


def _merge(into: dict, values: dict) -> None:
    for k, v in values.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def local_model(tmp_path: Path, model_type: str) -> Path:
    folder = tmp_path / f"model-{model_type}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    return folder


def built(spec: TrainSpec, tmp_path: Path, model: str = "nvidia/Cosmos-Reason2-8B", *, resume: bool | str = False):
    run_dir = tmp_path / "results" / "20250101000000"
    return build_toml(spec, model=model, family=family_of(model), run_dir=run_dir, run_id="20250101000000", resume=resume)


# --- TOML, validated by cosmos-rl's own Config ---------------------------------------------------

SPECS = {
    "default": ({}, None),
    "lora": ({"policy": {"lora": {"enable": True, "r": 32, "lora_alpha": 64.0, "target_modules": ["q_proj", "v_proj"]}}}, None),
    "nframes": ({"custom": {"vision": {"nframes": 16}}}, None),
    "multi_node": ({"policy": {"parallelism": {"dp_shard_size": 8, "dp_replicate_size": 2}}, "validation": {"freq_in_epoch": 2}}, 60),
    "fused_loss": ({"policy": {"enable_liger_fused_cross_entropy": True}}, None),
}


@pytest.mark.parametrize("name", SPECS)
def test_toml_survives_cosmos_config(cosmos, tmp_path, name):
    sections, val = SPECS[name]
    n = 200 if name == "multi_node" else 100
    spec = make_spec(tmp_path, n, val=val, **sections)
    out = built(spec, tmp_path)
    data = copy.deepcopy(out.data)
    cfg = cosmos.config.Config.from_dict(copy.deepcopy(out.data))
    assert out.data == data  # our dict is not touched (from_dict mutates its argument)

    assert cfg.train.train_policy.type == "sft"
    assert cfg.policy.parallelism.tp_size == 1
    assert cfg.train.ckpt.enable_checkpoint is True
    assert cfg.train.ckpt.save_freq_in_epoch == 1
    assert cfg.train.train_policy.mini_batch == 2
    assert cfg.train.train_batch_per_replica == 4
    assert cfg.policy.model_max_length == 40960
    assert "console" in cfg.logging.logger
    assert cfg.train.compile is False
    assert cfg.train.optm_warmup_steps == pytest.approx(0.03)
    # the timestamp is ours, so cosmos-rl does not append another one: the run folder is known
    assert cfg.train.timestamp == "20250101000000"
    # plan's fits_with setting: cosmos-rl takes the fused loss only with liger's kernels on (policy/kernel/loss.py)
    fused = name == "fused_loss"
    assert (cfg.policy.enable_liger_fused_cross_entropy, cfg.policy.enable_liger_kernel) == (fused, fused)
    assert cfg.train.output_dir == str(tmp_path / "results" / "20250101000000")
    assert cfg.custom["model_family"] == "qwen3_vl"
    assert cfg.custom["train_dataset"]["annotation_path"] == str(tmp_path / "data" / "train.json")

    if name == "lora":
        assert cfg.policy.lora is not None
        assert (cfg.policy.lora.r, cfg.policy.lora.lora_alpha) == (32, 64.0)
        assert cfg.policy.lora.target_modules == ["q_proj", "v_proj"]
        assert "enable" not in out.data["policy"]["lora"]
    else:
        assert cfg.policy.lora is None and "lora" not in out.data["policy"]
    if name == "nframes":
        assert cfg.custom["vision"] == {"nframes": 16, "total_pixels": int(40960 * 1024 * 0.9)}
    else:
        assert cfg.custom["vision"]["fps"] == 2.0 and "nframes" not in cfg.custom["vision"]
    if name == "multi_node":
        par = cfg.policy.parallelism
        assert (par.dp_shard_size, par.dp_replicate_size) == (8, 2)
        assert out.gpus_per_replica == 16
        # 200 records (val set given: no split) over 16 ranks -> 13 per rank -> 3 batches of 4; every 2 epochs
        assert cfg.validation.freq == 6
        assert cfg.custom["val_dataset"]["annotation_path"] == str(tmp_path / "data" / "val.json")
    else:
        # 100 records - 10% validation split = 90 over 8 ranks -> 12 per rank -> 3 batches of 4
        assert cfg.validation.freq == 3
    assert_known_to_cosmos(cosmos, out.data)


def assert_known_to_cosmos(cosmos, data: dict) -> None:
    """cosmos-rl silently ignores unknown keys: every key we emit (outside `custom`) must be one of its fields."""
    config = cosmos.config

    def walk(model: type[BaseModel], values: dict, where: str) -> None:
        for key, value in values.items():
            assert key in model.model_fields, f"{where}{key} is not a cosmos-rl config key"
            if key == "train_policy":
                walk(config.SFTDataConfig, value, f"{where}{key}.")
                continue
            sub = _submodel(model.model_fields[key].annotation)
            if isinstance(value, dict) and sub is not None:
                walk(sub, value, f"{where}{key}.")

    walk(config.Config, {k: v for k, v in data.items() if k != "custom"}, "")


def _submodel(annotation) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def test_toml_file_round_trips_through_cosmos_launcher(cosmos, tmp_path):
    """What the workers load: our file -> toml.load -> the launcher's tmp-file dump -> toml.load -> Config."""
    from cosmos_rl.launcher.utility import dump_config_with_literal_patterns_to_tmpfile

    spec = make_spec(tmp_path, custom={"system_prompt": 'Answer "yes" or "no".\nBe short: \\ no tricks.'}, policy={"lora": {"enable": True}})
    out = built(spec, tmp_path)
    path = write_toml(tmp_path / "run.toml", out.data)
    loaded = toml_pkg.load(path)
    assert loaded == json.loads(json.dumps(out.data))
    tmp = dump_config_with_literal_patterns_to_tmpfile(loaded)
    try:
        worker_view = toml_pkg.load(tmp)
    finally:
        os.unlink(tmp)
    cfg = cosmos.config.Config.from_dict(worker_view)
    assert cfg.custom["system_prompt"] == 'Answer "yes" or "no".\nBe short: \\ no tricks.'
    assert cfg.train.train_policy.type == "sft" and cfg.policy.lora.r == 16


def test_packer_classes_exist_in_cosmos(cosmos):
    for fam in FAMILIES.values():
        assert isinstance(getattr(cosmos.packers, fam.packer), type), fam.packer
    # dense qwen3_vl (Reason2) has no registered packer: cosmos-rl would fall back to the generic HF one
    registry = cosmos.packers.BaseDataPacker._MODEL_TO_DEFAULT_DATA_PACKER_REGISTRY
    assert "qwen3_vl" not in registry or registry["qwen3_vl"].__name__ == "HFVLMDataPacker"


def _pyav_reader(ele):
    """qwen_vl_utils' last-resort reader (torchvision.io.read_video) is gone from torchvision 0.28; this CPU
    venv has neither decord nor torchcodec, so the test decodes with PyAV the way that reader would."""
    import av
    import qwen_vl_utils.vision_process as vp
    import torch

    with av.open(ele["video"]) as container:
        stream = container.streams.video[0]
        fps = float(stream.average_rate)
        frames = [torch.from_numpy(f.to_ndarray(format="rgb24")).permute(2, 0, 1) for f in container.decode(stream)]
    total = len(frames)
    n = vp.smart_nframes(ele, total_frames=total, video_fps=fps)
    idx = torch.linspace(0, total - 1, n).round().long()
    return torch.stack(frames)[idx], {"fps": fps, "frames_indices": idx, "total_num_frames": total, "video_backend": "pyav"}, n / total * fps


@pytest.mark.parametrize("model_type, model_fixture", [("qwen2_5_vl", "tiny_model_dir"), ("qwen3_vl", "tiny_qwen3_model_dir")])
def test_chats_go_through_the_cosmos_packer_of_the_family(cosmos, tmp_path, monkeypatch, request, model_type, model_fixture):
    """Our chat, our TOML's custom table, cosmos-rl's packer for the family, a tiny model: labels = the answer."""
    from skillbank.assets import demo_dataset as demo
    import numpy as np
    import qwen_vl_utils.vision_process as vp

    from skillbank.training.cosmos_rl.script import datasets, family, packer_class

    monkeypatch.setitem(vp.VIDEO_READER_BACKENDS, "torchvision", _pyav_reader)
    frames = np.zeros((16, 64, 64, 3), dtype=np.uint8)
    frames[:, 20:40, 20:40, 0] = 255
    (tmp_path / "data" / "clips").mkdir(parents=True)
    demo.write_mp4(tmp_path / "data" / "clips" / "v0.mp4", frames, fps=8)
    model = request.getfixturevalue(model_fixture)  # tests/conftest.py: built once per session
    spec = make_spec(tmp_path, 4, custom={"vision": {"fps": 4.0, "total_pixels": 64 * 64 * 16}})
    cfg = cosmos.config.Config.from_dict(copy.deepcopy(built(spec, tmp_path, model=str(model)).data))
    train, _ = datasets(cfg.custom)
    packer = packer_class(family(cfg.custom))()
    assert type(packer).__name__ == FAMILIES[model_type].packer
    packer.setup(cfg)
    item = packer.sft_process_sample(train[0])
    assert item["pixel_values_videos"] is not None and item["video_grid_thw"] is not None
    answer = [t for t in item["label_ids"] if t != -100]
    assert packer.tokenizer.decode(answer) == "yes<|im_end|>"
    assert len(item["input_ids"]) < cfg.policy.model_max_length


# --- TOML translation details (no cosmos import) ------------------------------------------------


def test_steps_per_epoch_counts_like_cosmos():
    assert StepPlan(90, ranks=8, batch_per_rank=4, epochs=1).steps_per_epoch == 3  # ceil(90/8)=12 per rank
    assert StepPlan(7, ranks=1, batch_per_rank=8, epochs=1).steps_per_epoch == 0  # drop_last: no full batch
    assert StepPlan(16, ranks=16, batch_per_rank=1, epochs=1).steps_per_epoch == 1


def test_translations(tmp_path):
    spec = make_spec(
        tmp_path,
        40,
        train={"optm_warmup_steps": 20, "train_policy": {"dataset": {"test_size": 5}}},
        logging={"logger": ["wandb"]},
        validation={"freq_in_epoch": 3},
    )
    out = built(spec, tmp_path, model=str(local_model(tmp_path, "qwen2_5_vl")))
    train = out.data["train"]
    assert train["optm_warmup_steps"] == 20 and isinstance(train["optm_warmup_steps"], int)
    assert train["train_policy"]["dataset"]["test_size"] == 5 and isinstance(train["train_policy"]["dataset"]["test_size"], int)
    assert out.data["logging"]["logger"] == ["console", "wandb"]
    assert out.train_records == 35 and out.steps_per_epoch == 1  # 40 - 5; ceil(35/8)=5 per rank -> 1 batch of 4
    assert out.data["validation"] == {"enable": True, "freq": 3, "batch_size": 8}
    assert "freq_in_epoch" not in out.data["validation"] and "results_dir" not in out.data
    assert out.data["custom"]["model_family"] == "qwen2_5_vl"
    assert out.data["custom"]["vision"]["total_pixels"] == int(40960 * (14 * 2) ** 2 * 0.9)
    assert out.data["redis"] == "12800"


def test_zero_steps_is_a_note_not_a_silent_freq(tmp_path):
    out = built(make_spec(tmp_path, 10, train={"train_batch_per_replica": 8}), tmp_path)
    assert out.steps_per_epoch == 0 and out.data["validation"]["freq"] == 1
    assert any("zero steps" in n for n in out.notes)


def test_missing_annotations_is_an_input_error(tmp_path):
    spec = make_spec(tmp_path)
    spec.custom.train_dataset.annotation_path = str(tmp_path / "nope.json")
    with pytest.raises(InputError):
        built(spec, tmp_path)
    spec.custom.train_dataset.annotation_path = ""
    with pytest.raises(InputError, match="no training annotations"):
        built(spec, tmp_path)


def test_model_family(tmp_path):
    assert family_of(str(local_model(tmp_path, "qwen3_vl"))).packer == "HFVLMDataPacker"
    assert family_of("hf_model://nvidia/Cosmos-Reason2-8B").pixels_per_token == 1024
    assert family_of("nvidia/Cosmos-Reason1-7B").model_type == "qwen2_5_vl"
    assert family_of("Qwen/Qwen2.5-VL-7B-Instruct").pixels_per_token == 784
    assert family_of("Qwen/Qwen3-VL-30B-A3B-Instruct").packer == "Qwen3_VL_DataPacker"
    with pytest.raises(InputError, match="model family"):
        family_of("meta-llama/Llama-3-8B")
    with pytest.raises(InputError, match="not supported"):
        family_of(str(local_model(tmp_path, "llava")))


# --- dataset script ------------------------------------------------------------------------------


def test_dataset_items_from_the_toml_custom_table(tmp_path):
    from skillbank.training.cosmos_rl.script import datasets

    spec = make_spec(tmp_path, 5, val=2, custom={"vision": {"nframes": 8}})
    custom = built(spec, tmp_path, model=str(local_model(tmp_path, "qwen2_5_vl"))).data["custom"]
    train, val = datasets(custom)
    assert (len(train), len(val)) == (5, 2)
    chat = train[3]
    video, text = chat[1]["content"]
    assert video == {"type": "video", "video": str(tmp_path / "data" / "clips" / "v3.mp4"), "nframes": 8, "total_pixels": int(40960 * 784 * 0.9)}
    assert text == {"type": "text", "text": "Is the ball red?"}
    assert chat[0]["role"] == "system" and chat[2] == {"role": "assistant", "content": "yes"}
    import torch.utils.data

    assert isinstance(train, torch.utils.data.Dataset)  # cosmos-rl splits a validation set off only these


def test_script_runs_by_path_with_its_own_args(tmp_path):
    """Run as cosmos-rl runs it (by path: its folder is sys.path[0], where our toml.py lives)."""
    spec = make_spec(tmp_path, 3)
    path = write_toml(tmp_path / "run.toml", built(spec, tmp_path).data)
    script = Path(launch_mod.SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), "--port", "8000", "--config", str(path), "--skillbank-check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert shown["family"] == "qwen3_vl" and shown["train"] == 3 and shown["val"] is None
    assert shown["first"][1]["content"][0]["video"] == str(tmp_path / "data" / "clips" / "v0.mp4")


# --- watcher -------------------------------------------------------------------------------------


def run_logs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A run folder with cosmos-rl's log layout: logs/logs_<t>/ and the logs_latest link."""
    run_dir = tmp_path / "run"
    stamped = run_dir / "logs" / "logs_20250101-000000"
    stamped.mkdir(parents=True)
    (run_dir / "logs" / "logs_latest").symlink_to(stamped.name)
    return run_dir, stamped, run_dir / "launcher.log"


def export(run_dir: Path, step: int) -> Path:
    """A whole HF export as cosmos-rl leaves it (config + weights)."""
    folder = run_dir / "safetensors" / f"step_{step}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model-00001-of-00001.safetensors").write_bytes(b"")
    return folder


def new_watcher(run_dir: Path, launcher_log: Path, **kw) -> tuple[LogWatcher, list[str]]:
    said: list[str] = []
    watcher = LogWatcher(run_dir / "logs", run_dir, metrics_path=run_dir / "metrics.jsonl", launcher_log=launcher_log, progress=False, log=said.append, **kw)
    return watcher, said


COSMOS = "[cosmos] 2025-01-01 00:00:00,000 - cosmos - INFO - "


def clean_policy_log(total: int = 4) -> str:
    lines = []
    for epoch in (1, 2):
        lines += [f"[rank0]:{COSMOS}Training epoch {epoch}/2", f"[rank1]:{COSMOS}Training epoch {epoch}/2"]
        for step in range((epoch - 1) * 2 + 1, epoch * 2 + 1):
            lines.append(f"[rank0]:{COSMOS}Step: {step}/{total}, Loss: {1.0 / step:.5f}, Grad norm: 1.00000, Iteration time: 0.50s, optimizer/lr_model: 1.00000e-05")
        lines.append(f"[rank0]:\rValidation:  50%|#####     | 1/2\rValidation: 100%|##########| 2/2")
        lines.append(f"[rank0]:{COSMOS}[SFT] Validation loss: 0.25 for train step {epoch * 2}/{total}, epoch {epoch - 1}")
        lines.append(f"[rank1]:{COSMOS}[SFT] Validation loss: 0.25 for train step {epoch * 2}/{total}, epoch {epoch - 1}")
        lines.append(f"[rank0]:{COSMOS}[Policy] Step: {epoch * 2}, checkpoint saved successfully at /r/checkpoints/step_{epoch * 2}/policy.")
        lines.append(f"[rank0]:{COSMOS}")
        lines.append(f"[rank0]:Exported safetensors to /r/safetensors/step_{epoch * 2}")
    return "\n".join(lines) + "\n"


def test_clean_run(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text(clean_policy_log())
    (logs / "controller.log").write_text(f"{COSMOS}Step: 4/4, Loss: 0.25000, Max Loss 0.3, Grad norm: 1.0\n")  # an echo: no row
    launcher.write_text("INFO Process 4242 completed (rc=0)\n")
    for step in (2, 4):
        export(run_dir, step)
    (run_dir / "safetensors" / "step_6").mkdir()  # begun, never whole: not the final export
    watcher, said = new_watcher(run_dir, launcher)
    result = watcher.finish(0)
    assert result.status == "succeeded", result.reason
    assert (result.last_step, result.total_steps, result.epoch, result.total_epochs) == (4, 4, 2, 2)
    assert result.final_safetensors == str(run_dir / "safetensors" / "step_4")
    assert result.checkpoints == ["/r/checkpoints/step_2/policy", "/r/checkpoints/step_4/policy"]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(isinstance(r.pop("time"), float) for r in rows)  # every row, either backend: when it was written
    more = {"total_steps": 4, "grad_norm": 1.0, "iteration_time": 0.5, "lr": 1e-5}  # the local backend's keys (skillbank.training.monitor.SCALARS)
    assert [r for r in rows if "loss" in r] == [
        {"step": 1, "epoch": 1, "loss": 1.0, **more},
        {"step": 2, "epoch": 1, "loss": 0.5, **more},
        {"step": 3, "epoch": 2, "loss": pytest.approx(0.33333), **more},
        {"step": 4, "epoch": 2, "loss": 0.25, **more},
    ]
    assert [r for r in rows if "val_loss" in r] == [{"step": 2, "total_steps": 4, "epoch": 1, "val_loss": 0.25},
                                                    {"step": 4, "total_steps": 4, "epoch": 2, "val_loss": 0.25}]
    assert (result.last_val_step, result.val_at_final_step) == (4, True)
    assert any("safetensors exported" in s for s in said)


def test_crash_with_launcher_exit_zero(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text(
        f"[rank0]:{COSMOS}Training epoch 1/1\n"
        f"[rank0]:{COSMOS}Step: 1/10, Loss: 2.00000, Grad norm: 1.0\n"
        "[rank1]:Traceback (most recent call last):\n"
        '[rank1]:  File "/x/train.py", line 10, in <module>\n'
        "[rank1]:    loss.backward()\n"
        "[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    launcher.write_text("ERROR Process 4243 failed with return code 1\n")
    watcher, _ = new_watcher(run_dir, launcher)
    result = watcher.finish(0)
    assert result.status == "failed"
    assert "torch.OutOfMemoryError: CUDA out of memory" in result.reason and "policy_0.log" in result.reason
    assert result.last_step == 1 and result.final_safetensors is None


@pytest.mark.parametrize(
    "line, words",
    [
        ("[rank0]:AttributeError: 'NoneType' object has no attribute 'state_dict'", "zero training steps"),
        ("[rank0]:AssertionError: vision_embeds.shape[0] must be equal to n_tokens, but got 10 != 12", "model_max_length"),
        ("RuntimeError: No GPUs available. Please check your GPU configuration.", "no GPU"),
        ("[rank1]:[E601 12:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum=2871, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600038 milliseconds before timing out.", "NCCL collective timed out"),
        ("/bin/sh: 1: redis-server: not found", "redis-server is not on PATH"),
        ("[rank0]:Traceback (most recent call last):\n[rank0]:  File \"/x/_http.py\", line 1, in f\n[rank0]:    raise\n"
         "[rank0]:huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: x)", "Hugging Face hub refused the model"),
    ],
)
def test_known_fatal_messages_are_explained(tmp_path, line, words):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text(line + "\n")
    result = new_watcher(run_dir, launcher)[0].finish(0)
    assert result.status == "failed" and words in result.reason


REAL_NO_GPU = """\
[cosmos] 2026-11-21 20:14:15,122 - cosmos - ERROR - Error detecting GPUs: [Errno 2] No such file or directory: 'nvidia-smi'
Traceback (most recent call last):
  File "/work/main/.venv/bin/cosmos-rl", line 6, in <module>
    sys.exit(main())
             ^^^^^^
  File "/work/main/.venv/lib/python3.11/site-packages/cosmos_rl/launcher/launch_all.py", line 712, in main
    raise RuntimeError("No GPUs available. Please check your GPU configuration.")
RuntimeError: No GPUs available. Please check your GPU configuration.
"""


def test_real_launcher_output_gives_one_clear_reason(tmp_path):
    """Captured from cosmos-rl 0.4.7 launched on this CPU machine (no log dir is created before it fails)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "launcher.log").write_text(REAL_NO_GPU)
    watcher, said = new_watcher(run_dir, run_dir / "launcher.log")
    result = watcher.finish(1)
    assert watcher.failures == [result.reason]  # not the quoted source line, not a second "traceback" failure
    assert result.reason.startswith("no GPU visible") and result.reason.endswith("RuntimeError: No GPUs available. Please check your GPU configuration.]")


def test_launcher_process_failure_alone(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text(f"[rank0]:{COSMOS}Step: 1/2, Loss: 1.0\n")
    launcher.write_text("[cosmos] ... - ERROR - Process 777 failed with return code -9\n")
    result = new_watcher(run_dir, launcher)[0].finish(0)
    assert result.status == "failed" and "777" in result.reason and "-9" in result.reason


def test_controller_traceback_is_a_warning_and_stopped_runs_fail(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "controller.log").write_text("Traceback (most recent call last):\n  File \"x\", line 1\nValueError: handled\n")
    (logs / "policy_0.log").write_text(f"[rank0]:{COSMOS}Step: 3/10, Loss: 1.0\n")
    result = new_watcher(run_dir, launcher)[0].finish(0)
    assert result.warnings == ["controller.log: ValueError: handled"]
    assert result.status == "failed" and "stopped at step 3/10" in result.reason


def test_nothing_logged_and_missing_export(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    assert "no training step" in new_watcher(run_dir, launcher)[0].finish(0).reason
    (logs / "policy_0.log").write_text(f"[rank0]:{COSMOS}Step: 2/2, Loss: 1.0\n")
    assert "no safetensors export" in new_watcher(run_dir, launcher)[0].finish(0).reason
    assert new_watcher(run_dir, launcher, expect_export=False)[0].finish(0).status == "succeeded"


def test_lines_split_across_reads(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    log = logs / "policy_0.log"
    watcher, _ = new_watcher(run_dir, launcher)
    with open(log, "w") as f:
        f.write(f"[rank0]:{COSMOS}Step: 1/1")
        f.flush()
        watcher.poll()
        assert watcher.last_step is None  # half a line is held back
        f.write("0, Loss: 0.5")
        f.flush()
        watcher.poll()
        f.write("0000, Grad norm: 1.0\n[rank0]:Traceback (most recent call last):\n[rank0]:RuntimeE")
        f.flush()
        watcher.poll()
        assert (watcher.last_step, watcher.total_steps, watcher.last_loss) == (1, 10, 0.5)
        assert watcher.failures == []
        f.write("rror: boom\n")
    watcher.poll()
    assert watcher.failures == ["policy_0.log: RuntimeError: boom"]
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [{k: v for k, v in json.loads(r).items() if k != "time"} for r in rows] == [{"step": 1, "total_steps": 10, "epoch": None, "loss": 0.5, "grad_norm": 1.0}]


def test_last_line_without_newline_is_read_at_finish(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text(f"[rank0]:{COSMOS}Step: 5/5, Loss: 0.1")
    export(run_dir, 5)
    result = new_watcher(run_dir, launcher)[0].finish(0)
    assert result.status == "succeeded" and result.last_step == 5


def test_watch_stops_a_launcher_that_outlives_its_failure(tmp_path):
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text("[rank0]:RuntimeError: No GPUs available\n")
    watcher, said = new_watcher(run_dir, launcher)
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    started = time.monotonic()
    result = watch(process, watcher, interval=0.02, fail_grace_s=0.1)
    assert time.monotonic() - started < 20
    assert result.status == "failed" and process.returncode is not None
    assert any("stopping cosmos-rl" in s for s in said)


def test_secrets_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    assert redact(f"token={SECRET}") == "token=***"
    run_dir, logs, launcher = run_logs(tmp_path)
    (logs / "policy_0.log").write_text(f"[rank0]:Traceback (most recent call last):\n[rank0]:RuntimeError: 401 for token {SECRET}\n")
    result = new_watcher(run_dir, launcher)[0].finish(0)
    assert SECRET not in json.dumps(result.as_dict()) and "***" in result.reason


# --- launch --------------------------------------------------------------------------------------


class FakeJob:
    def __init__(self):
        self.updates: list[dict] = []

    def update(self, **fields):
        self.updates.append(fields)


def test_dry_run_writes_the_toml_and_prints_the_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("WANDB_API_KEY", SECRET + "w")
    monkeypatch.chdir(tmp_path)  # results_dir ./results
    spec = make_spec(tmp_path)
    said, job = [], FakeJob()
    assert train_cosmos_rl(spec, spec_path=tmp_path / "spec.yaml", resume=False, dry_run=True, job=job, log=said.append) == 0
    text = "\n".join(said)
    # The only thing written: the TOML in the job folder it prints; the run folder is named, not created.
    [toml_path] = [p for p in tmp_path.joinpath("results").rglob("*") if p.is_file()]
    assert toml_path.name == "cosmos_rl.toml" and toml_path.parent.parent == tmp_path / "results" / "jobs"
    assert f"job folder: {toml_path.parent}" in text
    run_dir = Path(toml_pkg.load(toml_path)["train"]["output_dir"])
    assert run_dir.parent == tmp_path / "results" and not run_dir.exists()
    assert f"--config {toml_path}" in text and "cosmos-rl --config" in text and str(run_dir) in text
    assert "HF_TOKEN" in text and "WANDB_API_KEY" in text and "PATH" in text
    assert "downloaded before a real launch" in text
    # the launch command is skillbank train; the raw cosmos-rl line is labelled as what that command runs
    assert f"launch with: skillbank train --spec {tmp_path / 'spec.yaml'} --backend cosmos-rl" in text
    [runs] = [line for line in said if line.strip().startswith("job runs   :")]
    assert "cosmos-rl --config" in runs and "not a launch command alone" in runs
    assert toml_pkg.load(toml_path)["policy"]["model_name_or_path"] == "nvidia/Cosmos-Reason2-8B"
    assert job.updates[-1]["status"] == "dry_run" and job.updates[-1]["toml"] == str(toml_path)
    for blob in (text, toml_path.read_text(), json.dumps(job.updates)):
        assert SECRET not in blob
    assert not (run_dir / "logs").exists()  # nothing launched
    # the first training chat, as the dataset script's --skillbank-check (the trainer's first item) has it
    from skillbank.training.cosmos_rl.chats import check_document, read_config

    [chat_line] = [line for line in said if line.startswith("  first chat : ")]
    assert json.loads(chat_line.split(" : ", 1)[1]) == check_document(read_config(str(toml_path))["custom"])["first"]
    assert f"--config {toml_path} --skillbank-check" in text


def test_resume_from_a_checkpoint_is_a_path_in_the_toml_that_cosmos_accepts(cosmos, tmp_path):
    """--resume-from: train.resume = "<step_N/policy>" (cosmos-rl loads exactly that folder); the
    checkpoint's saving ranks must match the spec's (cosmos-rl reads model_rank_<global rank>.pth)."""
    from skillbank.runs import layout
    from skillbank.training.cosmos_rl.launch import resume_setting

    spec = make_spec(tmp_path, policy={"parallelism": {"dp_shard_size": 4}})
    ckpt = layout.checkpoint_dir(tmp_path / "old" / "20240101000000", 40)
    ckpt.mkdir(parents=True)
    (ckpt / "cosmos_config").write_text(json.dumps({"policy": {"parallelism": {"dp_shard_size": 4, "tp_size": 1, "cp_size": 1, "pp_size": 1, "dp_replicate_size": 2}}}))
    for rank in range(4):
        (ckpt / f".rank_{rank}_complete").write_text("")
    assert layout.resolve_checkpoint(ckpt.parent.parent.parent) == ckpt.resolve()  # a run folder -> its newest complete one
    assert resume_setting(spec, False, ckpt) == str(ckpt)
    assert resume_setting(spec, True, ckpt) == str(ckpt)  # nothing under output_dir yet: start from the chosen one
    data = built(spec, tmp_path, resume=str(ckpt)).data
    assert data["train"]["resume"] == str(ckpt)
    config = cosmos.config.Config.from_dict(copy.deepcopy(data))
    assert config.train.resume == str(ckpt)
    with pytest.raises(InputError, match="written by 4 saving rank"):
        resume_setting(make_spec(tmp_path / "b", policy={"parallelism": {"dp_shard_size": 8}}), False, ckpt)


def test_dry_run_plans_for_an_output_dir_this_machine_cannot_create(tmp_path, monkeypatch):
    """Plan here, run there: train.output_dir may be a cluster path (here: under a regular file, so
    mkdir fails); the dry run names it in the TOML, which goes to the job folder it prints."""
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    spec = make_spec(tmp_path, train={"output_dir": str(blocker / "cluster" / "runs")})
    said = []
    assert train_cosmos_rl(spec, spec_path=tmp_path / "spec.yaml", resume=False, dry_run=True, log=said.append) == 0
    toml_line = next(line for line in said if line.strip().startswith("TOML"))
    toml_path = Path(toml_line.split(":", 1)[1].strip())
    assert toml_path.is_file() and toml_path.parent.parent == tmp_path / "results" / "jobs"
    assert toml_pkg.load(toml_path)["train"]["output_dir"].startswith(str(blocker / "cluster" / "runs") + "/")


def test_hf_model_is_downloaded_before_launch(tmp_path, monkeypatch):
    snapshot = local_model(tmp_path, "qwen3_vl")
    calls = []

    def fake_download(repo_id, *, where):
        calls.append(repo_id)
        return str(snapshot)

    monkeypatch.setattr(launch_mod, "download", fake_download)
    monkeypatch.setattr(launch_mod, "missing_tools", lambda env: [])
    layout = RunLayout.new(tmp_path / "results")
    plan = prepare(make_spec(tmp_path), layout=layout, resume=True, dry_run=False, log=lambda s: None)
    assert calls == ["nvidia/Cosmos-Reason2-8B"]
    data = toml_pkg.load(layout.toml_path)
    assert data["policy"]["model_name_or_path"] == str(snapshot) and data["train"]["resume"] is True
    assert Path(plan.argv[0]).name == "cosmos-rl"  # the launcher first on PATH (a job's environment puts its own first)
    assert plan.argv[1:] == ["--config", str(layout.toml_path), "--log-dir", str(layout.log_dir), str(launch_mod.SCRIPT)]


def test_missing_redis_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(launch_mod, "missing_tools", lambda env: ["redis-server"])
    with pytest.raises(InputError, match="redis-server is not on PATH") as info:
        prepare(make_spec(tmp_path), layout=RunLayout.new(tmp_path / "r"), resume=False, dry_run=False)
    assert "install redis" in info.value.fix


FAKE_COSMOS = textwrap.dedent(
    """\
    #!{python}
    # A stand-in for cosmos-rl: writes its log layout and outputs over time, then exits 0 (always).
    import os, sys, time, tomllib
    from pathlib import Path
    argv = sys.argv[1:]
    config = tomllib.loads(Path(argv[argv.index("--config") + 1]).read_text())
    log_dir = Path(argv[argv.index("--log-dir") + 1])
    assert argv[-1].endswith("script.py") and os.environ["PYTHONUNBUFFERED"] == "1"
    stamped = log_dir / "logs_20250101-000000"
    stamped.mkdir(parents=True)
    os.symlink(stamped.name, log_dir / "logs_latest")
    out = Path(config["train"]["output_dir"])
    crash = os.environ.get("FAKE_CRASH") == "1"
    with open(stamped / "policy_0.log", "w") as log:
        for step in (1, 2):
            log.write(f"[rank0]:Step: {{step}}/2, Loss: {{1.0 / step:.5f}}\\n"); log.flush(); time.sleep(0.05)
            if crash:
                log.write("[rank0]:Traceback (most recent call last):\\n[rank0]:RuntimeError: boom\\n")
                break
        else:
            (out / "safetensors" / "step_2").mkdir(parents=True)
            (out / "safetensors" / "step_2" / "config.json").write_text("{{}}")
            (out / "safetensors" / "step_2" / "model.safetensors").write_bytes(b"")
            log.write(f"[rank0]:Exported safetensors to {{out}}/safetensors/step_2\\n")
    print("launcher done")
    """
)


@pytest.fixture
def fake_cosmos(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cosmos-rl").write_text(FAKE_COSMOS.format(python=sys.executable))
    (bin_dir / "redis-server").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    real_env = launch_mod.launch_env

    def env_with_fakes(base=None):
        env = real_env(base)
        env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
        return env

    monkeypatch.setattr(launch_mod, "launch_env", env_with_fakes)
    monkeypatch.setattr(launch_mod, "POLL_INTERVAL_S", 0.02)
    return bin_dir


def test_launch_and_watch_a_clean_run(tmp_path, fake_cosmos, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    spec = make_spec(tmp_path, policy={"model_name_or_path": str(local_model(tmp_path, "qwen3_vl"))})
    said, job = [], FakeJob()
    assert train_cosmos_rl(spec, spec_path=tmp_path / "s.yaml", resume=False, dry_run=False, job=job, log=said.append) == 0
    run_dir = next((tmp_path / "results").iterdir())
    final = job.updates[-1]
    assert [u["status"] for u in job.updates] == ["running", "succeeded"]
    result = json.loads((run_dir / "result.json").read_text())  # the record reads its progress from the run folder it names
    assert final["run_dir"] == str(run_dir) and result["status"] == "succeeded"
    assert result["final_safetensors"] == str(run_dir / "safetensors" / "step_2") and result["last_step"] == 2
    assert (run_dir / "launcher.log").read_text().strip() == "launcher done"
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2
    assert SECRET not in "\n".join(said) + json.dumps(job.updates)


def test_launch_reports_a_crash_although_cosmos_exits_zero(tmp_path, fake_cosmos, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH", "1")
    spec = make_spec(tmp_path, policy={"model_name_or_path": str(local_model(tmp_path, "qwen2_5_vl"))})
    job = FakeJob()
    with pytest.raises(RunError, match="RuntimeError: boom"):
        train_cosmos_rl(spec, spec_path=tmp_path / "s.yaml", resume=False, dry_run=False, job=job, log=lambda s: None)
    run_dir = Path(job.updates[-1]["run_dir"])
    assert job.updates[-1]["status"] == "failed" and "RuntimeError: boom" in job.updates[-1]["reason"]
    assert json.loads((run_dir / "result.json").read_text())["last_step"] == 1
