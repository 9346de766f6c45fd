"""A LoRA checkpoint of the local backend keeps the trained weights and the optimizer alone (the frozen base comes from
the model folder), resumes to the same curve and weights as an uninterrupted run, and exports from its shards.

cosmos-rl 0.4.7 has no such setting: its SFT trainer saves `self.model`'s whole state dict (the frozen base too) and
resumes from it with strict=True without reading the Hub weights (runs.disk's docstring names the lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import local_train_spec
from skillbank.runs import layout

LORA = {"train.max_num_steps": 4, "train.optm_lr": 1e-2, "train.ckpt.save_freq": 2, "validation.enable": False,
        "policy.lora": {"enable": True, "r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}}


def _losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in layout.read_metrics(run) if "loss" in r}


def test_a_lora_checkpoint_holds_the_adapters_and_resumes_to_the_same_weights(tiny_model_dir, demo_dataset_dir, tmp_path):
    import torch
    from safetensors.torch import load_file

    from skillbank.export.shards import checkpoint_to_hf, gather
    from skillbank.models.params import ParamCount
    from skillbank.runs.disk import checkpoint_size, run_disk
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local

    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", LORA, dp_shard_size=1))
    whole = Path(train_local(spec, log=lambda line: None)["run_dir"])
    assert layout.list_checkpoint_steps(whole) == [2, 4]
    policy = layout.checkpoint_dir(whole, 2)
    saved = torch.load(policy / "model_rank_0.pth", map_location="cpu", weights_only=False)
    assert saved and all(".lora_A." in k or ".lora_B." in k for k in saved), sorted(saved)[:5]  # no frozen base weight
    optimizer = torch.load(policy / "optimizer_rank_0.pth", map_location="cpu", weights_only=False)
    assert len(optimizer["state"]) == len(saved)  # Adam's moments of exactly the trained parameters
    base_bytes = (Path(tiny_model_dir) / "model.safetensors").stat().st_size
    assert (policy / "model_rank_0.pth").stat().st_size < base_bytes / 10

    # --resume-from step 2 into a new run: steps 3-4 with the uninterrupted run's losses and final weights
    out2 = tmp_path / "out2"
    resumed_spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, out2, LORA, dp_shard_size=1))
    resumed = Path(train_local(resumed_spec, resume_from=policy, log=lambda line: None)["run_dir"])
    reference = _losses(whole)
    assert sorted(_losses(resumed)) == [3, 4] and [_losses(resumed)[s] for s in (3, 4)] == pytest.approx([reference[3], reference[4]], rel=1e-5)
    adapter = "adapter_model.safetensors"  # a LoRA run exports the adapter, as cosmos-rl does
    end, again = load_file(layout.safetensors_dir(whole, 4) / adapter), load_file(layout.safetensors_dir(resumed, 4) / adapter)
    assert set(end) == set(again) and all(torch.allclose(end[k], again[k], atol=1e-6) for k in end)

    # the checkpoint exports to a whole merged model (the base read from the model folder)
    folder = checkpoint_to_hf(layout.checkpoint_dir(whole, 4), tmp_path / "export", 4)
    merged = load_file(folder / "model.safetensors")
    assert len(merged) > len(end) and not any("lora_" in k for k in merged)
    assert set(gather(layout.checkpoint_dir(whole, 4), 1)) == set(torch.load(layout.checkpoint_dir(whole, 4) / "model_rank_0.pth", weights_only=False))

    # the disk figure assumes the same: adapters and their moments, no base (cosmos-rl: the base in fp32 too)
    count = ParamCount(10**9, 10**6, 10**6, 0, 0, "x")
    assert checkpoint_size(spec, count, "local").state == 10**6 * (4 + 8)  # fp32 adapters + Adam's two moments
    assert checkpoint_size(spec, count, "cosmos-rl").state == 10**9 * 4 + 10**6 * 8  # the fp32 base too
    assert run_disk(spec, count, backend="local").kept == 2
