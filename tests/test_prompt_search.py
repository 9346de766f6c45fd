"""Prompt search (`skillbank automl --action evaluate`): real evaluations of the tiny model on the
demo dataset's validation clips (a few records, 2 new tokens), real Optuna and SQLite storage."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from skillbank.automl.prompts import load_candidates
from skillbank.automl.report import validate_best_rec
from skillbank.cli import main
from skillbank.errors import InputError
from skillbank.specification.io import write_spec

PROMPTS = ["You are a helpful assistant. Answer the question about the video with a short answer.",
           "Reply in one word.", "You are a pirate. Speak like one."]


def eval_spec(tmp_path: Path, model: Path, data: Path, **extra) -> Path:
    spec = {
        "dataset": {"annotation_path": str(data / "val" / "annotations.json"), "media_dir": str(data / "val"), "system_prompt": PROMPTS[0]},
        "model": {"model_name": str(model), "dtype": "float32"},
        "evaluation": {"batch_size": 4, "limit": 3},
        "generation": {"max_tokens": 2},
        "num_gpus": 0,
        "results_dir": str(tmp_path / "results"),
        **extra,
    }
    return write_spec(tmp_path / "evaluate.yaml", spec)


def prompts_file(tmp_path: Path, prompts=PROMPTS) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(prompts) + "\n", encoding="utf-8")
    return path


def search(tmp_path: Path, spec: Path, *flags: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["automl", "--action", "evaluate", "--spec", str(spec), "--out", str(tmp_path / "study"), "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_three_candidates_best_rec_holdout_and_one_model_load(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    rec = search(tmp_path, spec, "--prompts", str(prompts_file(tmp_path)), "--holdout",
                 f"{demo_dataset_dir / 'val' / 'annotations.json'}:{demo_dataset_dir / 'val'}", capsys=capsys)
    validate_best_rec(rec)
    assert json.loads((tmp_path / "study" / "best_rec.json").read_text()) == rec
    assert rec["action"] == "evaluate" and rec["algorithm"] == "grid"  # bayesian over choices only: each once
    assert rec["trials"] == {"total": 3, "complete": 3, "pruned": 0, "failed": 0, "retried": 0, "trial_epochs": 0}
    assert rec["best_params"]["dataset.system_prompt"] in PROMPTS and rec["checkpoint_path"] is None
    assert rec["baseline"]["params"] == {"dataset.system_prompt": PROMPTS[0]} and rec["baseline"]["trial_number"] == 0
    held = rec["holdout"]
    assert held["records"] == 9 and 0.0 <= held["metric_value"] <= 1.0 and held["baseline_metric_value"] is not None
    assert rec["trial_number"] == rec["tied_trials"][0] and set(rec["tied_trials"]) <= {0, 1, 2}
    assert rec["cost"]["model_loads"] == 1  # three trials and the held-out runs share one load
    assert rec["cost"]["evaluations"] == 3 + (1 if rec["trial_number"] == 0 else 2)
    rows = pq.read_table(tmp_path / "study" / "trials.parquet").to_pylist()
    assert [json.loads(r["params"])["dataset.system_prompt"] for r in rows] == PROMPTS  # the grid, in the file's order
    trial_spec = (Path(rows[1]["trial_dir"]) / "spec.yaml").read_text()
    assert "Reply in one word." in trial_spec
    metrics = json.loads((Path(rows[2]["trial_dir"]) / "metrics.json").read_text())
    assert metrics["generation"]["system_prompt"] == PROMPTS[2] and metrics["num_samples"] == 3
    assert metrics["generation"]["own_system_turns"] == 0
    assert (tmp_path / "study" / "history.png").stat().st_size > 0
    assert rec["proxy"]["own_system_turns"] == 0 and held["own_system_turns"] == 0  # every record takes the candidate prompt


def test_a_candidate_the_spec_rejects_is_pruned_with_the_reason(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    rec = search(tmp_path, spec, "--choices", "vision.num_frames=1,4", capsys=capsys)
    validate_best_rec(rec)
    rows = pq.read_table(tmp_path / "study" / "trials.parquet").to_pylist()
    by_frames = {json.loads(r["params"])["vision.num_frames"]: r for r in rows}
    assert set(by_frames) == {None, 1, 4}  # the base value (null: fps) joins the choices as the baseline
    assert by_frames[1]["state"] == "PRUNED" and "num_frames" in by_frames[1]["pruned_reason"]
    assert by_frames[4]["state"] == "COMPLETE"  # setting num_frames cleared fps
    assert "num_frames: 4" in (Path(by_frames[4]["trial_dir"]) / "spec.yaml").read_text()
    assert rec["trials"]["pruned"] == 1 and rec["holdout"] is None


def test_choices_are_typed_so_the_base_value_is_one_of_them(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir, vision={"fps": 4.0})
    plan = search(tmp_path, spec, "--choices", "vision.fps=2,4", "--dry-run", capsys=capsys)
    assert plan["search_space"][0]["choices"] == [2.0, 4.0] and plan["max_trials"] == 2  # "4" is the base 4.0: no extra point


def test_resume_skips_finished_trials(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    prompts = str(prompts_file(tmp_path))
    first = search(tmp_path, spec, "--prompts", prompts, "--max-trials", "2", capsys=capsys)
    assert first["trials"]["complete"] == 2 and first["cost"]["evaluations"] == 2
    joined = search(tmp_path, spec, "--prompts", prompts, "--max-trials", "2", capsys=capsys)  # the same command joins the study
    assert joined["trials"]["complete"] == 2 and joined["cost"]["evaluations"] == 0  # nothing left to run
    again = search(tmp_path, spec, "--prompts", prompts, "--max-trials", "3", "--resume", capsys=capsys)
    assert again["trials"]["complete"] == 3 and again["cost"]["evaluations"] == 1  # only the grid point left
    rows = pq.read_table(tmp_path / "study" / "trials.parquet").to_pylist()
    assert [json.loads(r["params"])["dataset.system_prompt"] for r in rows] == PROMPTS


def test_dry_run_creates_nothing_and_names_the_commands(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir, dataset={
        "annotation_path": str(demo_dataset_dir / "val" / "annotations.json"), "media_dir": str(demo_dataset_dir / "val")})
    plan = search(tmp_path, spec, "--prompts", str(prompts_file(tmp_path)), "--dry-run", "--holdout",
                  str(demo_dataset_dir / "train" / "annotations.json"), capsys=capsys)
    assert not (tmp_path / "study").exists()
    assert plan["dry_run"] and plan["algorithm"] == "grid" and plan["max_trials"] == 4
    prompt = plan["search_space"][0]
    assert prompt["key"] == "dataset.system_prompt" and prompt["choices"] == [None, *PROMPTS]  # the base spec's null joins
    assert "--action evaluate" in plan["commands"]["start"] and plan["commands"]["resume"].endswith("--resume")
    assert any("4 combination(s)" in n for n in plan["notes"])


def test_records_with_their_own_system_turn_are_named_or_refused(tmp_path, tiny_model_dir, demo_dataset_dir, capsys):
    """A record opening with its own system turn keeps it, so no candidate reaches it: the plan warns with
    the counts when some proxy / held-out records do; when every proxy record does, exit 2, nothing created."""
    records = json.loads((demo_dataset_dir / "val" / "annotations.json").read_text())[:6]

    def annotations(name: str, own: int) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps([{**r, "conversations": [{"from": "system", "value": "Answer in French."}, *r["conversations"]]}
                                    if i < own else r for i, r in enumerate(records)]))
        return path

    dataset = {"annotation_path": str(annotations("proxy.json", 2)), "media_dir": str(demo_dataset_dir / "val")}
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir, dataset=dataset, evaluation={"limit": None})
    plan = search(tmp_path, spec, "--prompts", str(prompts_file(tmp_path)), "--dry-run", "--holdout",
                  f"{annotations('held.json', 1)}:{demo_dataset_dir / 'val'}", capsys=capsys)
    warnings = [n for n in plan["notes"] if n.startswith("warning:")]
    assert len(warnings) == 2 and "2 of 6 proxy record(s)" in warnings[0] and "1 of 6 held-out record(s)" in warnings[1]
    assert "reach only the other 4" in warnings[0]
    other = search(tmp_path, spec, "--choices", "vision.fps=2,4", "--dry-run", capsys=capsys)  # the system prompt is not searched
    assert other["notes"] and not [n for n in other["notes"] if n.startswith("warning:")]
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir, dataset={**dataset, "annotation_path": str(annotations("all.json", 6))})
    assert main(["automl", "--action", "evaluate", "--spec", str(spec), "--out", str(tmp_path / "study"),
                 "--prompts", str(prompts_file(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'all.json'} (dataset.annotation_path)") and "every candidate would score the same" in err
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize("flags, where", [
    (["--algorithm", "hyperband"], "--algorithm"),
    (["--metric", "val_loss"], "--metric"),
    (["--workers", "2"], "--workers"),
    (["--holdout", "/nonexistent/annotations.json"], "--holdout"),
    (["--algorithm", "grid", "--param", "generation.temperature", "--range", "generation.temperature=0:1"], "--algorithm grid"),
])
def test_bad_flags_exit_before_anything_is_created(tmp_path, tiny_model_dir, demo_dataset_dir, flags, where, capsys):
    spec = eval_spec(tmp_path, tiny_model_dir, demo_dataset_dir)
    assert main(["automl", "--action", "evaluate", "--spec", str(spec), "--out", str(tmp_path / "study"),
                 "--prompts", str(prompts_file(tmp_path)), *flags]) == 2
    assert capsys.readouterr().err.startswith(f"error: {where}")
    assert not (tmp_path / "study").exists()


def test_train_action_refuses_prompt_flags(tmp_path, capsys):
    assert main(["automl", "--spec", str(tmp_path / "train.yaml"), "--prompts", str(tmp_path / "p.txt")]) == 2
    assert "--prompts belongs to the prompt search" in capsys.readouterr().err


def test_candidates_from_lines_or_a_yaml_list(tmp_path):
    lines = tmp_path / "p.txt"
    lines.write_text("first prompt\n\n  second: with a colon  \n", encoding="utf-8")
    assert load_candidates(str(lines)) == ["first prompt", "second: with a colon"]
    listed = tmp_path / "p.yaml"
    listed.write_text("- null\n- |\n  two\n  lines\n", encoding="utf-8")
    assert load_candidates(str(listed)) == [None, "two\nlines"]
    lines.write_text("same\nsame\n", encoding="utf-8")
    with pytest.raises(InputError, match="repeats"):
        load_candidates(str(lines))
