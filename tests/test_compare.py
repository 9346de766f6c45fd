"""`skillbank compare` (issue 28 item 1) and the training-overlap check (item 3).

Known values on hand-made results (exact McNemar 6 vs 0, Newcombe's published paired example, Holm),
then a real tiny run: the tiny Qwen2.5-VL trained 2 steps on the demo set (conftest), evaluated on a
held-out set that also holds 3 of its training clips under new names, against the untrained model made to
answer "yes" (a generation_config sequence_bias, as tests/test_evaluate.py does; no GPU, no stand-in).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import local_train_spec
from helpers import json_out, skillbank
from skillbank.cli import main
from skillbank.scoring.stats import holm, mcnemar_exact_interval, mcnemar_sample_size, newcombe_paired, wilson


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(rows))
    return folder


def _rows(verdicts: list[bool], family: str = "yes_no", start: int = 0) -> list[dict]:
    """Yes/no results whose correctness follows `verdicts` (the truth is yes; a wrong answer says no)."""
    return [{"video_id": f"v{start + i}", "question": "Is it red? Answer yes or no.", "gt": "yes", "response": "yes" if ok else "no",
             "family": family} for i, ok in enumerate(verdicts)]


def test_exact_mcnemar_6_vs_0_and_holm_over_families(tmp_path):
    # family f1: 6 items A right / B wrong, 4 both right; family f2: 2 vs 1 discordant, 5 both right
    a = _rows([True] * 10, "f1") + _rows([True, True, False] + [True] * 5, "f2", start=100)
    b = _rows([False] * 6 + [True] * 4, "f1") + _rows([False, False, True] + [True] * 5, "f2", start=100)
    proc = skillbank("compare", str(_write(tmp_path / "a", a)), str(_write(tmp_path / "b", b)), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json_out(proc)
    f1, f2, overall = doc["families"]["f1"], doc["families"]["f2"], doc["overall"]
    assert (f1["n"], f1["a_correct"], f1["b_correct"], f1["a_only"], f1["b_only"]) == (10, 10, 4, 6, 0)
    assert f1["p_value"] == 0.03125 and f1["p_value_one_sided"] == 0.015625  # the known value
    assert f2["p_value"] == 1.0 and (f2["a_only"], f2["b_only"]) == (2, 1)
    # Holm over the two families: 0.03125 * 2, and max(1.0, ...) = 1
    assert f1["p_adjusted"] == 0.0625 and f2["p_adjusted"] == 1.0
    assert f1["a_ci95"] == [round(x, 6) for x in wilson(10, 10)] and f1["b_ci95"] == [round(x, 6) for x in wilson(4, 10)]
    assert f1["diff"] == 0.6 and f1["diff_ci95"] == [round(x, 6) for x in newcombe_paired(4, 6, 0, 0)]
    assert overall["n"] == 18 and (overall["a_only"], overall["b_only"]) == (8, 1) and doc["group_by"] == "family"
    assert doc["only_in_a"] == {"count": 0, "items": []} and doc["clean"] is None
    assert doc["training_overlap"]["a"]["checked"] is False  # hand-made results: no metrics.json, no recipe
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["results.json"]  # nothing written into the inputs


def test_compare_imports_nothing_heavy(tmp_path):
    """An agent-facing command: no torch / transformers / cosmos_rl / optuna at any point of a comparison."""
    import subprocess
    import sys

    from helpers import ROOT

    a, b = _write(tmp_path / "a", _rows([True, False])), _write(tmp_path / "b", _rows([False, False]))
    probe = ("import sys\nfrom skillbank.cli import main\n"
             f"rc = main(['compare', {str(a)!r}, {str(b)!r}, '--json'])\n"
             "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'cosmos_rl', 'optuna') if m in sys.modules), file=sys.stderr)\n"
             "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "HEAVY []" in proc.stderr, proc.stderr


def test_newcombe_published_example_through_the_command(tmp_path):
    # Newcombe 1998 (Stat Med 17:2635) Table II (a): 36 both right, 12 A only, 2 B only, 0 neither -> 0.0569 to 0.3404
    a = _rows([True] * 48 + [False] * 2)
    b = _rows([True] * 36 + [False] * 12 + [True] * 2)
    doc = json_out(skillbank("compare", str(_write(tmp_path / "a", a)), str(_write(tmp_path / "b", b)), "--json",
                             "--out", str(tmp_path / "table.md")))
    low, high = doc["overall"]["diff_ci95"]
    assert (round(low, 4), round(high, 4)) == (0.0569, 0.3404) and doc["overall"]["diff"] == 0.2
    table = (tmp_path / "table.md").read_text()
    assert doc["markdown"] == str(tmp_path / "table.md")
    exact = doc["overall"]["diff_ci95_exact"]  # Clopper-Pearson of 12 of 14 discordant pairs, as a difference: (2 psi - 1) * 14 / 50
    assert exact == [round(x, 6) for x in mcnemar_exact_interval(12, 2, 50)] and exact[0] > 0
    assert doc["overall"]["n_for_power_0_8"] == mcnemar_sample_size(12, 2, 50) and doc["overall"]["disagreement"] is None
    assert ("| **all** | 50 | 0.960 [0.865, 0.989] | 0.760 [0.626, 0.857] | +0.200 [+0.057, +0.340] | +0.200 [+0.040, +0.270] | 12 | 2 "
            "| 0.0129 | — | 53 |") in table


def test_tiny_p_values_stay_exact_and_a_disagreement_is_explained(tmp_path):
    # f1: 30 vs 0 discordant pairs (p = 2 * 0.5**30 = 1.86e-9, not 0.0); f2: 5 vs 0 (p = 0.0625, while
    # Newcombe's interval excludes 0)
    a = _rows([True] * 100, "f1") + _rows([True] * 40, "f2", start=200)
    b = _rows([False] * 30 + [True] * 70, "f1") + _rows([False] * 5 + [True] * 35, "f2", start=200)
    proc = skillbank("compare", str(_write(tmp_path / "a", a)), str(_write(tmp_path / "b", b)), "--json", "--out", str(tmp_path / "t.md"))
    doc = json_out(proc)
    f1, f2 = doc["families"]["f1"], doc["families"]["f2"]
    assert f1["p_value"] == 2 * 0.5**30 and f1["p_value_one_sided"] == 0.5**30 and f1["p_adjusted"] == 2 * f1["p_value"]
    assert doc["overall"]["p_value"] == 2 * 0.5**35 > 0
    assert f2["p_value"] == 0.0625 and f2["diff_ci95"][0] > 0 and f2["diff_ci95_exact"][0] < 0  # Newcombe excludes 0, the exact one not
    assert f2["disagreement"].startswith("Newcombe's interval [+0.013, +0.261] excludes 0 but the exact McNemar p is 0.0625")
    assert "cannot give a two-sided p below 0.0625" in f2["disagreement"] and f1["disagreement"] is None
    assert f2["n_for_power_0_8"] == mcnemar_sample_size(5, 0, 40) == 61
    table = (tmp_path / "t.md").read_text()
    assert "| f1 | 100 |" in table and "| <0.0001 | <0.0001 | 24 |" in table  # the text rounds, the JSON does not
    assert "Where the intervals disagree:" in table and "- f2: Newcombe's interval" in table


def test_clean_rows_per_family(tmp_path):
    """A recorded training overlap of B: the clean comparison repeats every family without those items."""
    a = _rows([True] * 10, "f1") + _rows([True] * 8, "f2", start=100)
    b = _rows([False] * 6 + [True] * 4, "f1") + _rows([False, False] + [True] * 6, "f2", start=100)
    _write(tmp_path / "a", a)
    _write(tmp_path / "b", b)
    (tmp_path / "b" / "metrics.json").write_text(json.dumps({"training_overlap": {
        "checked": True, "count": 3, "ids": ["v0", "v1", "v100"], "training_data": "/data/train/annotations.json"}}))
    doc = json_out(skillbank("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", "--out", str(tmp_path / "t.md")))
    clean = doc["clean"]
    assert clean["excluded"] == 3 and clean["n"] == 15 and (clean["a_only"], clean["b_only"]) == (5, 0)
    f1, f2 = clean["families"]["f1"], clean["families"]["f2"]
    assert (f1["n"], f1["a_only"], f2["n"], f2["a_only"]) == (8, 4, 7, 1)
    assert [f1["p_adjusted"], f2["p_adjusted"]] == holm([f1["p_value"], f2["p_value"]])
    table = (tmp_path / "t.md").read_text()
    assert "### Without the 3 paired item(s) either model trained on (15 left)" in table
    clean_table = table.split("### Without", 1)[1]
    assert "| f1 | 8 |" in clean_table and "| f2 | 7 |" in clean_table and "| **all** | 15 |" in clean_table


def test_items_on_one_side_are_counted_and_named(tmp_path):
    a = _rows([True] * 4) + [{"video_id": "extra", "question": "Q?", "gt": "yes", "response": "yes"}]
    b = _rows([True, False, True, True])
    doc = json_out(skillbank("compare", str(_write(tmp_path / "a", a)), str(_write(tmp_path / "b", b)), "--json"))
    assert doc["paired"] == 4 and doc["only_in_a"] == {"count": 1, "items": [{"video_id": "extra", "question": "Q?"}]}
    proc = skillbank("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert proc.returncode == 0 and "Only in A: 1 item(s), not compared: `extra`" in proc.stdout


def test_bad_input_exits_2_naming_the_file_and_the_fix(tmp_path):
    good = _write(tmp_path / "good", _rows([True, False]))
    proc = skillbank("compare", str(tmp_path / "missing"), str(good), "--json")
    doc = json_out(proc)
    assert proc.returncode == 2 and doc["error"]["where"] == f"A ({tmp_path / 'missing'})" and doc["error"]["fix"]
    other = _write(tmp_path / "other", [{**r, "gt": "no"} if r["video_id"] == "v1" else r for r in _rows([True, False])])
    proc = skillbank("compare", str(good), str(other))
    assert proc.returncode == 2 and "video_id 'v1'" in proc.stderr and "'yes' in A and 'no' in B" in proc.stderr and "fix:" in proc.stderr
    twice = _write(tmp_path / "twice", _rows([True]) + _rows([False]))
    proc = skillbank("compare", str(twice), str(good))
    assert proc.returncode == 2 and "more than once" in proc.stderr and str(twice) in proc.stderr
    disjoint = _write(tmp_path / "disjoint", _rows([True], start=50))
    proc = skillbank("compare", str(good), str(disjoint))
    assert proc.returncode == 2 and "share no item" in proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["results.json"] * 4  # nothing written


# ---- a real tiny run ----------------------------------------------------------------------------


def force_answer(model_dir: Path, target: Path, word: str) -> Path:
    """A copy of the model whose greedy answer is always `word` (generation_config sequence_bias)."""
    from transformers import AutoTokenizer

    shutil.copytree(model_dir, target)
    tok = AutoTokenizer.from_pretrained(target)
    ids = tok.encode(word, add_special_tokens=False)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    path = target / "generation_config.json"
    config = json.loads(path.read_text())
    config["sequence_bias"] = [[ids[: k + 1], 100.0] for k in range(len(ids))] + [[[*ids, eos], 200.0]]
    path.write_text(json.dumps(config))
    return target


@pytest.fixture(scope="module")
def run(tiny_model_dir, demo_dataset_dir, tmp_path_factory):
    """The tiny model trained 2 steps (1 rank), and a held-out set: the 9 val clips plus 3 training clips
    copied under new names (byte-identical held-out clips, the leak the issue found by hand)."""
    from skillbank.specification.train import TrainSpec
    from skillbank.training.local.launch import train_local
    from skillbank.runs import layout

    root = tmp_path_factory.mktemp("compare")
    spec = TrainSpec.model_validate(local_train_spec(tiny_model_dir, demo_dataset_dir, root / "out", {
        "train.max_num_steps": 2, "train.ckpt.save_freq": 100, "validation.enable": False}, dp_shard_size=1))
    trained = layout.safetensors_dir(Path(train_local(spec, log=lambda line: None)["run_dir"]), 2)
    held = root / "heldout"
    (held / "videos").mkdir(parents=True)
    records = []
    val = json.loads((demo_dataset_dir / "val" / "annotations.json").read_text())
    train = json.loads((demo_dataset_dir / "train" / "annotations.json").read_text())
    for i, record in enumerate(val + train[:3]):
        src = demo_dataset_dir / ("val" if i < len(val) else "train") / record["video"]
        shutil.copyfile(src, held / "videos" / f"held_{i:03d}.mp4")
        records.append({**record, "id": f"held_{i:03d}", "video": f"videos/held_{i:03d}.mp4"})
    (held / "annotations.json").write_text(json.dumps(records))
    yes_model = force_answer(tiny_model_dir, root / "base_yes", "yes")
    return {"trained": trained, "held": held, "records": records, "yes": yes_model, "root": root, "train_ids": [r["id"] for r in records[9:]]}


def _config(run, out: Path, model: Path, **evaluation) -> Path:
    import tomli_w

    config = {"results_dir": str(out), "num_gpus": 0, "model": {"model_name": str(model)},
              "dataset": {"annotation_path": str(run["held"] / "annotations.json")},
              "evaluation": {"batch_size": 12, **evaluation}, "generation": {"max_tokens": 4, "max_retries": 0}}
    path = out.parent / f"{out.name}.toml"
    path.write_text(tomli_w.dumps(config))
    return path


def _evaluate(capsys, config: Path) -> tuple[int, dict]:
    code = main(["evaluate", "--config", str(config), "--quiet", "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_evaluate_finds_training_clips_by_content_and_compare_reports_both_sides(run, tmp_path, capsys):
    code, a = _evaluate(capsys, _config(run, tmp_path / "trained", run["trained"]))
    assert code == 0
    block = a["training_overlap"]
    assert block["checked"] and block["count"] == 3 and block["ids"] == run["train_ids"] and block["by_video"] == 3
    assert block["by_question_answer"] == 0 and block["templated_questions"] > 0  # "Is the ball red?" is a template, not evidence
    assert any(w.startswith("training overlap: 3 of 12 evaluated items") for w in a["warnings"])
    assert json.loads((tmp_path / "trained" / "metrics.json").read_text())["training_overlap"]["ids"] == run["train_ids"]
    code, b = _evaluate(capsys, _config(run, tmp_path / "yes", run["yes"]))
    assert code == 0 and b["training_overlap"] == {"checked": False, "count": 0, "ids": [], "training_data": None, "excluded": False,
                                                    "reason": "the model has no recipe (skillbank_recipe.json), so its training data is unknown"}

    code = main(["compare", str(tmp_path / "yes"), str(tmp_path / "trained"), "--json", "--out", str(tmp_path / "cmp.md")])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["paired"] == 12 and set(doc["families"]) == {"colour", "directionality", "yes_no"}
    yes_truths = sum(r["conversations"][1]["value"] == "yes" for r in run["records"])
    trained_right = json.loads((tmp_path / "trained" / "metrics.json").read_text())["correct"]
    assert doc["overall"]["a_correct"] == yes_truths and doc["overall"]["b_correct"] == trained_right
    assert doc["training_overlap"]["b"]["paired_items"] == 3 and doc["training_overlap"]["a"]["checked"] is False
    assert doc["clean"]["n"] == 9 and doc["clean"]["excluded"] == 3
    assert sum(f["n"] for f in doc["clean"]["families"].values()) == 9  # the clean rows, family by family
    assert "### Without the 3 paired item(s) either model trained on (9 left)" in (tmp_path / "cmp.md").read_text()

    # only the clean items, when asked: results.json and the scores leave the 3 out, metrics.json still names them
    code, clean = _evaluate(capsys, _config(run, tmp_path / "clean", run["trained"], exclude_training_overlap=True))
    assert code == 0 and clean["num_samples"] == 9 and clean["training_overlap"]["excluded"] is True
    assert clean["training_overlap"]["ids"] == run["train_ids"]
    assert not {r["video_id"] for r in json.loads((tmp_path / "clean" / "results.json").read_text())} & set(run["train_ids"])


def test_training_data_not_here_is_said_and_preflight_warns(run, tmp_path, capsys):
    moved = tmp_path / "moved"
    shutil.copytree(run["trained"], moved)
    recipe = json.loads((moved / "skillbank_recipe.json").read_text())
    recipe["training_data"]["annotation_path"] = "/nowhere/train/annotations.json"
    (moved / "skillbank_recipe.json").write_text(json.dumps(recipe))
    code, doc = _evaluate(capsys, _config(run, tmp_path / "out", moved))
    assert code == 0 and doc["training_overlap"]["checked"] is False
    assert "/nowhere/train/annotations.json is not on this machine" in doc["training_overlap"]["reason"]
    assert any(w.startswith("training overlap not checked: the recipe's training data /nowhere") for w in doc["warnings"])

    code = main(["preflight", "--skill", "tao-finetune-cosmos-reason", "--action", "evaluate", "--spec",
                 str(_config(run, tmp_path / "pf", run["trained"])), "--gpus-per-node", "0", "--json"])
    report = json.loads(capsys.readouterr().out)
    found = [f for f in report["findings"] if f["check"] == "annotations.training_overlap"]
    assert code == 0 and found and found[0]["severity"] == "warning" and "3 of 12 evaluated items" in found[0]["message"]


def test_another_answer_type_than_the_recipe_sends_its_own_prompt_and_diagnoses_unparseable(run, tmp_path, capsys):
    from skillbank.specification.evaluate import COSMOS_REASON1_REASONING

    code, doc = _evaluate(capsys, _config(run, tmp_path / "r", run["trained"], answer_type="reasoning", limit=3))
    assert code == 0
    generation = doc["generation"]
    assert generation["system_prompt"] == COSMOS_REASON1_REASONING  # not the recipe's short-answer prompt
    assert doc["settings_from"]["dataset.system_prompt"] == "default"
    assert any("answer type's own prompt is sent" in w for w in doc["warnings"])
    assert doc["unparseable"] == 3
    assert any(w.startswith("3 of 3 answers are unparseable: they are read as reasoning answers but the model's recipe says it was "
                            "trained for short answers") for w in doc["warnings"])
    # a field, not only warnings: metrics.json names the causes; and the summary line on stdout says it
    codes = [c["code"] for c in doc["diagnosis"]["causes"]]  # (and "truncated": max_tokens 4 cuts every reply)
    assert codes[0] == "answer_type_not_the_recipes" and "no_reasoning_format" in codes
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["diagnosis"] == doc["diagnosis"]
    code = main(["evaluate", "--config", str(_config(run, tmp_path / "r2", run["trained"], answer_type="reasoning", limit=3)), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("accuracy 0.0000 on 3 samples, 3 unparseable (diagnosis: read as reasoning answers but the model "
                                        "was trained for short: set evaluation.answer_type = 'short'; metrics.json diagnosis)")
