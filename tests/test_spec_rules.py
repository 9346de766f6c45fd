"""Every rule of the spec models, each with a failing example (and the passing default)."""

from __future__ import annotations

import pytest

from skillbank.errors import InputError
from skillbank.specification.actions import ExportSpec, InferenceSpec, QuantizeSpec
from skillbank.specification.evaluate import EvaluateSpec
from skillbank.specification.train import TrainSpec
from skillbank.specification.validation import validate


def fails(model, data, key: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        validate(model, data)
    text = str(info.value)
    assert key in text, text
    assert words in text, text


@pytest.mark.parametrize("model", [TrainSpec, EvaluateSpec, InferenceSpec, QuantizeSpec, ExportSpec])
def test_defaults_pass_every_rule(model):
    validate(model, model().model_dump(mode="json"))


def test_train_defaults_follow_the_critical_overrides():
    spec = TrainSpec()
    assert spec.policy.model_name_or_path == "hf_model://nvidia/Cosmos-Reason2-8B"
    assert spec.policy.model_max_length == 40960
    assert spec.train.train_policy.type == "sft"
    assert spec.train.train_batch_per_replica % spec.train.train_policy.mini_batch == 0
    assert spec.policy.parallelism.tp_size == 1
    assert spec.train.ckpt.enable_checkpoint is True


def test_batch_must_be_divisible_by_mini_batch():
    fails(TrainSpec, {"train": {"train_batch_per_replica": 6, "train_policy": {"mini_batch": 4}}},
          "train.train_batch_per_replica", "multiple of train.train_policy.mini_batch")


def test_model_max_length_floor():
    fails(TrainSpec, {"policy": {"model_max_length": 4096}}, "policy.model_max_length", "40960")


def test_fps_and_nframes_both_set():
    fails(TrainSpec, {"custom": {"vision": {"fps": 2.0, "nframes": 8}}}, "custom.vision.fps", "exactly one")


def test_fps_and_nframes_neither_set():
    fails(TrainSpec, {"custom": {"vision": {"fps": None, "nframes": None}}}, "custom.vision.fps", "neither")


def test_naming_only_nframes_means_not_fps():
    spec = validate(TrainSpec, {"custom": {"vision": {"nframes": 8}}})
    assert spec.custom.vision.fps is None and spec.custom.vision.nframes == 8


def test_train_policy_type_must_be_sft():
    fails(TrainSpec, {"train": {"train_policy": {"type": "grpo"}}}, "train.train_policy.type", "sft")


@pytest.mark.parametrize("size", ["tp_size", "cp_size", "pp_size", "dp_shard_size", "dp_replicate_size"])
def test_parallelism_sizes_at_least_one(size):
    fails(TrainSpec, {"policy": {"parallelism": {size: 0}}}, f"policy.parallelism.{size}", "greater than or equal to 1")


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"train": {"optm_decay_type": "bogus"}}, "train.optm_decay_type"),
        ({"train": {"optm_name": "SGD"}}, "train.optm_name"),
        ({"train": {"param_dtype": "int8"}}, "train.param_dtype"),
        ({"train": {"ckpt": {"save_mode": "later"}}}, "train.ckpt.save_mode"),
        ({"logging": {"logger": ["tensorboard"]}}, "logging.logger.0"),
    ],
)
def test_enums_are_closed(data, key):
    fails(TrainSpec, data, key, "Input should be")


def test_unknown_key_names_the_closest_valid_key():
    fails(TrainSpec, {"train": {"optm_lrr": 1e-4}}, "train.optm_lrr", "did you mean train.optm_lr?")


def test_max_keep_zero_is_rejected():
    fails(TrainSpec, {"train": {"ckpt": {"max_keep": 0}}}, "train.ckpt.max_keep", "-1 to keep all")


def test_lora_rank_bounds():
    fails(TrainSpec, {"policy": {"lora": {"r": 512}}}, "policy.lora.r", "less than or equal to 256")


def test_evaluate_fps_and_num_frames_exclusive():
    fails(EvaluateSpec, {"vision": {"fps": 2.0, "num_frames": 8}}, "vision.fps", "exactly one")


def test_evaluate_task_type_closed():
    fails(EvaluateSpec, {"task": {"type": "collision"}}, "task.type", "its_directionality")


def test_evaluate_lora_takes_its_base_from_the_adapter_when_none_is_given():
    assert EvaluateSpec.model_validate({"model": {"enable_lora": True}}).model.base_model_path == ""  # adapter_config / recipe (evaluation.model.adapter_base)


def test_inference_fps_exclusive():
    fails(InferenceSpec, {"fps": 1.0, "num_frames": 4}, "fps", "exactly one")


def test_quantize_scheme_closed():
    fails(QuantizeSpec, {"scheme": "INT3"}, "scheme", "FP8_DYNAMIC")
