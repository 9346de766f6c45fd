"""`skillbank plan`: meta-device parameter counts of the bundled configs, LoRA, memory per GPU, layouts at the spec's
global batch, tokens from the clips (headers probed and cached) or a description, fits_with, the time breakdown, rl specs,
the preflight disk estimate on the same count, and the CLI (offline: HF_HUB_OFFLINE and an empty HF_HOME)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from helpers import SKILL, json_out, skillbank
from skillbank.models import params
from skillbank.planning.estimate import gpu_kind

KEYS = ("params", "trainable_params", "tokens_per_sample", "memory_per_gpu_gib", "memory_breakdown_gib", "step_time_s", "fits_with",
        "time_breakdown_h", "total_time_h", "slurm_time", "checkpoint_gib", "disk_gib", "assumptions", "layouts", "recommendation", "global_batch")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No hub cache and no network: the bundled config.json files answer."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _spec(tmp_path, data_dir, **overrides) -> str:
    from skillbank.specification.overrides import set_dotted

    spec = {
        "policy": {"model_name_or_path": "nvidia/Cosmos-Reason2-8B"},
        "train": {"output_dir": str(tmp_path / "out"), "train_batch_per_replica": 1, "train_policy": {"mini_batch": 1}},
        "custom": {
            "train_dataset": {"annotation_path": str(data_dir / "train" / "annotations.json"), "media_path": str(data_dir / "train")},
            "val_dataset": {"annotation_path": str(data_dir / "val" / "annotations.json"), "media_path": str(data_dir / "val")},
        },
    }
    for key, value in overrides.items():
        set_dotted(spec, key, value)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_bundled_configs_count_on_meta_as_shipped():
    counts = json.loads(params.COUNTS_FILE.read_text())
    assert set(counts) == set(params.bundled_repos()) >= {"nvidia/Cosmos-Reason2-8B", "nvidia/Cosmos-Reason1-7B"}
    for repo in counts:
        config = params.find_config(repo)
        assert config is not None and config.bundled == repo
        count = params.count_on_meta(config)
        assert (count.total, count.largest_unit, count.root) == (counts[repo]["total"], counts[repo]["largest_unit"], counts[repo]["root"])
        assert counts[repo]["signature"] == params.signature(config.data)
    assert round(counts["nvidia/Cosmos-Reason2-8B"]["total"] / 1e9, 2) == 8.77
    assert round(counts["nvidia/Cosmos-Reason1-7B"]["total"] / 1e9, 2) == 8.29


def test_lora_trains_the_adapters_peft_adds():
    from skillbank.specification.train import LoraSpec

    lora = LoraSpec(enable=True, r=8)
    count = params.count_on_meta(params.find_config("nvidia/Cosmos-Reason2-8B"), lora)
    h, kv, inter, layers = 4096, 8 * 128, 12288, 36  # the text decoder: the default target module names are its Linear layers
    per_layer = 8 * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h))
    assert count.trainable == count.lora == layers * per_layer
    assert count.total == 8_767_123_696


def test_preflight_disk_estimate_uses_the_counted_parameters(tmp_path, demo_dataset_dir):
    from skillbank.preflight import env_checks
    from skillbank.preflight.run import run_preflight

    from skillbank.preflight.report import Findings

    count = env_checks.model_count(env_checks.resolve("policy.model_name_or_path", "nvidia/Cosmos-Reason2-8B"), Findings(runs_on="here"))
    assert count.total == 8_767_123_696 and "meta-device count" in count.source
    # a config re-saved by another transformers version in the hub cache (no weights) has the bundled one's shape
    config = json.loads(params.bundled_config("nvidia/Cosmos-Reason2-8B").read_text())
    snapshot = tmp_path / "hf-home" / "hub" / "models--nvidia--Cosmos-Reason2-8B" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**config, "transformers_version": "4.99.0", "dtype": "float16"}))
    count, how = params.model_params("nvidia/Cosmos-Reason2-8B")
    assert count == 8_767_123_696 and "Hugging Face cache" in how
    report = run_preflight(skill=SKILL, action="train", spec_path=_spec(tmp_path, demo_dataset_dir), only=["data"])
    disk = report.stats["plan"]["disk"]
    assert disk["params"] == 8_767_123_696 and "meta-device count" in disk["params_from"]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    from skillbank import cli

    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def plan_json(capsys, *argv: str) -> dict:
    code, out, err = run_cli(capsys, "plan", *argv, "--json")
    assert code == 0, err + out
    return json.loads(out)


def test_the_default_plan_of_the_demo_data_fits_the_8b_on_one_node_with_tokens_from_the_clips(tmp_path, demo_dataset_dir, capsys, monkeypatch):
    """Records without durations: every clip's headers are read (PyAV, no decode), not the vision budget; a second plan reads them from the cache."""
    monkeypatch.setenv("SKILLBANK_CACHE", str(tmp_path / "cache"))  # a cache of its own: the first plan reads every clip
    spec = _spec(tmp_path, demo_dataset_dir, **{"train.train_batch_per_replica": 32, "train.train_policy.mini_batch": 2})  # the template's batch
    first = plan_json(capsys, "--spec", spec)
    tokens = first["tokens_per_sample"]
    assert tokens["bound"] == "probed" and tokens["probed"] == tokens["samples"] == 24 and tokens["budget"] == 0
    assert 300 < tokens["mean"] <= tokens["max"] < 400  # 64x64 2-s clips: 2 temporal patches of 128 tokens + the text
    assert first["fits"] and first["nodes"] == 1 and first["gpus_per_node"] == 8 and 15 < first["memory_per_gpu_gib"] < 30
    assert first["fits_with"] == [] and first["recommendation"]["reason"]
    assert tokens["probe"]["from_cache"] == 0 and tokens["probe"]["read"] == 24
    again = plan_json(capsys, "--spec", spec)["tokens_per_sample"]
    assert again["probe"]["from_cache"] == 24 and again["probe"]["read"] == 0 and again["mean"] == tokens["mean"]
    # the budget stands in only for a clip that cannot be read, and is counted
    broken = tmp_path / "broken"
    shutil.copytree(demo_dataset_dir / "train", broken)
    first_clip = json.loads((broken / "annotations.json").read_text())[0]["video"]
    (broken / first_clip).write_bytes(b"not an mp4")
    spec = _spec(tmp_path, demo_dataset_dir, **{"custom.train_dataset.annotation_path": str(broken / "annotations.json"), "custom.train_dataset.media_path": str(broken)})
    tokens = plan_json(capsys, "--spec", spec)["tokens_per_sample"]
    assert tokens["budget"] == 1 and tokens["probed"] == 23 and tokens["bound"] == "budget" and tokens["max"] > 30_000


def test_plan_memory_parts_layouts_at_the_global_batch_and_the_time_breakdown(tmp_path, demo_dataset_dir, capsys):
    spec = _spec(tmp_path, demo_dataset_dir)  # batch 1 per rank on 8 ranks: 3 steps per epoch
    eight = plan_json(capsys, "--spec", spec)
    assert all(k in eight for k in KEYS)
    assert eight["params"] == eight["trainable_params"] == 8_767_123_696
    parts = eight["memory_breakdown_gib"]
    assert set(parts) == {"weights", "gathered_weights", "gradients", "optimizer", "activations", "logits"}
    assert abs(sum(parts.values()) - eight["memory_per_gpu_gib"]) < 0.05
    assert [r["nodes"] for r in eight["layouts"]] == [1, 2, 4]
    assert eight["steps"]["total_steps"] == eight["total_steps"] and eight["steps"]["global_batch"] == eight["global_batch"] == 8
    # the layouts hold the spec's global batch: 16 and 32 GPUs cannot split 8 records, and say so
    rows = {r["nodes"]: r for r in eight["layouts"]}
    assert rows[2]["global_batch"] == 16 and "does not split" in rows[2]["batch_note"] and rows[1]["batch_note"] is None
    wide = plan_json(capsys, "--spec", spec, "--set", "train.train_batch_per_replica=4", "--set", "mini_batch=2")
    assert [r["global_batch"] for r in wide["layouts"]] == [32, 32, 32] and [r["train_batch_per_replica"] for r in wide["layouts"]] == [4, 2, 1]
    assert [r["mini_batch"] for r in wide["layouts"]] == [2, 2, 1] and "mini_batch 2 -> 1" in wide["layouts"][2]["batch_note"]
    assert wide["layouts"][2]["allreduce_s"] > wide["layouts"][1]["allreduce_s"] > 0 == wide["layouts"][0]["allreduce_s"]
    fixed = plan_json(capsys, "--spec", spec, "--set", "train.train_batch_per_replica=4", "--set", "mini_batch=2", "--per-gpu-batch", "fixed")
    assert [r["global_batch"] for r in fixed["layouts"]] == [32, 64, 128]
    # time: compute + startup (launch, the hub download, the read) + checkpoint writes + validation = the total; every bandwidth overridable
    t = eight["time_breakdown_h"]
    assert set(t) == {"compute", "startup", "checkpoint", "validation", "total"} and t["total"] == eight["total_time_h"]
    assert abs(t["compute"] + t["startup"] + t["checkpoint"] + t["validation"] - t["total"]) < 0.002 and t["startup"] > t["compute"] and t["checkpoint"] > 0
    slow = plan_json(capsys, "--spec", spec, "--write-gibps", "0.5", "--download-gibps", "0.125")["time_breakdown_h"]
    assert slow["checkpoint"] == pytest.approx(2 * t["checkpoint"], rel=0.02) and slow["startup"] > t["startup"]
    assert re.fullmatch(r"\d\d:\d\d:00", eight["slurm_time"]["value"]) and eight["slurm_time"]["hours"] >= eight["total_time_h"] * 1.25
    assert any("--write-gibps" in a for a in eight["assumptions"]) and eight["units"].startswith("GiB")
    # more shards: less weight / optimizer memory per GPU; checkpointing: fewer activations; LoRA
    two = plan_json(capsys, "--spec", spec, "--gpus-per-node", "2")
    assert two["memory_breakdown_gib"]["optimizer"] == pytest.approx(4 * parts["optimizer"], rel=0.01)
    assert eight["activations_gib"]["with_checkpointing"] < eight["activations_gib"]["without_checkpointing"]
    lora = plan_json(capsys, "--spec", spec, "--set", "policy.lora.enable=true", "--set", "policy.model_gradient_checkpointing=false")
    assert lora["trainable_params"] == lora["lora_params"] < lora["params"] / 100
    assert lora["memory_breakdown_gib"]["optimizer"] < 0.1 and lora["checkpoint_gib"] < eight["checkpoint_gib"]
    assert lora["memory_breakdown_gib"]["activations"] == eight["activations_gib"]["without_checkpointing"]


def test_a_described_dataset_agrees_with_the_same_clips_stated_in_records(tmp_path, demo_dataset_dir, capsys):
    """--records/--clip-seconds/--resolution: the template (no --spec), tokens within 5% of the same clips stated in records."""
    described = plan_json(capsys, "--records", "50000", "--clip-seconds", "10", "--resolution", "1280x720", "--set", "fps=4")
    t = described["tokens_per_sample"]
    assert t["source"].startswith("the described clips") and described["model"] == "hf_model://nvidia/Cosmos-Reason2-8B"
    assert described["train_records"] == 45_000 and described["total_steps"] == 3 * (45_000 // 8 // 32)  # the template: 10% split off, global batch 256, 3 epochs
    records = json.loads((demo_dataset_dir / "train" / "annotations.json").read_text())
    for r in records:
        r.update(duration=10.0, num_frames=300, video_fps=30.0, width=1280, height=720)
        r["conversations"][0]["value"] += " Think about the whole clip, the objects in it, how they move and what they do, then answer." * 5
    stated = tmp_path / "stated.json"
    stated.write_text(json.dumps(records))
    spec = _spec(tmp_path, demo_dataset_dir, **{"custom.train_dataset.annotation_path": str(stated), "custom.vision.fps": 4.0})
    from_records = plan_json(capsys, "--spec", spec)["tokens_per_sample"]
    assert from_records["bound"] == "exact" and from_records["probed"] == 0
    assert abs(t["mean"] - from_records["mean"]) <= 0.05 * from_records["mean"]
    same = plan_json(capsys, "--records", "24", "--clip-seconds", "10", "--resolution", "720p", "--spec", spec)["tokens_per_sample"]
    assert same["mean"] == t["mean"]  # --spec with a description: the spec's settings, the described data
    # fits_with: the described 720p set does not fit with mini_batch 2; every setting listed is planned again and fits
    assert not described["fits"] and described["fits_with"]
    usable = 79.6 * 0.9
    for fix in described["fits_with"]:
        assert fix["fits"] and fix["memory_per_gpu_gib"] <= usable
    offered = {s for fix in described["fits_with"] for s in fix["set"]}
    assert {"train.train_policy.mini_batch=1", "policy.enable_liger_fused_cross_entropy=true"} <= offered
    again = plan_json(capsys, "--records", "50000", "--clip-seconds", "10", "--resolution", "1280x720", "--set", "fps=4",
                      "--set", "policy.enable_liger_fused_cross_entropy=true")
    fused = next(f for f in described["fits_with"] if f["set"] == ["policy.enable_liger_fused_cross_entropy=true"])
    assert again["fits"] and again["memory_per_gpu_gib"] == fused["memory_per_gpu_gib"] and again["memory_breakdown_gib"]["logits"] < 5
    assert "fits_with" in described["recommendation"]["reason"]


def test_an_rl_spec_is_planned_policy_and_rollout(tmp_path, demo_dataset_dir, capsys):
    spec = tmp_path / "rl.yaml"
    code, _, err = run_cli(capsys, "spec", "--action", "rl", "--set", "start=nvidia/Cosmos-Reason2-8B", "--set",
                           f"annotation_path={demo_dataset_dir / 'train' / 'annotations.json'}", "--set", f"output_dir={tmp_path / 'rl-out'}", "-o", str(spec))
    assert code == 0, err
    rl = plan_json(capsys, "--spec", str(spec))
    assert rl["action"] == "rl" and rl["gpus"] == rl["policy"]["gpus"] + rl["rollout"]["gpus"] == 8
    fitted = yaml.safe_load(spec.read_text())["rollout"]["max_response_length"]  # fitted from the data's answers (training.rl_length)
    assert rl["tokens_per_sample"]["bound"] == "probed" and rl["tokens_per_sample"]["sequence_max"] == rl["tokens_per_sample"]["max"] + fitted
    assert set(rl["rollout"]["memory_breakdown_gib"]) == {"weights", "kv_cache", "overhead"} and rl["rollout"]["fits"] and rl["policy"]["fits"]
    assert "reference_weights" in rl["policy"]["memory_breakdown_gib"]  # kl_beta 0.01: the reference model is loaded
    st = rl["step_time_s"]
    assert st["rollout"] > 0 and st["policy"] > 0 and st["total"] == pytest.approx(st["rollout"] + st["policy"], abs=0.02)
    assert rl["prompts"] == 24 and rl["total_steps"] == 24 * 8 // rl_batch(spec) and rl["time_breakdown_h"]["total"] == rl["total_time_h"]
    longer = plan_json(capsys, "--spec", str(spec), "--set", "rollout.max_response_length=8192")
    assert longer["rollout"]["memory_breakdown_gib"]["kv_cache"] == pytest.approx(
        rl["rollout"]["memory_breakdown_gib"]["kv_cache"] * (longer["tokens_per_sample"]["sequence_max"] / rl["tokens_per_sample"]["sequence_max"]), rel=0.01)
    assert longer["step_time_s"]["rollout"] > st["rollout"]
    code, out, _ = run_cli(capsys, "plan", "--spec", str(spec))
    assert code == 0 and "rollout: 4 GPU(s) in 2 vLLM engine(s)" in out


def rl_batch(spec) -> int:
    return yaml.safe_load(spec.read_text())["train"]["train_batch_per_replica"]


def test_an_automl_study_has_one_time_and_one_disk_figure(tmp_path, demo_dataset_dir, capsys):
    """plan --trials, the AutoML dry run and the gate's env.disk (preflight --trials ...) print the same figures: the study's time
    (train + each epoch's evaluation, over the trials at once), a worker's share of the disk and the study's at most, at the top
    of the searched LoRA rank; a LoRA checkpoint is the same 33.07 GiB everywhere (the adapters counted, not bounded by rank)."""
    from skillbank.preflight.run import run_preflight
    from skillbank.runs.disk import StudyShape

    spec = _spec(tmp_path, demo_dataset_dir, **{"train.epoch": 2, "validation.batch_size": 1, "policy.lora.enable": True})
    search = ("--param", "train.optm_lr", "--param", "policy.lora.r")
    study = plan_json(capsys, "--spec", spec, "--trials", "5", "--workers", "2", *search)
    block = study["study"]
    assert block["disk"]["checkpoint_gib"] == 33.07 and block["disk"]["lora_rank"] == 128 and block["disk"]["checkpoint_gib_largest"] > 33.07
    one = block["disk"]["checkpoint_gib_largest"]
    assert study["disk_gib_per_worker"] == pytest.approx(one * (2 + 1), abs=0.02)  # its running trial's 2 epochs + the kept best
    assert study["disk_gib_at_most"] == pytest.approx(one * (2 * 2 + 1), abs=0.02)  # 2 trials at once + the best
    assert block["waves"] == 3 and study["study_time_h"] == pytest.approx(3 * block["trial_time_h"], abs=0.01)
    assert block["evaluations_per_trial"] == 2 and block["trial_evaluation_h"] > 0 and block["eval_on"] == "custom.val_dataset"
    code, out, err = run_cli(capsys, "automl", "--skill", SKILL, "--spec", spec, "--max-trials", "5", "--workers", "2", *search, "--dry-run", "--json",
                             "--out", str(tmp_path / "study"))
    assert code == 0, err + out
    dry = json.loads(out)
    assert dry["study_time_h"] == study["study_time_h"] and dry["disk_gib_at_most"] == study["disk_gib_at_most"]
    assert dry["disk_gib_per_worker"] == dry["disk_gib_at_most"]  # --workers 2 of automl: both trials on this worker
    assert dry["disk"]["checkpoint_gib"] == 33.07
    gate = run_preflight(skill=SKILL, action="train", spec_path=spec, runs_on="node", probe_sample=0, study=StudyShape(5, 2, 1, 1, "best", 128))
    assert gate.stats["disk"]["need_gb"] == study["disk_gib_per_worker"]  # runs.steps.gib: one rounding, the JSON's and the text's
    code, text, err = run_cli(capsys, "automl", "--skill", SKILL, "--spec", spec, "--max-trials", "5", "--workers", "2", *search, "--dry-run",
                              "--out", str(tmp_path / "study"))
    said = f"{study['disk_gib_at_most']:,.2f} GiB"  # 2 decimals, as the JSON holds it: never 0.1 rounded two ways (143.7 / 143.6)
    assert code == 0 and f"disk       : {said} per worker, {said} at most" in text and f"~{said} per worker" in text, err + text
    assert f"needs {said} free" in text  # env.disk's note in the same words
    assert f"~{dry['disk']['checkpoint_gib_largest']:,.2f} GiB a checkpoint" in text
    plain = run_preflight(skill=SKILL, action="train", spec_path=spec, runs_on="node", probe_sample=0)
    assert plain.stats["plan"]["disk"]["checkpoint_gb"] == 33.07  # spec / preflight: the same checkpoint
    every = plan_json(capsys, "--spec", spec, "--trials", "5", "--keep", "all", "--metric", "val_loss", *search)
    assert every["disk_gib_at_most"] == pytest.approx(one * 2 * 5, abs=0.03) and every["study"]["trial_evaluation_h"] == 0
    searched = json.loads(run_cli(capsys, "automl", "--skill", SKILL, "--spec", spec, "--max-trials", "5", "--param", "train.epoch",
                                  "--range", "train.epoch=1:4", "--dry-run", "--json", "--out", str(tmp_path / "study2"))[1])
    assert searched["disk"]["kept_per_trial"] == 4  # a searched train.epoch: its high end


def test_a_time_limit_gives_attempts_a_save_cadence_and_the_time_per_attempt(tmp_path, demo_dataset_dir, capsys):
    """A described 50k-clip run against a 1-hour limit needs several attempts: save_freq in steps bounds the loss per stop (the
    spec's save every epoch loses far more); the demo data fit in one attempt at the plan's slurm_time."""
    from skillbank.planning.limit import SIGNAL_BEFORE_LIMIT_S

    long = plan_json(capsys, "--records", "50000", "--clip-seconds", "10", "--resolution", "1280x720", "--set", "fps=4", "--set", "mini_batch=1",
                     "--time-limit", "4")
    b = long["time_limit"]
    assert b["attempts"] >= 5 and b["time_per_attempt"] == "04:00:00" and b["set"] == ["train.ckpt.save_freq_in_epoch=0", f"train.ckpt.save_freq={b['save_every_steps']}"]
    assert b["lost_per_stop_h"] < b["spec_lost_per_stop_h"] / 3 and b["assumptions"]["signal_before_limit_s"] == SIGNAL_BEFORE_LIMIT_S == 300
    step_h = b["assumptions"]["step_time_s"] / 3600
    assert b["lost_per_stop_h"] == pytest.approx(b["save_every_steps"] * step_h + b["assumptions"]["checkpoint_s"] / 3600, abs=0.002)
    assert b["total_time_h"] > long["total_time_h"]  # the cadence's saves cost time
    code, out, err = run_cli(capsys, "plan", "--records", "50000", "--clip-seconds", "10", "--resolution", "1280x720", "--set", "fps=4", "--time-limit", "4")
    assert code == 0 and "time limit 4 h:" in out and "--set train.ckpt.save_freq=" in out and "--signal=B:USR1@300" in out
    short = plan_json(capsys, "--spec", _spec(tmp_path, demo_dataset_dir, **{"validation.batch_size": 1}), "--time-limit", "24")["time_limit"]
    assert short["attempts"] == 1 and short["set"] == [] and short["time_per_attempt"] == "00:30:00"  # the plan's slurm_time, under the limit
    code, out, err = run_cli(capsys, "plan", "--records", "50000", "--clip-seconds", "10", "--time-limit", "0.05", "--json")
    assert code == 2 and "--time-limit" in err + out


def test_cli_paths_text_and_input_errors(tmp_path, demo_dataset_dir, capsys, monkeypatch):
    # a spec that names the node's paths: read at LOCAL through --path-map, or the map the spec records
    local = _spec(tmp_path, demo_dataset_dir)
    remote_root = "/cluster/data"
    node = yaml.safe_load(Path(local).read_text())
    for key in ("train_dataset", "val_dataset"):
        for field in ("annotation_path", "media_path"):
            node["custom"][key][field] = node["custom"][key][field].replace(str(demo_dataset_dir), remote_root)
    node_file = tmp_path / "node.yaml"
    node_file.write_text(yaml.safe_dump(node))
    here = plan_json(capsys, "--spec", local)["tokens_per_sample"]
    flagged = plan_json(capsys, "--spec", str(node_file), "--path-map", f"{demo_dataset_dir}={remote_root}")["tokens_per_sample"]
    node_file.write_text(yaml.safe_dump({**node, "paths": {"map": [f"{demo_dataset_dir}={remote_root}"]}}))
    recorded = plan_json(capsys, "--spec", str(node_file))["tokens_per_sample"]
    assert here["mean"] == flagged["mean"] == recorded["mean"] and recorded["samples"] == 24
    assert gpu_kind("H100") == "h100-80gb" and gpu_kind("a100") == "a100-80gb" and gpu_kind("h200") == "h200"  # the names users type
    code, out, _ = run_cli(capsys, "plan", "--spec", local, "--gpu", "h200", "--nodes", "2")
    assert code == 0 and "recommendation:" in out and "time:" in out and "GiB per GPU" in out
    for argv, where in ((["--json"], "--spec"), (["--spec", local, "--gpu", "v100", "--json"], "--gpu"), (["--records", "10", "--json"], "--clip-seconds"),
                        (["--records", "10", "--clip-seconds", "5", "--resolution", "wide", "--json"], "--resolution"),
                        (["--spec", local, "--set", "mini_batch=0", "--json"], "train.train_policy.mini_batch"),
                        (["--spec", str(tmp_path / "nope.yaml"), "--json"], str(tmp_path / "nope.yaml"))):
        code, out, err = run_cli(capsys, "plan", *argv)
        assert code == 2 and json.loads(out)["error"]["where"].endswith(where) and "Traceback" not in err, argv


def test_cli_json_in_a_fresh_interpreter(tmp_path, demo_dataset_dir):
    spec = _spec(tmp_path, demo_dataset_dir, **{"policy.model_name_or_path": "nvidia/Cosmos-Reason1-7B"})
    env = {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1"}
    proc = skillbank("plan", "--spec", spec, "--gpu", "h200", "--nodes", "2", "--decode-sample", "3", "--json", env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json_out(proc)
    assert all(k in out for k in KEYS) and round(out["params"] / 1e9, 2) == 8.29 and out["tokens_per_sample"]["samples"] == 24
    assert out["nodes"] == 2 and out["gpu"] == "h200" and any("MFU 0.3" in a for a in out["assumptions"])


def test_submit_to_slurm_uses_the_suggested_time_and_an_automl_job_gates_the_study_disk(tmp_path, demo_dataset_dir, capsys):
    """submit --platform slurm without --time: the plan's slurm_time (from the gate's own tally); with --time, that one.
    An AutoML job's first step checks the study's disk (preflight --trials N --trial-epochs E)."""
    from skillbank.preflight.run import run_preflight

    spec = _spec(tmp_path, demo_dataset_dir, **{"validation.batch_size": 1, "results_dir": str(tmp_path / "results")})
    code, out, err = run_cli(capsys, "submit", "--platform", "slurm", "--spec", spec, "--dry-run", "--json")
    assert code == 0, err + out
    record = json.loads(out)["record"]
    [line] = [n for n in record["notes"] if n.startswith("--time ") and "skillbank plan" in n]  # beside "--time is not capped: ..."
    value = line.split()[1].rstrip(":")
    assert f"#SBATCH --time={value}" in Path(record["script"]).read_text() and "skillbank plan" in line
    report = run_preflight(skill=SKILL, action="train", spec_path=spec, runs_on="node")  # the gate's tally: a sample of the clips, said
    assert report.stats["probe"]["sample"] == 64 and report.stats["probe"]["records"] == 24 and report.stats["tokens_per_sample"]["bound"] == "probed"
    rl = tmp_path / "rl.yaml"
    assert run_cli(capsys, "spec", "--action", "rl", "--set", "start=nvidia/Cosmos-Reason2-8B", "--set", f"annotation_path={demo_dataset_dir / 'train' / 'annotations.json'}",
                   "--set", f"output_dir={tmp_path / 'rl-out'}", "--set", f"results_dir={tmp_path / 'results'}", "-o", str(rl))[0] == 0
    code, out, err = run_cli(capsys, "submit", "--platform", "slurm", "--action", "rl", "--spec", str(rl), "--dry-run", "--json")
    assert code == 0, err + out
    record = json.loads(out)["record"]
    assert any(n.startswith("--time ") for n in record["notes"]) and "#SBATCH --time=" in Path(record["script"]).read_text()
    code, out, _ = run_cli(capsys, "submit", "--platform", "slurm", "--spec", spec, "--dry-run", "--time", "02:00:00", "--json")
    assert code == 0 and "#SBATCH --time=02:00:00" in Path(json.loads(out)["record"]["script"]).read_text()
    code, out, err = run_cli(capsys, "submit", "--platform", "slurm", "--action", "automl", "--spec", spec, "--max-trials", "6", "--param", "train.epoch",
                             "--range", "train.epoch=1:4", "--dry-run", "--json")
    assert code == 0, err + out
    record = json.loads(out)["record"]
    script = Path(record["script"]).read_text()
    assert "--trials 6 --trial-workers 1 --keep best --trial-epochs 4" in script and "#SBATCH --time" not in script
    assert any("AutoML study" in n for n in record["notes"])
