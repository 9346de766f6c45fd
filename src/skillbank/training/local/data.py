"""Train / validation records of a spec, and which of them each rank trains on at each step.

The order of an epoch is a pure function of (train_policy.dataloader_seed, epoch): a resumed run
picks up the very batch the interrupted run would have trained on next. Each rank's share and
batches follow cosmos-rl's sampler (skillbank.runs.steps): the order padded by wrapping around
to the same count per rank, every ranks-th record, the last incomplete batch dropped, so every
rank takes the same number of steps (FSDP collectives need that) and the count is the plan's.
Without custom.val_dataset, validation takes records from train: how many and when is
skillbank.data.split (cosmos-rl's rule); which ones is a seeded sample here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from skillbank.data.examples import ExampleBuilder, VisionSettings, collate, default_cache_root
from skillbank.data.media import media_root
from skillbank.data.records import load_records
from skillbank.data.split import check_val_dataset, uses_train_split, validation_count


def split_validation(records: list[dict[str, Any]], test_size: float | None, seed: int) -> tuple[list, list]:
    """(train, val) taken from one record list, deterministically."""
    n = len(records)
    count = validation_count(n, test_size)
    chosen = set(random.Random(f"val-split/{seed}").sample(range(n), count))
    return [r for i, r in enumerate(records) if i not in chosen], [r for i, r in enumerate(records) if i in chosen]


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    order = list(range(n))
    random.Random(f"epoch/{seed}/{epoch}").shuffle(order)
    return order


@dataclass
class DataSplits:
    train: list[tuple[dict[str, Any], ExampleBuilder]]
    val: list[tuple[dict[str, Any], ExampleBuilder]]
    pad_token_id: int
    seed: int = 0
    max_length: int | None = None
    _shares: dict[tuple[int, int], list[int]] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec, *, processor, model_path: str) -> "DataSplits":
        custom = spec.custom
        vp = processor.video_processor
        vision = VisionSettings.from_spec(spec, patch_size=int(vp.patch_size), merge_size=int(vp.merge_size))
        root = default_cache_root()

        def builder(paths) -> ExampleBuilder:
            return ExampleBuilder(
                processor, model_path=model_path, vision=vision, system_prompt=custom.system_prompt,
                media_path=media_root(paths.media_path, paths.annotation_path), cache_root=root,
            )

        train_builder = builder(custom.train_dataset)
        train_records = load_records(custom.train_dataset.annotation_path)
        check_val_dataset(spec)
        val: list = []
        if uses_train_split(spec):
            seed = spec.train.train_policy.dataloader_seed
            train_records, held = split_validation(train_records, spec.train.train_policy.dataset.test_size, seed)
            val = [(r, train_builder) for r in held]
        elif spec.validation.enable:
            val_builder = builder(custom.val_dataset)
            val = [(r, val_builder) for r in load_records(custom.val_dataset.annotation_path)]
        pad = processor.tokenizer.pad_token_id
        return cls(
            train=[(r, train_builder) for r in train_records],
            val=val,
            pad_token_id=pad if pad is not None else 0,
            seed=spec.train.train_policy.dataloader_seed,
            max_length=spec.policy.model_max_length,
        )

    def rank_items(self, epoch: int, step_in_epoch: int, *, rank: int, plan) -> list:
        """This rank's records at one step: cosmos-rl's sampler (skillbank.runs.steps.StepPlan)
        over this epoch's seeded order, so the run takes exactly the steps the plan counts."""
        key = (epoch, rank)
        if key not in self._shares:
            self._shares = {key: plan.rank_share(epoch_order(len(self.train), self.seed, epoch), rank)}
        return [self.train[i] for i in plan.rank_batch(self._shares[key], step_in_epoch)]

    def batch(self, items: list) -> dict[str, Any]:
        examples = []
        for record, builder in items:
            example = builder(record)
            length = int(example["input_ids"].shape[0])
            if self.max_length is not None and length > self.max_length:
                raise ValueError(
                    f"record {record.get('id', '?')} is {length} tokens, over policy.model_max_length {self.max_length}; "
                    "lower custom.vision.total_pixels / fps or raise model_max_length"
                )
            examples.append(example)
        return collate(examples, self.pad_token_id)
