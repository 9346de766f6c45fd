"""`skillbank spec --action rl` fills the answer format, system prompt, vision settings, task type and
rewards from the start model's skillbank_recipe.json (user > recipe > template), and warns as evaluate
does where a setting the user gave differs from the recipe's. The start folders here hold a config.json
and a recipe only: spec reads no weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillbank import recipe
from skillbank.cli import main
from test_run_arithmetic import write_records

SHORT_PROMPT = "Answer with one word."


def start_model(tmp_path: Path, name: str = "sft", **fields) -> Path:
    folder = tmp_path / name / "safetensors" / "step_40"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    doc = {"recipe_version": 1, "base_model": "tiny", "model_type": "qwen2_5_vl",
           "vision": {"fps": None, "nframes": 8, "total_pixels": 12544, "max_pixels": None},
           "system_prompt": SHORT_PROMPT, "answer_type": "short", "task_type": "its_directionality"}
    recipe.write(folder, {**doc, **fields})
    return folder


def rl_spec(capsys, tmp_path: Path, *argv: str) -> tuple[int, dict]:
    ann = write_records(tmp_path / "prompts" / "annotations.json", 64)
    rc = main(["spec", "--action", "rl", "--set", f"annotation_path={ann}", "--set", f"media_path={tmp_path}", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_a_short_answer_start_gets_its_own_format_and_no_format_reward(tmp_path, capsys):
    start = start_model(tmp_path)
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={start}")
    assert rc == 0, doc
    custom, policy = doc["spec"]["custom"], doc["spec"]["train"]["train_policy"]
    assert (custom["answer_type"], custom["system_prompt"], custom["task_type"]) == ("short", SHORT_PROMPT, "its_directionality")
    assert (custom["vision"]["fps"], custom["vision"]["nframes"], custom["vision"]["total_pixels"]) == (None, 8, 12544)
    assert policy["reward_function"] == {"exact_match": 1.0}  # the template's 0.9 + format 0.1, format dropped, the total kept
    assert doc["recipe"]["path"].endswith(recipe.RECIPE_FILE) and doc["recipe"]["warnings"] == []
    assert doc["recipe"]["sources"]["custom.answer_type"] == "recipe" and doc["recipe"]["sources"]["train.train_policy.reward_function"] == "recipe"
    assert any("format reward" in n and "dropped" in n for n in doc["notes"])


def test_what_the_user_sets_wins_with_evaluates_warning(tmp_path, capsys):
    start = start_model(tmp_path)
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={start}", "--set", "fps=4", "--set", "custom.system_prompt=Be brief.")
    assert rc == 0, doc
    vision = doc["spec"]["custom"]["vision"]
    assert (vision["fps"], vision["nframes"], doc["spec"]["custom"]["system_prompt"]) == (4.0, None, "Be brief.")
    assert doc["spec"]["custom"]["answer_type"] == "short"  # not set: still the recipe's
    warnings = doc["recipe"]["warnings"]
    assert warnings[0].startswith("custom.vision.fps 4.0 differs from the start model's recipe (") and warnings[0].endswith("(trained at nframes 8)")
    assert warnings[1].startswith("custom.system_prompt 'Be brief.' differs from the start model's recipe (")
    assert warnings[1].endswith("('Answer with one word.')")
    # text mode prints them as warnings, and what came from the recipe
    assert main(["spec", "--action", "rl", "--set", f"start={start}", "--set", "fps=4"]) == 0
    err = capsys.readouterr().err
    assert "warning: custom.vision.fps 4.0 differs" in err and "from the start model's recipe (" in err and "custom.answer_type" in err


def test_a_reasoning_start_keeps_the_format_reward_when_its_prompt_asks_for_it(tmp_path, capsys):
    prompt = "Think in <think></think>, then answer in <answer></answer>."
    start = start_model(tmp_path, answer_type="reasoning", system_prompt=prompt, vision={"fps": 2.0, "nframes": None, "total_pixels": None, "max_pixels": None})
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={start}")
    assert rc == 0 and doc["spec"]["train"]["train_policy"]["reward_function"] == {"exact_match": 0.9, "format": 0.1}
    assert doc["spec"]["custom"]["answer_type"] == "reasoning" and doc["spec"]["custom"]["system_prompt"] == prompt
    other = start_model(tmp_path, "plain", answer_type="reasoning", system_prompt="Explain, then answer.")
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={other}")
    assert rc == 0 and doc["spec"]["train"]["train_policy"]["reward_function"] == {"exact_match": 1.0}


def test_rewards_and_answer_type_the_user_sets_are_kept(tmp_path, capsys):
    start = start_model(tmp_path)
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={start}", "--set", "custom.answer_type=reasoning")
    assert rc == 0 and doc["spec"]["custom"]["answer_type"] == "reasoning"
    # the recipe's short-answer prompt asks for no <think>/<answer>: format would pay nothing
    assert doc["spec"]["train"]["train_policy"]["reward_function"] == {"exact_match": 1.0}
    assert any(w.startswith("custom.answer_type 'reasoning' differs from the start model's recipe") and w.endswith("('short')")
               for w in doc["recipe"]["warnings"])
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={start}", "--set", 'train.train_policy.reward_function={"single_choice": 1.0}')
    assert rc == 0 and doc["spec"]["train"]["train_policy"]["reward_function"] == {"single_choice": 1.0}


@pytest.mark.parametrize("start", ["hf_model://nvidia/Cosmos-Reason2-8B", "bare"])
def test_without_a_recipe_the_template_stays_and_a_note_says_so(tmp_path, capsys, start):
    if start == "bare":
        (tmp_path / "bare").mkdir()
        start = str(tmp_path / "bare")
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={start}")
    assert rc == 0 and doc["spec"]["custom"]["answer_type"] == "reasoning" and doc["recipe"] == {"path": None, "sources": {}, "warnings": []}
    assert doc["spec"]["train"]["train_policy"]["reward_function"] == {"exact_match": 0.9, "format": 0.1}
    assert any("has no skillbank_recipe.json" in n and "custom.answer_type=short" in n for n in doc["notes"])


def test_a_start_named_by_its_cluster_path_is_read_here(tmp_path, capsys):
    start = start_model(tmp_path / "laptop")
    remote = str(start).replace(str(tmp_path / "laptop"), "/lustre/me")
    rc, doc = rl_spec(capsys, tmp_path, "--set", f"start={remote}", "--path-map", f"{tmp_path / 'laptop'}=/lustre/me")
    assert rc == 0, doc
    assert doc["spec"]["policy"]["model_name_or_path"] == remote and doc["spec"]["custom"]["answer_type"] == "short"
