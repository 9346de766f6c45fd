"""`skillbank spec --from` a raw cosmos-rl config: cosmos-rl's own defaults for the keys it leaves out,
the template's differences listed; checked against the installed cosmos-rl's Config."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from skillbank.specification import cosmos_keys
from skillbank.specification.cosmos_config import DEFAULTS_FILE
from skillbank.specification.overrides import get_dotted

from helpers import json_out, skillbank

RAW = """\
redis = "12800"

[custom.dataset]
annotation_path = "data/sft/annotations.json"
media_path = "data/sft/media"
system_prompt = "Answer briefly."

[train]
output_dir = "outputs/sft"
compile = false
train_batch_per_replica = 32

[policy]
model_name_or_path = "nvidia/Cosmos-Reason2-2B"
model_max_length = 40960

[logging]
logger = ['console']

[train.train_policy]
type = "sft"
mini_batch = 4

[policy.parallelism]
dp_shard_size = 4
"""


@pytest.fixture(scope="module")
def cosmos_config():
    from cosmos_rl.policy.config import Config

    return Config


def test_the_defaults_snapshot_is_the_installed_cosmos_rl(cosmos_config):
    """The agent-facing spec command reads cosmos-rl's defaults from a file: it must be cosmos-rl's."""
    from skillbank.training.cosmos_rl.defaults import read_defaults

    assert read_defaults() == json.loads(DEFAULTS_FILE.read_text()), "regenerate: skillbank schemas generate"


def test_the_snapshot_child_reads_the_same_defaults_with_cosmos_rl_config_alone(tmp_path):
    """`schemas generate`'s child imports cosmos-rl's config module without cosmos_rl's package __init__ (torch,
    transformers, every model): the text is the one the whole package gives (the test above), and nothing heavy loads."""
    import subprocess
    import sys

    probe = ("import sys; from skillbank.training.cosmos_rl.defaults import snapshot_text_alone; text = snapshot_text_alone(); "
             "print(' '.join(m for m in ('torch', 'transformers') if m in sys.modules)); print(text, end='')")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    heavy, _, text = proc.stdout.partition("\n")
    assert heavy == "" and text == DEFAULTS_FILE.read_text()


def test_a_raw_toml_keeps_cosmos_defaults_and_lists_where_the_template_differs(tmp_path):
    raw = tmp_path / "sft.toml"
    raw.write_text(RAW)
    out = tmp_path / "train.yaml"
    done = skillbank("spec", "--from", str(raw), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    doc = json_out(done)
    spec = yaml.safe_load(out.read_text())
    assert doc["from_format"] == "cosmos-rl" and doc["action"] == "train"
    assert spec["policy"]["parallelism"]["tp_size"] == 2  # cosmos-rl's default, not the template's 1
    assert spec["train"]["ckpt"]["enable_checkpoint"] is False and spec["validation"]["enable"] is False
    assert spec["train"]["epoch"] == 1 and spec["train"]["optm_lr"] == 1e-6 and spec["train"]["optm_decay_type"] == "none"
    assert spec["train"]["train_batch_per_replica"] == 32 and spec["train"]["train_policy"]["mini_batch"] == 4  # as the file says
    assert spec["custom"]["train_dataset"] == {"annotation_path": "data/sft/annotations.json", "media_path": "data/sft/media"}
    assert spec["custom"]["system_prompt"] == "Answer briefly." and spec["policy"]["lora"]["enable"] is False
    kept = {d["key"]: d for d in doc["cosmos_rl_defaults_kept"]}
    assert kept["policy.parallelism.tp_size"] == {"key": "policy.parallelism.tp_size", "cosmos_rl": 2, "template": 1}
    assert "train.ckpt.enable_checkpoint" in kept and "train.train_batch_per_replica" not in kept
    notes = "\n".join(doc["notes"])
    assert "train.compile" in notes and "train.seed" in notes


def test_a_raw_toml_without_model_max_length_is_refused_with_cosmos_default_named(tmp_path):
    raw = tmp_path / "sft.toml"
    raw.write_text(RAW.replace("model_max_length = 40960\n", ""))
    done = skillbank("spec", "--from", str(raw), "-o", str(tmp_path / "x.yaml"))
    assert done.returncode == 2 and "policy.model_max_length" in done.stderr and "4096" in done.stderr
    assert not (tmp_path / "x.yaml").exists() and "Traceback" not in done.stderr


def test_a_checkpoints_cosmos_config_round_trips_through_the_toml_we_write(cosmos_config, tmp_path):
    """A run's cosmos_config (cosmos-rl's whole config, JSON) -> spec -> our TOML -> cosmos-rl's Config:
    every key the table (specification/cosmos_keys.py) copies comes back as the run had it."""
    import tomllib

    from skillbank.specification.train import TrainSpec
    from skillbank.training.cosmos_rl.family import family_of
    from skillbank.training.cosmos_rl.toml import build_toml

    ann = tmp_path / "data" / "annotations.json"
    ann.parent.mkdir()
    ann.write_text(json.dumps([{"id": i, "video": "v.mp4", "video_fps": 8, "conversations": [{"from": "human", "value": "<video>\nq"}, {"from": "gpt", "value": "a"}]} for i in range(256)]))
    raw = tomllib.loads(RAW)
    raw["custom"]["dataset"]["annotation_path"] = str(ann)
    raw["train"]["output_dir"] = str(tmp_path / "outputs")
    raw["train"]["optm_lr"] = 3e-5
    raw["policy"]["lora"] = {"r": 32, "lora_alpha": 64}
    ran = cosmos_config.from_dict(copy.deepcopy(raw)).model_dump(mode="json")
    step = Path(ran["train"]["output_dir"]) / "checkpoints" / "step_10" / "policy"
    step.mkdir(parents=True)
    (step / "cosmos_config").write_text(json.dumps(ran, indent=4))
    out = tmp_path / "resume.yaml"
    done = skillbank("spec", "--from", str(step / "cosmos_config"), "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    spec = TrainSpec.model_validate(yaml.safe_load(out.read_text()))
    assert spec.train.output_dir == str(tmp_path / "outputs")  # cosmos-rl's timestamp folder taken off
    assert spec.policy.lora.enable and spec.policy.lora.r == 32 and spec.policy.lora.lora_alpha == 64
    run_dir = tmp_path / "outputs" / "20250101000000"
    toml = build_toml(spec, model="nvidia/Cosmos-Reason2-2B", family=family_of("nvidia/Cosmos-Reason2-2B"), run_dir=run_dir, run_id=run_dir.name, resume=False).data
    again = cosmos_config.from_dict(copy.deepcopy(toml)).model_dump(mode="json")
    differ = {key: (get_dotted(ran, key), get_dotted(again, key)) for key in cosmos_keys.keys_of(cosmos_keys.SAME) + ["train.optm_warmup_steps"]
              if get_dotted(ran, key) != get_dotted(again, key)}
    filled = {key for key, (first, _) in differ.items() if first is None}  # cosmos-rl leaves it unset: the notes name the value the spec takes
    assert filled <= {"train.seed", "train.optm_decay_type", "validation.batch_size", "policy.lora.target_modules"}
    assert not {key: pair for key, pair in differ.items() if key not in filled}


def test_skill_specs_stay_skill_specs_and_other_policies_are_refused(tmp_path):
    ours = tmp_path / "train.toml"
    assert skillbank("spec", "--action", "train", "-o", str(ours)).returncode == 0
    done = skillbank("spec", "--from", str(ours), "--json")
    assert done.returncode == 0 and json_out(done)["from_format"] == "skillbank"
    grpo = tmp_path / "grpo.toml"
    grpo.write_text(RAW.replace('type = "sft"', 'type = "grpo"'))
    refused = skillbank("spec", "--from", str(grpo))
    assert refused.returncode == 2 and "'grpo', not SFT" in refused.stderr
    forced = skillbank("spec", "--from", str(tmp_path / "sft.toml" if False else ours), "--from-format", "cosmos-rl", "--json")
    assert forced.returncode == 0 and json_out(forced)["from_format"] == "cosmos-rl"
