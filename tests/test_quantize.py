"""Quantize on the tiny model (CPU): each scheme writes compressed-tensors that transformers loads and
generates with. vLLM loading and GPU kernels are not exercised here (no GPU): see the model skill's docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from skillbank import cli
from skillbank.export import output
from skillbank.quantize.compress import MANIFEST

IDS = torch.tensor([[5, 17, 42, 99, 3, 250, 7, 64, 128, 11]])
FORMATS = {"FP8_DYNAMIC": "float-quantized", "W8A16": "pack-quantized", "W4A16": "pack-quantized"}
# Loose bounds on max |logit difference| vs the unquantized tiny model (its logits are ~1 in size).
TOLERANCE = {"FP8_DYNAMIC": 0.2, "W8A16": 0.05, "W4A16": 0.5}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from skillbank.assets.tiny_model import write_tiny_model

    folder = tmp_path_factory.mktemp("tiny") / "base"
    folder.mkdir()
    return write_tiny_model(folder, family="qwen2_5_vl", seed=0)


def run(*argv: str, capsys) -> tuple[int, dict]:
    code = cli.main(list(argv))
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("scheme", ["FP8_DYNAMIC", "W8A16", "W4A16"])
def test_scheme_loads_and_generates(tiny, tmp_path, capsys, scheme):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    out = tmp_path / scheme
    code, doc = run("quantize", "--model", str(tiny), "--scheme", scheme, "--out", str(out), "--json", capsys=capsys)
    assert code == 0, doc
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    assert config["quant_method"] == "compressed-tensors" and config["format"] == FORMATS[scheme]
    assert "lm_head" in config["ignore"] and any("visual" in name for name in config["ignore"])  # vision tower untouched
    assert doc["manifest"]["quantized_modules"] == 14  # 2 text layers x 7 projections
    assert output.verify_manifest(out, MANIFEST) == []
    quantized = AutoModelForImageTextToText.from_pretrained(out)
    base = AutoModelForImageTextToText.from_pretrained(tiny, dtype=torch.float32)
    with torch.no_grad():
        diff = (quantized(input_ids=IDS).logits.float() - base(input_ids=IDS).logits).abs().max().item()
    assert 0 < diff < TOLERANCE[scheme]
    generated = quantized.generate(input_ids=IDS, max_new_tokens=4, do_sample=False)
    assert generated.shape == (1, IDS.shape[1] + 4)
    AutoProcessor.from_pretrained(out)


def test_quantize_spec_calibration_note_and_errors(tiny, tmp_path, capsys):
    import yaml

    spec = tmp_path / "quantize.yaml"
    spec.write_text(yaml.safe_dump({"model_path": str(tiny), "scheme": "W8A16", "calibration_annotation_path": "cal.json", "output_dir": str(tmp_path / "q")}))
    code, doc = run("quantize", "--spec", str(spec), "--json", capsys=capsys)
    assert code == 0 and "calibration set not used" in doc["manifest"]["notes"][0]
    code, doc = run("quantize", "--model", str(tmp_path / "q"), "--out", str(tmp_path / "q2"), "--json", capsys=capsys)
    assert code == 2 and "already quantized" in doc["error"]["message"]
    code, doc = run("quantize", "--model", str(tmp_path), "--out", str(tmp_path / "q3"), "--json", capsys=capsys)
    assert code == 2 and doc["error"]["where"] == "model_path"
