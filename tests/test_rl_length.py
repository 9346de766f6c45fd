"""`skillbank spec --action rl` sets rollout.max_response_length from the data (skillbank.training.rl_length):
2 x the longest reference answer + 16 for short answers, plus a thinking budget when the rollouts reason;
counted with the start model's tokenizer when this machine has it, else estimated from characters. A value
the user sets is kept, with a note when it cuts the longest answer."""

from __future__ import annotations

import json
from pathlib import Path

from skillbank.cli import main
from skillbank.training import rl_length


def write_answers(path: Path, answers: list[str]) -> Path:
    records = [{"id": f"r{i}", "video": "v.mp4", "conversations": [{"from": "human", "value": "<video>\nWhat happens?"},
                                                                    {"from": "gpt", "value": a}]} for i, a in enumerate(answers)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    return path


SHORT = ("--set", "custom.answer_type=short", "--set", 'train.train_policy.reward_function={"exact_match": 1.0}')


def rl_spec(capsys, ann: Path, *argv: str) -> tuple[int, dict]:
    rc = main(["spec", "--action", "rl", "--set", f"annotation_path={ann}", "--set", f"media_path={ann.parent}", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_short_answers_get_a_short_cap_and_reasoning_a_thinking_budget(tmp_path, capsys):
    ann = write_answers(tmp_path / "a.json", ["yes", "no"] * 8 + ["left of the red car"])  # 19 characters: 7 tokens estimated
    rc, doc = rl_spec(capsys, ann, "--set", "start=/nowhere", *SHORT)
    assert rc == 0, doc
    [fit] = [f for f in doc["fitted"] if f["key"] == rl_length.KEY]
    assert (fit["from"], fit["to"]) == (2048, 2 * 7 + 16) and doc["spec"]["rollout"]["max_response_length"] == 30
    assert "the longest reference answer is 7 tokens (19 characters at 3 per token" in fit["why"] and "(short answers)" in fit["why"]
    assert (doc["plan"]["max_response_length"], doc["plan"]["longest_answer_tokens"]) == (30, 7)
    rc, doc = rl_spec(capsys, ann, "--set", "start=/nowhere")  # the template's answer_type: reasoning
    assert rc == 0 and doc["spec"]["rollout"]["max_response_length"] == 30 + rl_length.THINK_BUDGET
    assert main(["spec", "--action", "rl", "--set", f"annotation_path={ann}", "--set", "start=/nowhere", *SHORT]) == 0
    err = capsys.readouterr().err
    assert "fitted: rollout.max_response_length 2048 -> 30: the longest reference answer" in err and "each sample up to 30 tokens" in err


def test_a_value_the_user_sets_is_kept_with_a_note_when_it_cuts_answers(tmp_path, capsys):
    ann = write_answers(tmp_path / "a.json", ["a" * 90])  # 30 tokens estimated
    rc, doc = rl_spec(capsys, ann, "--set", "start=/nowhere", *SHORT, "--set", "rollout.max_response_length=20")
    assert rc == 0 and doc["spec"]["rollout"]["max_response_length"] == 20 and not [f for f in doc["fitted"] if f["key"] == rl_length.KEY]
    assert any(n.startswith("rollout.max_response_length 20 (yours, kept) is shorter than the longest reference answer (30 tokens)") and
               "76 would fit" in n for n in doc["notes"])
    rc, doc = rl_spec(capsys, ann, "--set", "start=/nowhere", *SHORT, "--set", "rollout.max_response_length=500")
    assert rc == 0 and doc["spec"]["rollout"]["max_response_length"] == 500 and not any(rl_length.KEY in n for n in doc["notes"])


def test_the_start_models_tokenizer_counts_the_answers(tmp_path, tiny_model_dir):
    from tokenizers import Tokenizer

    answer = "the car turns left at the second crossing"
    answers = rl_length.read_answers(str(write_answers(tmp_path / "a.json", ["yes", answer, answer, "no"])))
    assert answers.records == 4 and answers.longest == [answer, "yes", "no"]  # distinct, longest first
    tokens, how = rl_length.answer_tokens(answers.longest, str(tiny_model_dir))
    expected = len(Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json")).encode(answer, add_special_tokens=False).ids)
    assert (tokens, how) == (expected, "the start model's tokenizer")
    assert rl_length.answer_tokens(answers.longest, str(tmp_path))[1].endswith("no tokenizer.json of the start model here")
    assert rl_length.answer_tokens([], str(tiny_model_dir)) == (0, "no reference answers")
