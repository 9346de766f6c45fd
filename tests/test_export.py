"""Export: LoRA merge (merged == base + adapter), checkpoint steps -> Hugging Face folders, manifests."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest
import torch

from skillbank import cli
from skillbank.export import output
from skillbank.export.run import MANIFEST

FIXED_IDS = torch.tensor([[5, 17, 42, 99, 3, 250, 7, 64, 128, 11]])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from skillbank.assets.tiny_model import write_tiny_model

    folder = tmp_path_factory.mktemp("tiny") / "base"
    folder.mkdir()
    return write_tiny_model(folder, family="qwen2_5_vl", seed=0)


@pytest.fixture(scope="module")
def adapter(tiny, tmp_path_factory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(1)
    base = AutoModelForImageTextToText.from_pretrained(tiny, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, config)
    b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    assert b and all(p.abs().sum() > 0 for p in b)  # non-zero B: the adapter changes the outputs
    out = tmp_path_factory.mktemp("lora") / "adapter"
    peft_model.save_pretrained(out)
    return out


def run(*argv: str, capsys) -> tuple[int, dict | None, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    try:
        return code, json.loads(captured.out), captured.err
    except ValueError:
        return code, None, captured.err + captured.out


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=FIXED_IDS).logits


def test_lora_merge_equals_base_plus_adapter(tiny, adapter, tmp_path, capsys):
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor

    out = tmp_path / "merged"
    code, doc, err = run("export", "--source", str(adapter), "--base-model", str(tiny), "--out", str(out), "--dtype", "float32", "--json", capsys=capsys)
    assert code == 0, err
    assert doc["manifest"]["source_kind"] == "lora-adapter" and doc["manifest"]["merged_lora"] is True
    merged = AutoModelForImageTextToText.from_pretrained(out, dtype=torch.float32)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    reference = PeftModel.from_pretrained(AutoModelForImageTextToText.from_pretrained(tiny, dtype=torch.float32), adapter)
    base = AutoModelForImageTextToText.from_pretrained(tiny, dtype=torch.float32)
    torch.testing.assert_close(logits(merged), logits(reference), atol=1e-5, rtol=0)
    assert not torch.allclose(logits(merged), logits(base), atol=1e-3)  # the adapter did something
    AutoProcessor.from_pretrained(out)  # the processor travels with the model
    files = doc["manifest"]["files"]
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json"} <= set(files)
    assert output.verify_manifest(out, MANIFEST) == []
    assert files["model.safetensors"]["sha256"] == output.sha256_file(out / "model.safetensors")


def test_export_spec_bf16_and_refuses_to_clobber(tiny, adapter, tmp_path, capsys):
    import yaml
    from transformers import AutoModelForImageTextToText

    spec = tmp_path / "export.yaml"
    spec.write_text(yaml.safe_dump({"source": str(adapter), "base_model_path": str(tiny), "output_dir": str(tmp_path / "out")}))
    code, doc, err = run("export", "--spec", str(spec), "--json", capsys=capsys)
    assert code == 0, err
    assert doc["manifest"]["dtype"] == "bfloat16"
    assert AutoModelForImageTextToText.from_pretrained(tmp_path / "out", dtype="auto").dtype == torch.bfloat16
    code, doc, err = run("export", "--spec", str(spec), "--json", capsys=capsys)
    assert code == 2 and "--overwrite" in doc["error"]["fix"]
    code, doc, err = run("export", "--spec", str(spec), "--overwrite", "--json", capsys=capsys)
    assert code == 0 and not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no temp left behind


def test_checkpoint_step_maps_to_its_safetensors_export(tiny, tmp_path, capsys):
    run_dir = tmp_path / "train" / "20260101000000"
    policy = run_dir / "checkpoints" / "step_3" / "policy"
    policy.mkdir(parents=True)
    shutil.copytree(tiny, run_dir / "safetensors" / "step_3")
    code, doc, err = run("export", "--source", str(policy), "--out", str(tmp_path / "out"), "--dtype", "float32", "--json", capsys=capsys)
    assert code == 0, err
    manifest = doc["manifest"]
    assert manifest["source_kind"] == "hf-folder" and manifest["step"] == 3
    assert manifest["read_from"] == str(run_dir / "safetensors" / "step_3")
    # A run folder picks its newest export.
    shutil.copytree(tiny, run_dir / "safetensors" / "step_6")
    code, doc, _ = run("export", "--source", str(run_dir), "--out", str(tmp_path / "out2"), "--json", capsys=capsys)
    assert code == 0 and doc["manifest"]["step"] == 6


def test_local_checkpoint_shards_convert(tiny, tmp_path, capsys):
    """A complete local-backend step without an export: rank shards -> the HF folder, same weights."""
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny, dtype=torch.float32)
    policy = tmp_path / "run" / "20260101000000" / "checkpoints" / "step_2" / "policy"
    policy.mkdir(parents=True)
    torch.save(model.state_dict(), policy / "model_rank_0.pth")
    (policy / "cosmos_config").write_text(json.dumps({"policy": {"model_name_or_path": str(tiny)}, "skillbank_local": {"saving_ranks": 1}}))
    (policy / ".rank_0_complete").write_text("")
    code, doc, err = run("export", "--source", str(policy), "--out", str(tmp_path / "out"), "--dtype", "float32", "--json", capsys=capsys)
    assert code == 0, err
    assert doc["manifest"]["converted_from_shards"] is True
    exported = AutoModelForImageTextToText.from_pretrained(tmp_path / "out", dtype=torch.float32)
    torch.testing.assert_close(logits(exported), logits(model), atol=1e-6, rtol=0)
    assert load_file(tmp_path / "out" / "model.safetensors")  # a real safetensors file


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _save_shards(rank: int, world: int, port: int, folder: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3))
    if rank == 0:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, f"{folder}/full.pth")
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    torch.save(model.state_dict(), f"{folder}/model_rank_{rank}.pth")
    dist.destroy_process_group()


def test_gather_reassembles_fsdp2_shards(tmp_path):
    import torch.multiprocessing as mp

    from skillbank.export.shards import gather

    # fork: the children reuse this process's imported torch (spawn would re-import it twice, ~20 s)
    mp.start_processes(_save_shards, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True, start_method="fork")
    full = torch.load(tmp_path / "full.pth")
    gathered = gather(tmp_path, 2)
    assert set(gathered) == set(full)
    for key, value in full.items():  # odd sizes (5 rows over 2 ranks) included
        torch.testing.assert_close(gathered[key], value, atol=0, rtol=0)


def test_export_input_errors(tmp_path, capsys):
    code, doc, _ = run("export", "--source", str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--json", capsys=capsys)
    assert code == 2 and doc["error"]["where"] == "source"
    code, _, err = run("export", capsys=capsys)
    assert code == 2 and "--spec" in err
    incomplete = tmp_path / "r" / "checkpoints" / "step_1" / "policy"
    incomplete.mkdir(parents=True)
    code, doc, _ = run("export", "--source", str(incomplete), "--out", str(tmp_path / "o"), "--json", capsys=capsys)
    assert code == 2 and "incomplete" in doc["error"]["message"]
