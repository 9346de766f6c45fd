"""When validation takes its records from train, and how many: cosmos-rl's rule, for every backend.

cosmos-rl (`utils.util.split_train_n_val_dataset`) splits train only when the dataset script hands it
no validation set, and ours hands one exactly when custom.val_dataset is set. It moves test_size of
the records (10% when unset; a fraction rounded down, or a record count), at least 1 and at most
n - 1. The local trainer, the cosmos-rl step count and preflight all ask here, so a plan's step count
is what the run does.
"""

from __future__ import annotations

from typing import Any

from skillbank.errors import InputError

DEFAULT_TEST_SIZE = 0.1  # cosmos-rl's default when train.train_policy.dataset.test_size is unset


def uses_train_split(spec: Any) -> bool:
    """Validation on and no custom.val_dataset: validation records come out of train."""
    return bool(spec.validation.enable) and spec.custom.val_dataset is None


def validation_count(n: int, test_size: float | None) -> int:
    """Records split off n train records: int(n * test_size) for a fraction, else test_size itself,
    within [1, n - 1] (one record: cosmos-rl moves it, leaving train empty)."""
    size = DEFAULT_TEST_SIZE if test_size is None else test_size
    wanted = int(n * size) if size < 1 else int(size)
    return min(max(min(wanted, n - 1), 1), n)


def train_split_size(spec: Any, n: int) -> int:
    """Records the spec's validation takes from its n train records (0 when it has its own set)."""
    return validation_count(n, spec.train.train_policy.dataset.test_size) if uses_train_split(spec) else 0


def check_val_dataset(spec: Any) -> None:
    """A custom.val_dataset without annotations does not mean "split train" (cosmos-rl would fail to read it)."""
    val = spec.custom.val_dataset
    if spec.validation.enable and val is not None and not val.annotation_path:
        raise InputError(
            "validation.enable is true and custom.val_dataset is set, but its annotation_path is empty: validation has no data",
            where="custom.val_dataset.annotation_path",
            fix="set custom.val_dataset.annotation_path, or set custom.val_dataset to null to split train by train.train_policy.dataset.test_size",
        )
