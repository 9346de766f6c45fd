"""train.ckpt.save_freq against save_freq_in_epoch: cosmos-rl and the local backend both save by epoch while
save_freq_in_epoch > 0 and ignore save_freq; the template leaves save_freq null, a spec that sets both is warned about
(`skillbank spec`, preflight's spec.checkpoints), and saving by steps needs save_freq."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from helpers import SKILL, skillbank
from skillbank.specification.train import TrainSpec


def test_the_template_saves_by_epoch_and_steps_need_save_freq():
    ckpt = TrainSpec().train.ckpt
    assert ckpt.save_freq is None and ckpt.save_freq_in_epoch == 1 and ckpt.ignored_save_freq() is None
    with pytest.raises(ValidationError, match="save_freq is null"):
        TrainSpec.model_validate({"train": {"ckpt": {"save_freq_in_epoch": 0}}})
    both = TrainSpec.model_validate({"train": {"ckpt": {"save_freq": 50}}}).train.ckpt
    assert "save_freq 50 is ignored" in both.ignored_save_freq()
    assert TrainSpec.model_validate({"train": {"ckpt": {"save_freq": 50, "save_freq_in_epoch": 0}}}).train.ckpt.ignored_save_freq() is None


def test_cosmos_rl_and_the_local_backend_both_ignore_save_freq_while_saving_by_epoch():
    source = Path(importlib.util.find_spec("cosmos_rl").submodule_search_locations[0], "policy", "worker", "sft_worker.py").read_text()
    assert "if self.config.train.ckpt.save_freq_in_epoch > 0:" in source and "`train.ckpt.save_freq` will be ignored" in source
    from skillbank.training.local.worker import Trainer

    spec = TrainSpec.model_validate({"train": {"ckpt": {"save_freq": 2}}, "validation": {"enable": False}})
    fake = SimpleNamespace(plan=SimpleNamespace(steps_per_epoch=5, total_steps=10), spec=spec, data=SimpleNamespace(val=[]))
    assert [step for step in range(1, 11) if Trainer._due(fake, step)[1]] == [5, 10]  # by epoch: step 2, 4, ... not saved
    fake.spec = TrainSpec.model_validate({"train": {"ckpt": {"save_freq": 2, "save_freq_in_epoch": 0}}, "validation": {"enable": False}})
    assert [step for step in range(1, 11) if Trainer._due(fake, step)[1]] == [2, 4, 6, 8, 10]


def test_spec_and_preflight_warn_when_save_freq_is_ignored(tmp_path):
    from skillbank.preflight.run import run_preflight

    proc = skillbank("spec", "--skill", SKILL, "--action", "train", "--set", "train.ckpt.save_freq=50", "--json")
    assert proc.returncode == 0, proc.stderr
    assert any("save_freq 50 is ignored" in n and n.startswith("warning:") for n in json.loads(proc.stdout)["notes"])
    report = run_preflight(skill=SKILL, action="train", spec={"train": {"ckpt": {"save_freq": 50}}}, only=["spec"])
    [found] = [f for f in report.findings if f.check == "spec.checkpoints"]
    assert found.severity == "warning" and found.where == "train.ckpt.save_freq" and "save_freq_in_epoch=0" in found.fix
    clean = run_preflight(skill=SKILL, action="train", spec={}, only=["spec"])
    assert not [f for f in clean.findings if f.check == "spec.checkpoints"]
