"""The one table of spec key -> cosmos-rl key (skillbank.specification.cosmos_keys): it covers every key
of the train spec, names only keys the installed cosmos-rl's Config has (cosmos-rl ignores an unknown
key silently), and it is what the TOML writer writes and `spec --from` reads back."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from skillbank.specification import cosmos_keys
from skillbank.specification.cosmos_keys import CUSTOM, OTHER, SAME, SKILL, TRAIN_KEYS, WRITTEN
from skillbank.specification.keys import leaf_keys
from skillbank.specification.overrides import get_dotted
from skillbank.specification.train import TrainSpec

_MISSING = object()


def test_every_train_spec_key_has_one_row():
    keys = leaf_keys(TrainSpec)
    assert set(TRAIN_KEYS) == set(keys), (f"add a row to specification/cosmos_keys.py for {sorted(set(keys) - set(TRAIN_KEYS))}; "
                                          f"rows of no spec key: {sorted(set(TRAIN_KEYS) - set(keys))}")
    assert {route.how for route in TRAIN_KEYS.values()} <= {SAME, WRITTEN, OTHER, CUSTOM, SKILL}
    for key, route in TRAIN_KEYS.items():
        assert (route.cosmos is None) == (route.how == SKILL), key
        assert route.how not in (SAME, CUSTOM) or route.cosmos == key, key
        assert route.how in (SAME, CUSTOM) or route.note, f"{key}: say how the writer sets it"
        assert route.how != CUSTOM or key.startswith("custom."), key


def _has_field(model: type[BaseModel], key: str) -> bool:
    """cosmos-rl's Config has this dotted key (every member of a union tried: train_policy is SFT | GRPO)."""
    head, _, rest = key.partition(".")
    if head not in model.model_fields:
        return False
    if not rest:
        return True
    annotation = model.model_fields[head].annotation
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    return any(isinstance(m, type) and issubclass(m, BaseModel) and _has_field(m, rest) for m in members)


def test_every_cosmos_key_named_is_a_field_of_cosmos_rl_config():
    from cosmos_rl.policy.config import Config

    named = {key: route.cosmos for key, route in TRAIN_KEYS.items() if route.how in (SAME, WRITTEN, OTHER)}
    missing = {key: cosmos for key, cosmos in named.items() if not _has_field(Config, cosmos)}
    assert not missing, f"cosmos-rl would ignore these silently: {missing}"
    assert _has_field(Config, "custom") and not _has_field(Config, "results_dir")


def _spec(tmp_path: Path, **vision) -> TrainSpec:
    ann = tmp_path / "annotations.json"
    ann.write_text(json.dumps([{"id": i, "video": "v.mp4", "video_fps": 8, "conversations": [{"from": "human", "value": "<video>\nq"},
                                                                                          {"from": "gpt", "value": "a"}]} for i in range(64)]))
    return TrainSpec.model_validate({
        "train": {"max_num_steps": 5, "train_policy": {"dataset": {"name": "set", "test_size": 10}}, "ckpt": {"upload_s3": "all", "s3_bucket": "b", "upload_hf": True, "save_freq": 7, "save_freq_in_epoch": 0}},
        "policy": {"lora": {"enable": True, "modules_to_save": ["lm_head"]}},
        "logging": {"experiment_name": "x"},
        "custom": {"train_dataset": {"annotation_path": str(ann)}, "val_dataset": {"annotation_path": str(ann)}, "vision": vision},
    })


def _toml(spec: TrainSpec, tmp_path: Path) -> dict:
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.toml import build_toml

    model = "nvidia/Cosmos-Reason2-2B"
    return build_toml(spec, model=model, family=family_of(model), run_dir=tmp_path / "run", run_id="run", resume=False).data


def test_the_toml_writer_writes_what_the_table_says(tmp_path):
    spec = _spec(tmp_path, fps=None, nframes=8, max_pixels=4096)
    data, dumped = _toml(spec, tmp_path), spec.model_dump(mode="json")
    for key in cosmos_keys.keys_of(SAME):
        assert get_dotted(data, key) == get_dotted(dumped, key) is not None, key
    for key in cosmos_keys.keys_of(WRITTEN):
        assert get_dotted(data, TRAIN_KEYS[key].cosmos, _MISSING) is not _MISSING, key
    written = set(cosmos_keys.keys_of(CUSTOM)) - {"custom.vision.fps"}  # fps or nframes: the other is null and left out
    assert {key for key in written if get_dotted(data, key, _MISSING) is _MISSING} == set()
    assert "results_dir" not in data and "enable" not in data["policy"]["lora"] and "freq_in_epoch" not in data["validation"]
    assert "lora" not in _toml(_spec(tmp_path).model_copy(update={"policy": spec.policy.model_copy(update={"lora": spec.policy.lora.model_copy(update={"enable": False})})}), tmp_path)["policy"]


def test_spec_from_reads_back_every_key_the_writer_copies():
    for key in cosmos_keys.keys_of(SAME, WRITTEN, CUSTOM):
        assert cosmos_keys.spec_key(TRAIN_KEYS[key].cosmos) == key
    assert cosmos_keys.spec_key("custom.dataset.annotation_path") == "custom.train_dataset.annotation_path"
    assert cosmos_keys.spec_key("validation.freq") is None and cosmos_keys.spec_key("train.compile") is None


@pytest.mark.parametrize("section", ["train", "policy", "logging"])
def test_cosmos_tree_leaves_out_keys_a_dump_lacks(section):
    tree = cosmos_keys.cosmos_tree({"train": {"epoch": 2}, "policy": {}, "logging": {"logger": ["console"]}}, section)
    assert tree == {"train": {"epoch": 2}, "policy": {}, "logging": {"logger": ["console"]}}[section]
