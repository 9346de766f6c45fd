"""The run's arithmetic (skillbank.runs.steps): counted once, with cosmos-rl's semantics, and the
same numbers from preflight, `skillbank spec`, the cosmos-rl TOML and the local backend's sampler."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from skillbank.cli import main
from skillbank.errors import InputError
from skillbank.specification.train import TrainSpec
from skillbank.runs import steps
from skillbank.runs.steps import StepPlan

SKILL = "tao-finetune-cosmos-reason"


def write_records(path: Path, n: int) -> Path:
    records = [
        {"id": f"r{i}", "video": "v.mp4", "video_fps": 4.0, "duration": 2.0,
         "conversations": [{"from": "human", "value": "<video>\nRed?"}, {"from": "gpt", "value": "yes"}]}
        for i in range(n)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    return path


def spec_dict(tmp_path: Path, n: int, **dotted) -> dict:
    from skillbank.specification.overrides import set_dotted

    (tmp_path / "media").mkdir(exist_ok=True)
    (tmp_path / "media" / "v.mp4").write_bytes(b"\0")
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (model / "model.safetensors").write_bytes(b"\0" * 2000)  # 1,000 bf16 parameters
    data = {
        "train": {"epoch": 2, "train_batch_per_replica": 2, "train_policy": {"mini_batch": 1}, "output_dir": str(tmp_path / "out")},
        "policy": {"model_name_or_path": str(model), "parallelism": {"dp_shard_size": 2}},
        "validation": {"enable": False},
        "custom": {"train_dataset": {"annotation_path": str(write_records(tmp_path / "train.json", n)), "media_path": str(tmp_path / "media")}},
    }
    for key, value in dotted.items():
        set_dotted(data, key.replace("__", "."), value)
    return data


# ---- cosmos-rl's sampler and data loader ------------------------------------------------------------


def test_cosmos_rl_builds_its_sft_loader_the_way_the_plan_counts() -> None:
    """The plan reproduces cosmos-rl 0.4.7's SFT worker: a DistributedSampler that drops only with
    pipeline parallelism, a DataLoader of train_batch_per_replica with dataloader_drop_last (default
    true), and the same drop_last on the validation loader. Read from the installed source."""
    spec = importlib.util.find_spec("cosmos_rl")
    root = Path(spec.submodule_search_locations[0])
    worker = (root / "policy" / "worker" / "sft_worker.py").read_text(encoding="utf-8")
    config = (root / "policy" / "config" / "__init__.py").read_text(encoding="utf-8")
    assert "drop_last=self.parallel_dims.pp_enabled," in worker  # the train DistributedSampler
    assert "batch_size=self.config.train.train_batch_per_replica," in worker
    assert worker.count("drop_last=self.config.train.train_policy.dataloader_drop_last") == 2  # train and validation loaders
    assert "len(self.train_data_loader) * self.epoch" in worker and "min(steps_by_dataset, self.config.train.max_num_steps)" in worker
    block = config[config.index("dataloader_drop_last: bool = Field("):][:120]
    assert "default=True" in block


@pytest.mark.parametrize(("n", "ranks", "batch", "pad"), [(23, 2, 2, True), (25, 2, 3, True), (5, 2, 3, True), (90, 8, 4, True),
                                                          (7, 1, 8, True), (16, 16, 1, True), (23, 4, 2, False), (3, 4, 1, True)])
def test_step_plan_is_torchs_distributed_sampler_and_data_loader(n: int, ranks: int, batch: int, pad: bool) -> None:
    """Record by record, rank by rank: rank_share + rank_batch give what torch's DistributedSampler
    (drop_last=not pad) and DataLoader(drop_last=True) give cosmos-rl, and steps_per_epoch is len(loader)."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    order = list(torch.randperm(n, generator=torch.Generator().manual_seed(n)).tolist())
    plan = StepPlan(n, ranks, batch, epochs=1, pad=pad)
    for rank in range(ranks):
        sampler = DistributedSampler(order, num_replicas=ranks, rank=rank, shuffle=False, drop_last=not pad)
        loader = DataLoader(order, batch_size=batch, sampler=sampler, drop_last=True)
        expected = [b.tolist() for b in loader]
        assert len(loader) == plan.steps_per_epoch
        share = plan.rank_share(order, rank)
        assert share == [order[i] for i in sampler]
        assert [plan.rank_batch(share, s) for s in range(plan.steps_per_epoch)] == expected


def test_the_counts_differ_from_a_floor_over_the_global_batch() -> None:
    """23 records on 2 ranks in batches of 2: cosmos-rl pads to 12 per rank, 6 steps (a floor over the
    global batch said 5); 5 records in batches of 3: one step, not zero."""
    assert StepPlan(23, 2, 2, epochs=3).steps_per_epoch == 6 and StepPlan(23, 2, 2, epochs=3).total_steps == 18
    plan = StepPlan(23, 2, 2, epochs=1)
    assert (plan.records_per_rank, plan.repeated, plan.unused_per_rank, plan.global_batch) == (12, 1, 0, 4)
    assert StepPlan(5, 2, 3, epochs=2).total_steps == 2
    assert StepPlan(25, 2, 3, epochs=2, max_num_steps=5).total_steps == 5
    assert StepPlan(23, 4, 2, epochs=1, pad=False).records_per_rank == 5  # pipeline parallelism drops instead


def test_the_local_sampler_takes_exactly_the_counted_steps() -> None:
    """The local backend's DataSplits.rank_items is the same sampler over its seeded epoch order: every
    rank gets steps_per_epoch full batches, and the ranks together see every record each epoch."""
    from torch.utils.data import DataLoader, DistributedSampler

    from skillbank.training.local.data import DataSplits, epoch_order

    n, ranks, batch = 23, 2, 2
    splits = DataSplits(train=[({"id": i}, None) for i in range(n)], val=[], pad_token_id=0, seed=7)
    plan = StepPlan(n, ranks, batch, epochs=2)
    for epoch in range(2):
        order = epoch_order(n, 7, epoch)
        seen = set()
        for rank in range(ranks):
            loader = DataLoader(order, batch_size=batch, sampler=DistributedSampler(order, num_replicas=ranks, rank=rank, shuffle=False), drop_last=True)
            got = [[rec["id"] for rec, _ in splits.rank_items(epoch, s, rank=rank, plan=plan)] for s in range(plan.steps_per_epoch)]
            assert got == [b.tolist() for b in loader] and all(len(b) == batch for b in got)
            seen.update(i for b in got for i in b)
        assert seen == set(range(n))


# ---- one count everywhere -----------------------------------------------------------------------------


def test_preflight_the_toml_the_local_plan_and_spec_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from skillbank.preflight.run import run_preflight
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.toml import build_toml
    from skillbank.training.local.launch import plan_local

    data = spec_dict(tmp_path, 23)
    spec = TrainSpec.model_validate(data)
    toml = build_toml(spec, model=data["policy"]["model_name_or_path"], family=family_of(data["policy"]["model_name_or_path"]),
                      run_dir=tmp_path / "run", run_id="r", resume=False)
    assert toml.data["train"]["train_policy"]["dataloader_drop_last"] is True
    local = plan_local(spec, dry_run=True)
    plan = run_preflight(skill=SKILL, action="train", spec=data, backend="local").stats["plan"]
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["spec", "--from", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["plan"]
    assert toml.steps_per_epoch == local.steps_per_epoch == plan["steps_per_epoch"] == shown["steps_per_epoch"] == 6
    assert local.total_steps == plan["total_steps"] == shown["total_steps"] == 12
    assert plan["records_per_rank"] == 12 and plan["global_batch"] == 4 and plan["repeated_records"] == 1
    assert plan["checkpoints"] == shown["checkpoints"] == {"every": 6, "saved": 2, "kept": 2, "rule": plan["checkpoints"]["rule"], "exact": True}
    assert plan["disk"]["params"] == 1000 and plan["disk"]["kept"] == 2


def test_preflight_text_and_json_state_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spec_dict(tmp_path, 23)))
    argv = ["preflight", "--skill", SKILL, "--action", "train", "--spec", str(path), "--backend", "local"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan: 23 train records = 23 over 2 data-parallel rank(s) -> 12 per rank, 1 repeated")
    assert "global batch 4 = train_batch_per_replica 2 per rank x 2 rank(s)" in out
    assert "6 optimizer steps per epoch; 12 in all over 2 epoch(s)" in out and "checkpoints: 2 saved" in out and "disk: ~" in out
    assert main([*argv, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["plan"]["steps_per_epoch"] == 6 and stats["plan"]["disk"]["total_gb"] >= 0


def test_spec_states_the_plan_on_stderr_and_skips_it_without_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spec_dict(tmp_path, 23)))
    assert main(["spec", "--from", str(path)]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["train"]["epoch"] == 2 and "6 optimizer steps per epoch" in err and "plan:" not in out
    assert main(["spec", "--action", "train", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["plan"] is None and any("plan skipped" in n for n in doc["notes"])


# ---- zero steps and runs that barely train ---------------------------------------------------------


def test_zero_steps_and_few_steps_propose_batches_with_their_steps(tmp_path: Path) -> None:
    from skillbank.preflight.run import run_preflight

    # 240 records on 2 ranks: 120 per rank; batch 64 gives 1 step per epoch, batch 128 none
    few = run_preflight(skill=SKILL, action="train", spec=spec_dict(tmp_path, 240, train__train_batch_per_replica=64), backend="local")
    [warning] = [f for f in few.findings if f.check == "spec.steps_per_rank"]
    assert few.ok and warning.severity == "warning" and "1 optimizer step(s) per epoch, 2 in all" in warning.message
    assert "train.train_batch_per_replica=30 (4 steps per epoch, 8 in all)" in warning.fix
    assert "train.train_batch_per_replica=16 (7 steps per epoch, 14 in all)" in warning.fix
    zero = run_preflight(skill=SKILL, action="train", spec=spec_dict(tmp_path, 240, train__train_batch_per_replica=128), backend="local")
    [error] = [f for f in zero.findings if f.check == "spec.steps_per_rank"]
    assert not zero.ok and error.severity == "error" and "state_dict" in error.message
    assert "train.train_batch_per_replica=30 (4 steps per epoch" in error.fix and "=120" not in error.fix
    ok = run_preflight(skill=SKILL, action="train", spec=spec_dict(tmp_path, 240, train__train_batch_per_replica=30), backend="local")
    assert not [f for f in ok.findings if f.check == "spec.steps_per_rank"]


def test_useful_batches_respect_mini_batch_and_fall_back_to_it() -> None:
    assert steps.useful_batches(StepPlan(113 * 8, 8, 32, 3, mini_batch=2)) == [(28, 2, 4), (16, 2, 7), (8, 2, 14)]
    assert steps.useful_batches(StepPlan(7, 1, 8, 3, mini_batch=2)) == [(2, 2, 3), (1, 1, 7)]
    assert steps.useful_batches(StepPlan(0, 1, 8, 3, mini_batch=2)) == []


def test_local_backend_zero_steps_error_proposes_batches(tmp_path: Path) -> None:
    from skillbank.training.local.launch import plan_local

    spec = TrainSpec.model_validate(spec_dict(tmp_path, 10, train__train_batch_per_replica=8))
    with pytest.raises(InputError, match="zero training steps") as exc:
        plan_local(spec, dry_run=True)
    assert exc.value.where == "train.train_batch_per_replica" and "train.train_batch_per_replica=1 (5 steps per epoch" in exc.value.fix


# ---- checkpoints and disk --------------------------------------------------------------------------


def test_checkpoints_follow_the_steps_and_max_keep(tmp_path: Path) -> None:
    spec = TrainSpec.model_validate(spec_dict(tmp_path, 23, train__ckpt={"save_freq_in_epoch": 0, "save_freq": 4, "max_keep": -1}))
    c = steps.checkpoint_plan(spec, steps.step_plan(spec, 23))
    assert (c.every, c.saved, c.kept, c.exact) == (4, 3, 3, True)  # steps 4, 8 and the last (12)
    spec = TrainSpec.model_validate(spec_dict(tmp_path, 23, train__ckpt={"max_keep": 1}, validation={"enable": True}, train__epoch=5))
    c = steps.checkpoint_plan(spec, steps.step_plan(spec, 21))
    assert (c.saved, c.kept) == (5, 2)  # max_keep 1 + the best-scoring one cosmos-rl spares
    assert steps.checkpoint_plan(TrainSpec.model_validate(spec_dict(tmp_path, 23, train__ckpt={"enable_checkpoint": False}))) is None


def test_one_checkpoint_size_per_backend_and_lora(tmp_path: Path) -> None:
    from skillbank.models.params import ParamCount
    from skillbank.runs import disk

    full = TrainSpec.model_validate(spec_dict(tmp_path, 23))
    lora = TrainSpec.model_validate(spec_dict(tmp_path, 23, policy__lora={"enable": True, "r": 16}))
    params, adapters = 8e9, 4e7
    full_count, lora_count = ParamCount(int(params), int(params), 0, 0, 0, "x"), ParamCount(int(params), int(adapters), int(adapters), 0, 0, "x")
    one_full = disk.run_disk(full, full_count).checkpoint_bytes
    assert one_full == pytest.approx(params * (4 + 8 + 2))  # fp32 weights, Adam moments, bf16 export
    one_lora = disk.run_disk(lora, lora_count, backend="cosmos-rl").checkpoint_bytes
    assert one_lora == pytest.approx(params * 4 + adapters * (8 + 2))  # cosmos-rl: the frozen base in fp32, the adapters' moments, the adapter export
    one_local = disk.run_disk(lora, lora_count, backend="local").checkpoint_bytes
    assert one_local == pytest.approx(adapters * (4 + 8 + 2))  # local: the adapters and their moments alone, the adapter export (as cosmos-rl)


def test_a_study_keeps_a_workers_share_at_the_searchs_largest_checkpoint(tmp_path: Path) -> None:
    """keep best: each worker holds its running trial's every epoch + the best one; keep all: every trial's; at the top of a
    searched LoRA rank (or the full model when the search may turn LoRA off)."""
    from types import SimpleNamespace as P

    from skillbank.runs import disk

    spec = TrainSpec.model_validate(spec_dict(tmp_path, 23, policy__lora={"enable": True, "r": 16}))
    space = [P(key="train.epoch", high=5, choices=()), P(key="policy.lora.r", high=128, choices=())]
    shape = disk.study_shape(12, spec.train.epoch, space, workers=3, per_worker=1)
    assert (shape.epochs, shape.lora_rank, shape.full, shape.keep) == (5, 128, False, "best")
    study = disk.study_disk(spec, shape)
    largest = disk.run_disk(disk.largest_trial(spec, shape)).checkpoint_bytes
    assert disk.largest_trial(spec, shape).policy.lora.r == 128 and largest > disk.run_disk(disk.as_trial(spec, 5)).checkpoint_bytes
    assert study.kept_per_trial == 5 and study.per_worker_bytes == pytest.approx((5 + 1) * largest)
    assert study.at_most_bytes == pytest.approx((3 * 5 + 1) * largest)
    every = disk.study_disk(spec, disk.StudyShape(12, 5, 3, 1, "all", 128))
    assert every.per_worker_bytes == pytest.approx(4 * 5 * largest) and every.at_most_bytes == pytest.approx(12 * 5 * largest)
    full = disk.study_shape(12, 2, [P(key="policy.lora.enable", high=None, choices=(True, False))])
    assert full.full and not disk.largest_trial(spec, full).policy.lora.enable
    assert shape.preflight_flags() == ["--trials", "12", "--trial-workers", "1", "--keep", "best", "--trial-epochs", "5", "--trial-lora-rank", "128"]


def test_preflight_disk_counts_saves_by_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Saving every 2 steps over 12 steps keeps 6 checkpoints (all kept): the old estimate counted epochs (2)."""
    from collections import namedtuple

    from skillbank.preflight import env_checks
    from skillbank.preflight.run import run_preflight
    from skillbank.runs import disk

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(env_checks.shutil, "disk_usage", lambda path: usage(10**6, 0, 10**6))
    data = spec_dict(tmp_path, 23, train__ckpt={"save_freq_in_epoch": 0, "save_freq": 2, "max_keep": -1})
    report = run_preflight(skill=SKILL, action="train", spec=data, backend="local")
    assert report.stats["plan"]["checkpoints"]["saved"] == 6 and report.stats["plan"]["disk"]["kept"] == 6
    one = disk.run_disk(TrainSpec.model_validate(data), backend="local").checkpoint_bytes
    assert report.stats["disk"]["need_gb"] == steps.gib(one * 6) == round(one * 6 / steps.GB, 2)
