"""What the user fixed stays fixed (issue 39, item 3): `skillbank spec --set` records the keys it set (user_set), AutoML
leaves them out of its search unless asked (--search, or naming them), its dry run lists them beside the searched ones;
the route names what the request fixed, fills plan_step for a plan request and says how to get one direct run; a bare
`skillbank train` warns that it follows automl_policy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from helpers import ROOT, SKILL, json_out, skillbank
from skillbank.automl.space import build_space, load_schema
from skillbank.errors import InputError
from skillbank.routing.fixed import fixed_from_request
from skillbank.routing.router import DIRECT_RUN, plan_step, route
from skillbank.skillinfo import schema_path
from skillbank.specification.build import build_spec

ISSUE = ("Plan LoRA SFT of Cosmos-Reason2-8B on a customer's ShareGPT-style video-conversation file on one 80 GB GPU "
         "for 3 epochs")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No hub cache and no network: the bundled config.json files answer."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_spec_records_what_the_user_set_and_spec_from_keeps_it():
    built = build_spec(SKILL, "train", ["epochs=3", "lora=true", "train.optm_decay_type=cosine"])
    assert built.spec.user_set == ["policy.lora.enable", "train.epoch", "train.optm_decay_type"]  # shorthands resolved
    assert build_spec(SKILL, "train").spec.user_set == []  # the template fixes nothing
    again = build_spec(SKILL, "train", ["lora_r=32"], base=built.spec.model_dump(mode="json"))
    assert again.spec.user_set == ["policy.lora.enable", "policy.lora.r", "train.epoch", "train.optm_decay_type"]
    with pytest.raises(InputError, match="user_set names no spec key: train.epochs"):
        build_spec(SKILL, "train", base={"user_set": ["train.epochs"]})


def test_the_search_leaves_out_what_the_user_set_unless_asked():
    schema = load_schema(schema_path(SKILL, "train"))
    base = build_spec(SKILL, "train", ["epochs=3", "lora=true"]).spec.model_dump(mode="json")
    space = build_space(schema, base)
    assert "train.epoch" not in space.keys() and space.left_out == ["train.epoch"]
    assert "policy.lora.r" in space.keys()  # LoRA fixed on: its settings are searched
    shown = {f["key"]: f for f in space.fixed_list()}
    assert shown["train.epoch"]["value"] == 3 and shown["train.epoch"]["left_out_of_search"]
    assert shown["policy.lora.enable"]["value"] is True and not shown["policy.lora.enable"]["left_out_of_search"]
    assert "--search train.epoch" in shown["train.epoch"]["describe"]
    for asked in (build_space(schema, base, search=["train.epoch"]), build_space(schema, base, params=["train.epoch", "train.optm_lr"]),
                  build_space(schema, base, ranges={"train.epoch": (1, 4)})):
        assert "train.epoch" in asked.keys() and not asked.left_out
        assert next(f for f in asked.fixed_list() if f["key"] == "train.epoch")["searched"]
    both = {**schema, "automl_default_parameters": ["train.epoch", "train.optm_lr"]}
    with pytest.raises(InputError, match="nothing to search .the spec fixes train.epoch, train.optm_lr: --search KEY"):
        build_space(both, build_spec(SKILL, "train", ["epochs=3", "lr=2e-5"]).spec.model_dump(mode="json"))


def _spec(tmp_path, data_dir, *sets: str) -> str:
    path = tmp_path / "train.yaml"
    proc = skillbank("spec", "--skill", SKILL, "--action", "train", "--dataset-root", str(data_dir), "--set", "model=nvidia/Cosmos-Reason2-8B",
                     "--set", f"output_dir={tmp_path / 'out'}", *[a for s in sets for a in ("--set", s)], "-o", str(path))
    assert proc.returncode == 0, proc.stderr
    return str(path)


def test_the_dry_run_lists_the_fixed_values_and_a_bare_train_warns(tmp_path, demo_dataset_dir, capsys):
    """The issue's study: LoRA on the 8B, the user's 3 epochs. Searched over 1-20 epochs before; now 3, as plan --trials says."""
    from skillbank import cli

    spec = _spec(tmp_path, demo_dataset_dir, "epochs=3", "lora=true")
    assert yaml.safe_load(open(spec))["user_set"] == ["policy.lora.enable", "policy.model_name_or_path", "train.epoch", "train.output_dir"]
    code = cli.main(["train", "--spec", spec, "--dry-run", "--json", "--automl-max-trials", "8", "--study", "s"])
    out = capsys.readouterr()
    assert code == 0, out.err
    dry = json.loads(out.out)
    assert "train.epoch" not in [p["key"] for p in dry["search_space"]] and dry["epochs_per_trial"] == 3
    assert {f["key"]: f["value"] for f in dry["fixed"]} == {"policy.lora.enable": True, "train.epoch": 3}  # settings, not paths
    assert dry["disk"]["kept_per_trial"] == 3
    warning = "`skillbank train` without --automl-policy follows automl_policy (the skill's default, auto)"
    assert warning in out.err and any(warning in n for n in dry["notes"]) and f"skillbank train --spec {spec} --automl-policy off" in out.err
    code = cli.main(["plan", "--spec", spec, "--trials", "8", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["study_time_h"] == dry["study_time_h"]
    code = cli.main(["automl", "--spec", spec, "--max-trials", "8", "--search", "train.epoch", "--dry-run", "--out", str(tmp_path / "s2")])
    text = capsys.readouterr().out
    assert code == 0 and "search     : train.epoch: int 1..20" in text and "--search train.epoch" in text  # the start command keeps it
    assert "fixed      : train.epoch=3 (yours: searched as you asked" in text
    explicit = cli.main(["train", "--spec", spec, "--automl-policy", "auto", "--dry-run", "--automl-max-trials", "2", "--study", "s3"])
    assert explicit == 0 and "follows automl_policy" not in capsys.readouterr().err  # asked for AutoML by name: no warning


@pytest.mark.parametrize("text, fixed", [
    (ISSUE, {"epochs": 3, "num_gpus": 1, "lora": True}),
    ("train on /data/qa for 3 epochs", {"epochs": 3}),
    ("full fine-tuning on a single H100, two epochs", {"num_gpus": 1, "lora": False, "epochs": 2}),
    ("fine-tune on 4 GPUs, no LoRA", {"num_gpus": 4, "lora": False}),
    ("use LoRA instead of full fine-tuning", {"lora": True}),
    ("qlora on 2x H100", {"num_gpus": 2, "lora": True}),
    ("search 1-3 epochs", {}), ("up to 3 epochs", {}), ("fine-tune on 32 H100s", {}), ("train it across two 8-GPU nodes", {}),
    ("how many GPU hours", {}), ("fine-tune it", {}),
])
def test_what_a_request_fixes(text, fixed):
    assert {f.name: f.value for f in fixed_from_request(text)} == fixed


def test_the_route_names_what_the_request_fixed_plans_it_and_says_how_to_run_once():
    d = route(skill=SKILL, action="train", request=ISSUE)
    assert d.route == "plan" and d.after_plan["route"] == "automl"  # "Plan ..." is a plan request
    assert [(f["key"], f["value"]) for f in d.fixed] == [("train.epoch", 3), ("policy.parallelism.dp_shard_size", 1), ("policy.lora.enable", True)]
    assert d.plan_step == plan_step(d.model, d.nodes, d.fixed)
    assert "--set train.epoch=3 --set policy.parallelism.dp_shard_size=1 --set policy.lora.enable=true -o train.yaml" in d.plan_step
    assert DIRECT_RUN in d.reason and "\n" not in d.reason and "AutoML leaves them out of its search" in d.reason
    automl = route(skill=SKILL, action="train", request="fine-tune it for 2 epochs")
    assert automl.route == "automl" and automl.plan_step == "" and "--automl-policy off" in automl.reason
    assert automl.fixed == [{"key": "train.epoch", "value": 2, "words": "2 epochs", "set": "train.epoch=2"}]
    assert route(skill=SKILL, action="train", request="the plan is to train it").route == "automl"  # a noun, no plan request
    assert route(skill=SKILL, action="evaluate", request="evaluate for 3 epochs").fixed == []


def test_the_route_stays_light_and_its_json_has_the_fixed_values():
    probe = ("import sys, io, contextlib\nfrom skillbank import cli\nout = io.StringIO()\nwith contextlib.redirect_stdout(out):\n"
             f"    cli.main(['route', '--skill', {SKILL!r}, '--action', 'train', '--request', {ISSUE!r}, '--json'])\n"
             "print(out.getvalue().strip())\nprint(' '.join(m for m in ('torch', 'transformers', 'cosmos_rl', 'optuna') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc, heavy = proc.stdout.split("\n")[:2]
    assert heavy.strip() == "" and json.loads(doc)["fixed"][0]["set"] == "train.epoch=3"
    assert json_out(skillbank("route", "--skill", SKILL, "--action", "train", "--request", ISSUE, "--json"))["route"] == "plan"


def test_a_submitted_study_leaves_the_fixed_keys_out_and_its_job_passes_search_on():
    """submit --action automl sizes the gate's disk over the same space (the user's 3 epochs, not up to 20) and the job's
    `skillbank automl` line carries --search."""
    from skillbank.platform.context import AutomlJob
    from skillbank.platform.submit import check_study

    spec = build_spec(SKILL, "train", ["epochs=3", "lora=true"]).spec
    job = AutomlJob(study="s", algorithm="bayesian", max_trials=4, metric="accuracy")
    assert check_study(job, SKILL, spec).shape.epochs in (None, 3)
    asked = AutomlJob(study="s", algorithm="bayesian", max_trials=4, metric="accuracy", search=("train.epoch",))
    assert check_study(asked, SKILL, spec).shape.epochs == 20 and asked.argv()[-2:] == ["--search", "train.epoch"]
