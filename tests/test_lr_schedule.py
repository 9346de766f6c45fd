"""The local backend's learning rate equals cosmos-rl's at every optimizer step, for every decay type
the spec offers: the same spec goes through our TOML writer into cosmos-rl's own Config and its own
`build_lr_schedulers`, and through the local trainers' LambdaLR (training/local/schedule.py)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

from skillbank.specification.io import drop_none
from skillbank.specification.train import TrainSpec
from skillbank.training.cosmos_rl.toml import _train
from skillbank.training.local import schedule

DECAYS = ("linear", "sqrt", "cosine", "none")
WARMUPS = (0, 1, 3, 0.1, 0.5, 0.99, 50)  # steps, fractions (rounded down), more than the run has
TOTALS = (1, 2, 7, 30)


@pytest.fixture(scope="module")
def cosmos():
    """cosmos-rl's Config and its optm module, loaded from the installed file itself: importing
    `cosmos_rl.policy.trainer.optm` as a package runs cosmos_rl.policy.trainer's __init__, which imports
    every trainer and their GPU-only dependencies (torchao.float8, flash-attn, vllm)."""
    import cosmos_rl
    from cosmos_rl.policy.config import Config

    path = Path(cosmos_rl.__path__[0]) / "policy" / "trainer" / "optm" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_cosmos_rl_optm", path)
    optm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(optm)
    return Config, optm


def _cosmos_lrs(cosmos, spec: TrainSpec, total: int, tmp: Path) -> list[float]:
    import torch

    config_cls, optm = cosmos
    train = drop_none(_train(spec, run_dir=tmp, run_id="run", resume=False))  # the [train] table our TOML writes (nulls left out)
    config = config_cls.from_dict(copy.deepcopy({"train": train, "policy": {"model_name_or_path": "unused"}}))
    model = torch.nn.Linear(2, 2)
    optimizers = optm.OptimizersContainer(torch.optim.AdamW, [model], [{"lr": spec.train.optm_lr}])
    schedulers = optm.build_lr_schedulers(optimizers, config, total)
    return _walk(optimizers.optimizers[0][0], schedulers, total)


def _local_lrs(spec: TrainSpec, total: int) -> list[float]:
    import torch

    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=spec.train.optm_lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule.lr_lambda(spec.train, total))
    return _walk(optimizer, scheduler, total)


def _walk(optimizer, scheduler, total: int) -> list[float]:
    """The rate each optimizer step 0..total-1 runs at (as the trainers step: optimizer, then scheduler)."""
    seen = []
    for _ in range(total):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return seen


@pytest.mark.parametrize("decay", DECAYS)
def test_local_schedule_is_cosmos_rl_step_for_step(cosmos, decay, tmp_path):
    for warmup in WARMUPS:
        for min_factor in (0.0, 0.1):
            spec = TrainSpec.model_validate({"train": {"optm_lr": 1e-3, "optm_warmup_steps": warmup, "optm_decay_type": decay,
                                                        "optm_min_lr_factor": min_factor}})
            for total in TOTALS:
                ours, theirs = _local_lrs(spec, total), _cosmos_lrs(cosmos, spec, total, tmp_path)
                assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-15), (warmup, min_factor, total)


def test_the_first_warm_up_step_runs_at_zero_as_cosmos_rl_does():
    factors = [schedule.lr_factor(s, total_steps=10, warmup=3, decay="linear", min_factor=0.0) for s in range(10)]
    assert factors[:4] == [0.0, 0.5, 1.0, 1.0] and factors[-1] == pytest.approx(1 / 7)
