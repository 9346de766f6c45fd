"""`skillbank preflight` and scripts/check_tao_launch_preflight.py: exit codes, output, imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillbank.cli import main

ROOT = Path(__file__).resolve().parents[1]
SKILL = "tao-finetune-cosmos-reason"
FINDING_KEYS = {"check", "severity", "message", "fix", "where", "group"}


def make_spec(tmp: Path, *, bad_record: bool = False) -> Path:
    (tmp / "media").mkdir()
    (tmp / "media" / "a.mp4").write_bytes(b"\0")
    (tmp / "model").mkdir()
    (tmp / "model" / "config.json").write_text(json.dumps({"model_type": "qwen3_vl"}))
    (tmp / "model" / "model.safetensors").write_bytes(b"\0" * 64)
    records = [
        {
            "id": str(i),
            "video": "a.mp4",
            "video_fps": 10.0,
            "duration": 3.0,
            "conversations": [{"from": "human", "value": "<video>\nq?"}, {"from": "gpt", "value": "yes"}],
        }
        for i in range(8)
    ]
    if bad_record:
        del records[5]["video_fps"]
    (tmp / "train.json").write_text(json.dumps(records))
    spec = {
        "train": {"train_batch_per_replica": 1, "output_dir": str(tmp / "out"), "train_policy": {"mini_batch": 1}},  # 4 steps per epoch on 2 ranks
        "validation": {"enable": False},
        "policy": {"model_name_or_path": str(tmp / "model"), "parallelism": {"dp_shard_size": 2}},
        "custom": {"train_dataset": {"annotation_path": str(tmp / "train.json"), "media_path": str(tmp / "media")}},
    }
    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def args(spec: Path, *extra: str) -> list[str]:
    return ["preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--backend", "local", *extra]


def test_exit_0_and_a_table_when_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(make_spec(tmp_path), "--gpus-per-node", "2", "--nodes", "1")) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("preflight: 0 error(s), 0 warning(s)")
    assert "ok to launch" in out


def test_exit_2_and_a_table_naming_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(make_spec(tmp_path, bad_record=True))) == 2
    out = capsys.readouterr().out
    assert "CHECK" in out and "annotations.video_fps" in out and "train.json#5" in out
    assert "NOT ok to launch" in out.strip().splitlines()[-1]


def test_json_is_exactly_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(make_spec(tmp_path, bad_record=True), "--gpus-per-node", "4", "--json")) == 2
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"ok", "findings", "stats"} and doc["ok"] is False
    assert all(set(f) == FINDING_KEYS for f in doc["findings"])
    assert all(f["group"] == {"annotations": "data", "spec": "spec"}[f["check"].split(".")[0]] for f in doc["findings"])
    assert {f["check"] for f in doc["findings"]} == {"annotations.video_fps", "spec.parallelism"}  # and no other
    assert all(f["severity"] in ("error", "warning") for f in doc["findings"])
    stats = doc["stats"]
    assert stats["records"] == {"train": 8} and stats["checked"] == 8 and stats["seconds"] >= 0


def test_json_for_a_missing_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(tmp_path / "nope.yaml", "--json")) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["findings"][0]["check"] == "spec.schema"


def test_script_takes_the_same_flags_and_imports_nothing_heavy(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, bad_record=True)
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['check_tao_launch_preflight.py', *{args(spec, '--json')[1:]!r}]\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / 'scripts' / 'check_tao_launch_preflight.py')!r}, run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    heavy = [m for m in ('torch', 'transformers', 'cosmos_rl', 'optuna', 'av') if m in sys.modules]\n"
        "    print('HEAVY', heavy, 'RC', exc.code, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert "HEAVY [] RC 2" in done.stderr, done.stderr
    assert json.loads(done.stdout)["findings"][0]["check"] == "annotations.video_fps"


def test_missing_required_flag_exits_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["preflight", "--skill", SKILL, "--action", "train"])
    assert caught.value.code == 2


def test_a_cpu_job_is_checked_as_submit_takes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--gpus-per-node 0 is a CPU job for the local backend (as `submit` takes it): accepted; cosmos-rl: refused, the fix named."""
    spec = make_spec(tmp_path)
    assert main(args(spec, "--gpus-per-node", "0", "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and not [f for f in doc["findings"] if f["severity"] == "error"]
    assert main(["preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--backend", "cosmos-rl", "--gpus-per-node", "0", "--json"]) == 2
    errors = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["severity"] == "error"]
    assert any(f["where"] == "--gpus-per-node" and "--backend local" in f["fix"] for f in errors), errors
    assert not any("must be at least 1" in f["message"] for f in errors)


def test_a_truncated_safetensors_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model.safetensors cut short (an interrupted copy): named with its sizes, the parameters counted from its header,
    never "no config.json found here" nor the 8.8B guess and a disk shortage that follows from it."""
    spec = make_spec(tmp_path)
    header = json.dumps({"w": {"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 4_000_000]}}).encode()
    full = len(header).to_bytes(8, "little") + header + b"\0" * 4_000_000
    (tmp_path / "model" / "model.safetensors").write_bytes(full[: len(full) // 2])
    assert main(args(spec, "--gpus-per-node", "2", "--json")) == 2
    doc = json.loads(capsys.readouterr().out)
    [model] = [f for f in doc["findings"] if f["check"] == "env.model"]
    assert model["severity"] == "error" and f"model.safetensors is truncated: {len(full) // 2:,} of {len(full):,} bytes" in model["message"]
    text = json.dumps(doc)
    assert "no config.json found here" not in text and "8.8B" not in text and "conservative" not in text
    assert not [f for f in doc["findings"] if f["check"] == "env.disk" and f["severity"] == "error"]
