"""One load per command: a command reads and parses its spec file once (skillbank.specification.io.LoadedSpec)
and passes the loaded spec down to the path map, the spec model and preflight."""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path

import pytest
import yaml

from skillbank import cli


@pytest.fixture
def count_reads(monkeypatch):
    """count_reads(path) -> a list that gets one entry each time the file at `path` is opened."""

    def install(path: Path) -> list[str]:
        target, opened, real_open = os.path.realpath(path), [], io.open

        def counting_open(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.path.realpath(os.fspath(file)) == target:
                opened.append(str(args[0] if args else kwargs.get("mode", "r")))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(io, "open", counting_open)
        monkeypatch.setattr(builtins, "open", counting_open)
        return opened

    return install


@pytest.fixture
def train_spec(tmp_path, tiny_model_dir, demo_dataset_dir, local_spec) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(local_spec(tiny_model_dir, demo_dataset_dir, tmp_path / "out", {"train.max_num_steps": 2})))
    return path


def test_train_dry_run_reads_its_spec_once(train_spec, count_reads, capsys):
    opened = count_reads(train_spec)
    code = cli.main(["train", "--spec", str(train_spec), "--backend", "local", "--automl-policy", "off", "--dry-run", "--json"])
    assert code == 0, capsys.readouterr().err
    assert len(opened) == 1, f"the spec file was opened {len(opened)} times"


@pytest.mark.parametrize("argv", [
    ["preflight", "--skill", "tao-finetune-cosmos-reason", "--action", "train", "--runs-on", "node", "--json"],
    ["plan", "--json"],
], ids=lambda a: a[0])
def test_preflight_and_plan_read_the_spec_once(train_spec, count_reads, capsys, argv):
    opened = count_reads(train_spec)
    cli.main([*argv, "--spec", str(train_spec)])
    capsys.readouterr()
    assert len(opened) == 1, f"{argv[0]}: the spec file was opened {len(opened)} times"
