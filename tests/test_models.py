"""A model is one entry (issue 38): the model table every reader takes from, `skillbank models list | add`, the
Qwen2.5-VL baselines, one behaviour for an unknown model, tp_size against the heads, the router's model names,
per-model gating, and the smaller fixes (one parameter figure, the recommendation's words, `plan | head`, the
dry run's job folder, `data stats`' patch)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, SKILL, json_out, skillbank
from skillbank import cli
from skillbank.models import params, table
from skillbank.models.params import unknown_model
from skillbank.training.cosmos_rl.family import FAMILIES, parallel_check, tp_sizes

QWEN3B, QWEN7B = "Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct"
UNKNOWN = "Org/Unknown-VL-3B"


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No hub cache, no token, no network: the model table answers."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- the table ----------------------------------------------------------------------------------------


def test_every_entry_is_whole_and_the_baselines_ship():
    entries = {e.id: e for e in table.all_entries()}
    assert {QWEN3B, QWEN7B, "nvidia/Cosmos-Reason2-8B", "nvidia/Cosmos-Reason2-2B", "nvidia/Cosmos-Reason1-7B"} <= set(entries)
    for e in entries.values():
        assert e.family in FAMILIES and e.config.get("model_type") == e.family and e.source["url"].startswith("https://")
        assert e.count is not None and e.count["signature"] == params.signature(e.config), f"{e.id}: run skillbank schemas generate"
        assert e.gated == ("HF_TOKEN" in e.credentials)
    three, seven = entries[QWEN3B], entries[QWEN7B]
    c = three.config
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"],
            c["vocab_size"], c["tie_word_embeddings"]) == (2048, 36, 16, 2, 11008, 151936, True)
    v7 = dict(seven.config["vision_config"])
    assert {**v7, "out_hidden_size": 2048} == c["vision_config"]  # the 7B's vision tower projected to 2048
    reason1 = entries["nvidia/Cosmos-Reason1-7B"].config
    same = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size", "tie_word_embeddings")
    assert all(seven.config[k] == reason1[k] for k in same)
    assert {k: v for k, v in reason1["vision_config"].items() if k != "model_type"} == v7
    assert not three.gated and not seven.gated and three.credentials == seven.credentials == ()
    assert three.count["total"] == 3_754_622_976 and seven.count["total"] == entries["nvidia/Cosmos-Reason1-7B"].count["total"]
    assert three.vision.patch_size == 14 and entries["nvidia/Cosmos-Reason2-8B"].vision.patch_size == 16
    assert tp_sizes(three.heads, FAMILIES["qwen2_5_vl"]) == [1, 2] and tp_sizes(seven.heads, FAMILIES["qwen2_5_vl"]) == [1, 2, 4]


def test_models_list_text_and_json(capsys):
    code, out, _ = run_cli(capsys, "models", "list")
    assert code == 0 and QWEN3B in out and "3.75B" in out and "public" in out and "gated: HF_TOKEN" in out
    code, out, _ = run_cli(capsys, "models", "list", "--json")
    rows = {m["id"]: m for m in json.loads(out)["models"]}
    assert rows[QWEN3B]["params"] == 3_754_622_976 and rows[QWEN3B]["tp_sizes"] == [1, 2] and rows[QWEN3B]["heads"]["kv"] == 2
    assert rows[QWEN3B]["vision"]["patch_size"] == 14 and rows[QWEN3B]["entry"].endswith("entries/Qwen--Qwen2.5-VL-3B-Instruct.yaml")


def test_the_generated_lists_come_from_the_table(capsys):
    skill = (ROOT / "skills" / "models" / SKILL / "SKILL.md").read_text()
    plan_md = (ROOT / "skills" / "models" / SKILL / "references" / "plan.md").read_text()
    for e in table.all_entries():
        assert f"`{e.id}`" in skill and f"`{e.id}`" in plan_md
    assert "| `Qwen/Qwen2.5-VL-3B-Instruct` | 3.75B | 77M | 16 / 2 / 16 | 1, 2 |" in plan_md
    info = yaml.safe_load((ROOT / "skills" / "models" / SKILL / "references" / "skill_info.yaml").read_text())
    assert "gated_models" not in info and info["required_credentials"] == []  # per model now: the table
    with pytest.raises(SystemExit):
        cli.main(["plan", "--help"])
    helped = capsys.readouterr().out
    assert all(e.id in helped for e in table.all_entries()) and "Qwen/Qwen2.5-VL-3B-Instruct     3.75B" in helped


# ---- models add, in a copy of the repository ---------------------------------------------------------------


def tiny_config() -> dict:
    """A Qwen2.5-VL config small enough to build anywhere (the 3B's, shrunk)."""
    config = json.loads((table.CONFIGS / "Qwen--Qwen2.5-VL-3B-Instruct.json").read_text())
    config.update(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    config["vision_config"].update(depth=2, hidden_size=128, intermediate_size=256, num_heads=4, out_hidden_size=256, fullatt_block_indexes=[1])
    return config


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_models_add_in_a_copy_with_one_command(tmp_path):
    """One command adds a model; the generated files, validate and a plan of it follow with no hand edit."""
    copy = tmp_path / "bank"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", ".pytest_cache", "__pycache__", "results"))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config(), indent=2))
    env = {"PYTHONPATH": str(copy / "src"), "SKILLBANK_ROOT": str(copy), "SKILLBANK_CACHE": str(tmp_path / "cache")}
    before = _tree(copy)
    added = skillbank("models", "add", "--config", str(config), "--id", "Test/Tiny-VL-Instruct", "--description", "a tiny test model",
                      "--json", cwd=copy, env=env, timeout=600)
    assert added.returncode == 0, added.stderr + added.stdout
    doc = json_out(added)
    after = _tree(copy)
    touched = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    print("models add touched:", *touched, sep="\n  ")
    assert touched == sorted(["skills/models/tao-finetune-cosmos-reason/SKILL.md", "skills/models/tao-finetune-cosmos-reason/references/plan.md",
                              "src/skillbank/models/configs/Test--Tiny-VL-Instruct.json", "src/skillbank/models/configs/counts.json",
                              "src/skillbank/models/entries/Test--Tiny-VL-Instruct.yaml"])
    assert sorted(doc["written"]) == touched
    entry = yaml.safe_load((copy / "src/skillbank/models/entries/Test--Tiny-VL-Instruct.yaml").read_text())
    assert entry["family"] == "qwen2_5_vl" and entry["gated"] is False and entry["credentials"] == [] and entry["source"]["url"]
    assert json.loads((copy / "src/skillbank/models/configs/Test--Tiny-VL-Instruct.json").read_text()) == tiny_config()
    counted = json.loads((copy / "src/skillbank/models/configs/counts.json").read_text())["Test/Tiny-VL-Instruct"]["total"]
    assert doc["model"]["params"] == counted > 0
    check = skillbank("schemas", "generate", "--check", cwd=copy, env=env, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    valid = skillbank("validate", "--json", cwd=copy, env=env, timeout=600)
    assert valid.returncode == 0, valid.stdout
    plan = skillbank("plan", "--set", "model=Test/Tiny-VL-Instruct", "--records", "100", "--clip-seconds", "4", "--json", cwd=copy, env=env, timeout=600)
    assert plan.returncode == 0, plan.stderr
    assert json_out(plan)["params"] == counted
    again = skillbank("models", "add", "--config", str(config), "--id", "Test/Tiny-VL-Instruct", cwd=copy, env=env)
    assert again.returncode == 2 and "already" in again.stderr


@pytest.mark.parametrize("change, words", [
    ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"),
    ({"hidden_size": 250}, "hidden_size 250 is not a multiple of num_attention_heads 4"),
    ({"model_type": "llava"}, "family 'llava' is not one cosmos-rl"),
    ({"vision_config": None}, "no vision_config.patch_size"),
])
def test_models_add_refuses_a_config_it_cannot_take_and_writes_nothing(tmp_path, capsys, change, words):
    config = {**tiny_config(), **change}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    before = sorted(table.ENTRIES.iterdir())
    code, _, err = run_cli(capsys, "models", "add", "--config", str(path), "--id", "Test/Bad-VL")
    assert code == 2 and words in err, err
    assert sorted(table.ENTRIES.iterdir()) == before and not table.config_file("Test/Bad-VL").exists()


# ---- one behaviour for an unknown model ----------------------------------------------------------------


def test_an_unknown_model_is_refused_alike_by_spec_preflight_plan_and_the_automl_dry_run(tmp_path, demo_dataset_dir, capsys):
    message, fix = unknown_model(UNKNOWN).message, unknown_model(UNKNOWN).fix
    assert "skillbank models add" in fix
    code, out, _ = run_cli(capsys, "spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir),
                           "--set", f"model={UNKNOWN}", "--json")
    assert code == 2 and json.loads(out)["error"]["message"] == message and json.loads(out)["error"]["fix"] == fix
    code, out, _ = run_cli(capsys, "plan", "--set", f"model={UNKNOWN}", "--records", "100", "--clip-seconds", "4", "--json")
    assert code == 2 and json.loads(out)["error"]["message"] == message
    spec = tmp_path / "train.yaml"
    code, _, err = run_cli(capsys, "spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir),
                           "--set", f"output_dir={tmp_path / 'out'}", "--set", f"results_dir={tmp_path / 'res'}", "-o", str(spec))
    assert code == 0, err
    code, out, _ = run_cli(capsys, "preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--set", f"model={UNKNOWN}",
                           "--runs-on", "node", "--json")
    found = [f for f in json.loads(out)["findings"] if f["check"] == "spec.model"]
    assert code == 2 and [(f["message"], f["fix"]) for f in found] == [(message, fix)]  # once, not also as "cannot tell the family"
    bad = tmp_path / "bad.yaml"
    bad.write_text(spec.read_text().replace("hf_model://nvidia/Cosmos-Reason2-8B", UNKNOWN))
    code, out, err = run_cli(capsys, "automl", "--skill", SKILL, "--spec", str(bad), "--dry-run", "--json")
    assert code == 2 and message in out + err


def test_a_local_folder_or_a_cached_config_is_counted_not_unknown(tmp_path):
    folder = tmp_path / "my-3b"
    folder.mkdir()
    shutil.copy(table.CONFIGS / "Qwen--Qwen2.5-VL-3B-Instruct.json", folder / "config.json")
    total, how = params.model_params(str(folder))
    assert total == 3_754_622_976 and "meta-device count" in how and "the shape of the bundled Qwen/Qwen2.5-VL-3B-Instruct" in how
    tiny = tmp_path / "tiny"  # a config of no table entry's shape, no weights: counted on the meta device in a child process
    tiny.mkdir()
    (tiny / "config.json").write_text(json.dumps(tiny_config()))
    count = params.lookup(str(tiny))
    assert count.total == params.count_on_meta(params.find_config(str(tiny))).total and "meta-device count" in count.source
    assert params.lookup(str(tmp_path / "only-on-the-node")) is None  # a path this machine lacks: the node counts it
    with pytest.raises(Exception) as refused:
        params.lookup(UNKNOWN)
    assert refused.value.message == unknown_model(UNKNOWN).message


# ---- parallelism from the table -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cosmos-rl", "local"])
def test_preflight_refuses_a_tp_size_the_heads_do_not_allow_whatever_the_backend(tmp_path, demo_dataset_dir, capsys, backend):
    spec = tmp_path / "train.yaml"
    code, _, err = run_cli(capsys, "spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir), "--set", f"model={QWEN3B}",
                           "--set", f"output_dir={tmp_path / 'out'}", "--set", f"results_dir={tmp_path / 'res'}", "-o", str(spec))
    assert code == 0, err
    code, out, _ = run_cli(capsys, "preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--set", "tp_size=4",
                           "--set", "dp_shard_size=2", "--gpus-per-node", "8", "--runs-on", "node", "--backend", backend, "--json")
    found = [f for f in json.loads(out)["findings"] if f["check"] == "spec.parallelism"]
    assert code == 2 and len(found) == 1 and "tp_size 4 does not divide the 2 KV heads" in found[0]["message"]
    assert "one of 1, 2" in found[0]["fix"] and found[0]["where"] == "policy.parallelism.tp_size"
    code, out, _ = run_cli(capsys, "plan", "--spec", str(spec), "--set", "tp_size=4", "--set", "dp_shard_size=2", "--json")
    assert code == 2 and json.loads(out)["error"]["message"] == found[0]["message"]
    code, out, _ = run_cli(capsys, "spec", "--from", str(spec), "--set", "tp_size=4", "--set", "dp_shard_size=2", "--json")
    assert code == 2 and json.loads(out)["error"]["message"] == found[0]["message"]
    code, out, _ = run_cli(capsys, "preflight", "--skill", SKILL, "--action", "train", "--spec", str(spec), "--set", "tp_size=2",
                           "--set", "dp_shard_size=4", "--gpus-per-node", "8", "--runs-on", "node", "--backend", backend, "--json")
    assert not [f for f in json.loads(out)["findings"] if f["check"] == "spec.parallelism"]


def test_the_tp_and_cp_rules_follow_cosmos_rl_per_family():
    cr2 = table.get("nvidia/Cosmos-Reason2-8B").config
    assert parallel_check("m", cr2, 8) is None and "cp_size must be 1" in parallel_check("m", cr2, 1, 2)[0]  # HFModel: no cp
    cr1 = table.get("nvidia/Cosmos-Reason1-7B").config
    assert "28 attention heads" in parallel_check("m", cr1, 8)[0] and parallel_check("m", cr1, 2, 2) is None  # 4 divides 16 and 28
    assert "vision tower heads" in parallel_check("m", {**cr1, "vision_config": {**cr1["vision_config"], "num_heads": 14}}, 4)[0]


def test_preflight_backend_defaults_to_trains():
    from skillbank.training.backends import DEFAULT_BACKEND

    args = cli.build_parser("preflight").parse_args(["preflight", "--skill", SKILL, "--action", "train", "--spec", "x.yaml"])
    assert args.backend == DEFAULT_BACKEND == "cosmos-rl"


# ---- gating per model, the router, data stats ------------------------------------------------------------------


def test_gating_and_credentials_come_from_the_model_entry():
    from skillbank.preflight import env_checks
    from skillbank.preflight.report import Findings

    for model, gated in ((QWEN3B, False), ("nvidia/Cosmos-Reason2-8B", True), ("hf_model://nvidia/Cosmos-Reason1-7B", True)):
        f = Findings(runs_on="here")
        env_checks.check_hf_token([env_checks.resolve("policy.model_name_or_path", model)], f)
        found = [x for x in f.finish() if x.check == "env.hf_token"]
        assert bool(found) == gated, model
        assert not found or "gated" in found[0].message


@pytest.mark.parametrize("request_text, model", [
    ("fine-tune Qwen2.5-VL-3B on my clips, no HPO", QWEN3B),
    ("how many GPUs to train qwen 2.5 vl 7b instruct?", QWEN7B),
    ("train Cosmos-Reason2-8B on 2 nodes", "nvidia/Cosmos-Reason2-8B"),
    ("use hf_model://nvidia/Cosmos-Reason1-7B please", "nvidia/Cosmos-Reason1-7B"),
    ("fine-tune Qwen2.5-VL-32B", None), ("fine-tune it", None), ("fine-tune Cosmos-Reason2", None),
])
def test_the_router_reads_a_model_named_in_the_request(request_text, model):
    from skillbank.routing.router import plan_step, route

    d = route(skill=SKILL, action="train", request=request_text)
    assert d.model == model
    if model:
        assert d.model_source.startswith("the request")
    if d.route == "plan":
        assert d.plan_step == plan_step(model, d.nodes, d.fixed) and (f"--set model={model}" in d.plan_step) == bool(model)
    importing = route(skill=SKILL, action="train", request="convert my dataset to LLaVA, then " + request_text)
    assert (f"--set model={model}" in importing.data_step) == bool(model)


def test_data_stats_prints_the_models_own_vision_numbers(demo_dataset_dir, capsys):
    annotations = str(demo_dataset_dir / "train" / "annotations.json")
    code, out, _ = run_cli(capsys, "data", "stats", annotations, "--set", f"model={QWEN3B}", "--json")
    assert code == 0 and json.loads(out)["vision"]["patch_size"] == 14
    code, out, _ = run_cli(capsys, "data", "stats", annotations, "--json")
    assert code == 0 and json.loads(out)["vision"]["patch_size"] == 16  # the template's Cosmos-Reason2-8B


# ---- the smaller things -------------------------------------------------------------------------------------


def test_plan_prints_one_parameter_figure_at_one_precision(capsys):
    from skillbank.planning.text import params_line

    assert params_line(3_754_622_976, 3_754_622_976, 0) == "3.75B parameters, all trained"
    assert params_line(3_754_622_976, 74_000_000, 74_000_000) == "3.75B parameters, 74.0M trained (LoRA)"
    code, out, _ = run_cli(capsys, "plan", "--set", f"model={QWEN3B}", "--records", "1000", "--clip-seconds", "4", "--nodes", "1", "--gpus-per-node", "8")
    assert code == 0 and out.splitlines()[0] == f"model {QWEN3B}: 3.75B parameters, all trained"


def _row(nodes, hours, batch, note=None):
    return {"nodes": nodes, "gpus": 8 * nodes, "fits": True, "total_steps": 10, "total_time_h": hours, "gpu_hours": hours * 8 * nodes,
            "global_batch": batch, "batch_note": note}


def test_the_recommendation_names_a_batch_change_and_honours_the_stated_nodes():
    from skillbank.planning.estimate import GPUS
    from skillbank.planning.layouts import recommend

    rows = [_row(1, 4.0, 48), _row(2, 2.1, 48, "mini_batch 2 -> 1"), _row(4, 1.2, 32, "the global batch 48 does not split over 32 ranks")]
    rec = recommend(rows, GPUS["h100-80gb"], [], batch=48)
    assert rec["nodes"] == 2 and "at the spec's global batch 48" in rec["reason"]
    assert "4 node(s) would take 1.2 h but change the recipe: global batch 32 instead of 48" in rec["reason"]
    rec = recommend(rows, GPUS["h100-80gb"], [], batch=48, stated=(1, "--nodes 1"))
    assert rec["nodes"] == 1 and rec["stated_by"] == "--nodes 1" and rec["reason"].startswith("as --nodes 1 states")
    rec = recommend(rows, GPUS["h100-80gb"], [], batch=48, stated=(4, "--nodes 4"))
    assert rec["nodes"] == 4 and "at global batch 32" in rec["reason"] and "at the spec's global batch 48" not in rec["reason"].split(";")[0]


def test_a_pipe_closed_early_ends_without_a_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "skillbank.cli", "models", "list"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=os.environ.copy())
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert proc.returncode in (0, 141)


def test_train_dry_run_writes_beside_the_spec_not_in_the_current_folder(tmp_path, demo_dataset_dir, capsys, monkeypatch):
    spec_dir, elsewhere = tmp_path / "experiment", tmp_path / "elsewhere"
    spec_dir.mkdir()
    elsewhere.mkdir()
    spec = spec_dir / "train.yaml"
    code, _, err = run_cli(capsys, "spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(demo_dataset_dir), "--set", f"model={QWEN3B}",
                           "--set", "batch_size=1", "--set", "mini_batch=1", "-o", str(spec))  # results_dir ./results: relative
    assert code == 0, err
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(capsys, "train", "--spec", str(spec), "--automl-policy", "off", "--dry-run")
    assert code == 0, err + out
    assert list(elsewhere.iterdir()) == []
    tomls = list((spec_dir / "results" / "jobs").glob("train-*/cosmos_rl.toml"))
    assert len(tomls) == 1 and f"job folder: {tomls[0].parent}" in out
