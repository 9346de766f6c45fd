"""`skillbank rl`: an rl spec -> preflight -> run folder with the GRPO TOML and the cosmos-rl command
(nothing launched); `skillbank train` refuses a request that asks for RL."""

from __future__ import annotations

import json
from pathlib import Path

import toml
import yaml

from helpers import SKILL, json_out, skillbank


def write_case(tmp_path: Path, model: str | None = None) -> Path:
    media = tmp_path / "media" / "videos"
    media.mkdir(parents=True)
    (media / "c0.mp4").write_bytes(b"\0")
    records = [{"id": f"r{i}", "video": "videos/c0.mp4", "video_fps": 4.0, "duration": 2.0,
                "conversations": [{"from": "human", "value": "<video>\nIs it red?"}, {"from": "gpt", "value": "yes" if i % 2 else "no"}]}
               for i in range(8)]
    ann = tmp_path / "train.json"
    ann.write_text(json.dumps(records))
    if model is None:
        export = tmp_path / "sft" / "20260101" / "safetensors" / "step_10"
        export.mkdir(parents=True)
        (export / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
        (export / "model.safetensors").write_bytes(b"\0" * 1024)
        model = str(export)
    proc = skillbank("spec", "--skill", SKILL, "--action", "rl", "--set", f"start={model}", "--set", f"annotation_path={ann}",
                     "--set", f"media_path={tmp_path / 'media'}", "--set", f"output_dir={tmp_path / 'out'}", "--set", "samples_per_prompt=4",
                     "-o", str(tmp_path / "rl.yaml"))
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "rl.yaml"


def test_rl_writes_the_toml_and_the_command(tmp_path):
    spec = write_case(tmp_path)
    assert yaml.safe_load(spec.read_text())["rollout"]["n_generation"] == 4
    out = json_out(skillbank("rl", "--spec", str(spec), "--gpus-per-node", "8", "--json"))
    assert out["ok"] and out["gpus"] == {"policy": 4, "rollout": 4, "total": 8}
    assert out["command"][:2] == ["cosmos-rl", "--config"] and out["command"][-1].endswith("grpo_script.py")
    assert Path(out["command"][-1]).is_file()
    data = toml.load(out["toml"])
    assert data["train"]["train_policy"]["type"] == "grpo" and data["rollout"]["n_generation"] == 4
    # 8 prompts x 4 samples: the spec fitted the batch to 8 samples, 4 policy steps per epoch (runs.fitting)
    assert out["plan"] == {"prompts": 8, "samples_per_epoch": 32, "steps_per_epoch": 4} and data["train"]["train_batch_per_replica"] == 8
    assert Path(out["run_dir"]).parent == tmp_path / "out"
    assert out["headline"] == "GRPO run prepared (nothing launched)" and out["learning_warnings"] == []  # no start check here: no tokenizer


def test_flat_start_rewards_make_it_prepared_with_a_warning(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    """The tiny model answers every prompt alike, so the start check finds every group flat: GRPO would learn
    nothing. The run is still prepared (exit 0), but its first line says so with the fix, and --json lists it."""
    from skillbank.cli import main
    from test_rl_local import _rl_spec

    spec = str(_rl_spec(tmp_path, tiny_model_dir, demo_dataset_dir))
    assert main(["rl", "--spec", spec, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    [flat] = out["learning_warnings"]
    assert flat["check"] == "spec.start_rewards" and "scored all alike" in flat["message"] and "SFT first" in flat["fix"]
    assert out["headline"].startswith("GRPO run prepared, with a warning (nothing launched): start check: ")
    assert out["headline"].endswith(f"; fix: {flat['fix']}") and out["start_check"]["flat_share"] == 1.0
    assert main(["rl", "--spec", spec]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("GRPO run prepared, with a warning") and "learns nothing" in first and "fix: start from a checkpoint" in first


def test_rl_stops_on_preflight_errors(tmp_path):
    spec = write_case(tmp_path, model="")
    proc = skillbank("rl", "--spec", str(spec), "--json")
    assert proc.returncode == 2 and "policy.model_name_or_path is empty" in json.loads(proc.stdout)["error"]["message"]
    assert not (tmp_path / "out").exists()


def test_train_refuses_a_request_for_rl(tmp_path):
    spec = tmp_path / "train.yaml"
    assert skillbank("spec", "--skill", SKILL, "--action", "train", "-o", str(spec)).returncode == 0
    proc = skillbank("train", "--spec", str(spec), "--request", "run GRPO on my SFT checkpoint", "--dry-run")
    assert proc.returncode == 2 and "routes to the rl action" in proc.stderr and "skillbank rl" in proc.stderr


def test_rl_and_its_routing_import_nothing_heavy(tmp_path):
    """`skillbank rl` and `route --action rl` answer without torch, transformers, cosmos_rl or optuna."""
    import subprocess
    import sys

    from test_agent_commands_fast import HEAVY, PROBE

    spec = write_case(tmp_path)
    for argv in (["rl", "--spec", str(spec), "--json"], ["route", "--skill", SKILL, "--action", "train", "--request", "GRPO please", "--json"]):
        proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1:] in ([], [""]), f"{argv[0]} imported {proc.stdout.strip()}"
