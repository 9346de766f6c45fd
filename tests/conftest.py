"""Shared fixtures: the embedded default (tiny offline model, tiny demo dataset) built once per session.

Both are cheap (a few seconds), built once in the session's asset cache (a temporary folder, so tests never
touch ~/.cache) and copied where a test wants them: the agent evals' workspaces copy the same builds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from skillbank.specification.overrides import set_dotted

DEMO_RECORDS = 24  # train records of the shared demo dataset (val gets 9: 3 per family)


@pytest.fixture(scope="session", autouse=True)
def _isolated_skillbank_cache(tmp_path_factory):
    """Assets and processed examples go to a session temp folder unless SKILLBANK_CACHE is set."""
    if os.environ.get("SKILLBANK_CACHE"):
        yield Path(os.environ["SKILLBANK_CACHE"])
        return
    folder = tmp_path_factory.mktemp("skillbank-cache")
    os.environ["SKILLBANK_CACHE"] = str(folder)
    try:
        yield folder
    finally:
        os.environ.pop("SKILLBANK_CACHE", None)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random-init Qwen2.5-VL (Cosmos-Reason1 family) folder, ~1.2M parameters."""
    from skillbank.assets.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-qwen2_5_vl", family="qwen2_5_vl", seed=0, cache=True)


@pytest.fixture(scope="session")
def tiny_qwen3_model_dir(tmp_path_factory) -> Path:
    """A tiny random-init Qwen3-VL (Cosmos-Reason2 family) folder."""
    from skillbank.assets.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-qwen3_vl", family="qwen3_vl", seed=0, cache=True)


@pytest.fixture(scope="session")
def demo_dataset_dir(tmp_path_factory) -> Path:
    """The demo dataset with 24 train / 9 val records: <dir>/{train,val}/annotations.json + videos/."""
    from skillbank.assets.demo_dataset import build_demo_dataset

    return build_demo_dataset(tmp_path_factory.mktemp("data") / "demo", records=DEMO_RECORDS, seed=0, cache=True)


def local_train_spec(
    model_dir: Path, data_dir: Path, output_dir: Path, overrides: dict[str, Any] | None = None, *, dp_shard_size: int = 2
) -> dict[str, Any]:
    """A TrainSpec dict for the local backend on the tiny assets (small, fast, fp32).

    overrides: dotted keys, e.g. {"train.max_num_steps": 4, "policy.lora.enable": True}.
    """
    spec: dict[str, Any] = {
        "train": {
            "epoch": 1,
            "train_batch_per_replica": 2,
            "output_dir": str(output_dir),
            "optm_lr": 3e-4,
            "optm_betas": [0.9, 0.98],
            "optm_warmup_steps": 1,
            "optm_decay_type": "none",
            "param_dtype": "float32",
            "ckpt": {"save_freq_in_epoch": 0, "save_freq": 3, "max_keep": 5, "save_mode": "sync"},
            "train_policy": {"mini_batch": 1, "dataloader_num_workers": 0},
        },
        "validation": {"enable": True, "freq_in_epoch": 1, "batch_size": 4},
        "policy": {
            "model_name_or_path": str(model_dir),
            "model_gradient_checkpointing": False,
            "parallelism": {"dp_shard_size": dp_shard_size, "dp_replicate_size": 1},
        },
        "custom": {
            "train_dataset": {"annotation_path": str(data_dir / "train" / "annotations.json"), "media_path": str(data_dir / "train")},
            "val_dataset": {"annotation_path": str(data_dir / "val" / "annotations.json"), "media_path": str(data_dir / "val")},
            "vision": {"fps": 2.0},  # 4 of 16 frames: second_per_grid_ts 1.0 (see test_data_path)
        },
        "results_dir": str(output_dir.parent / "results"),
    }
    for key, value in (overrides or {}).items():
        set_dotted(spec, key, value)
    return spec


@pytest.fixture
def local_spec():
    """local_spec(model_dir, data_dir, output_dir, {dotted: value}, dp_shard_size=2) -> spec dict."""
    return local_train_spec
