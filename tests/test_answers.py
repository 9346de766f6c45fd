"""The answer rules (skillbank.scoring.answers): one table of accepted and rejected answers per
parser, each run through the same SQL that metrics, `skillbank score` and `skillbank gaps` use."""

from __future__ import annotations

import pytest

from skillbank.scoring.answers import extract_answer, extract_answers, normalize_answer, score_rows, unscorable

# ---- 1. extraction --------------------------------------------------------------------------------

R1 = "<think>\nThe ball rolls left.\n</think>\n\n<answer>\nLeft\n</answer>"  # Cosmos-Reason1's format
EXTRACT_REASONING = [
    (R1, "Left"),
    ("<think>a</think>\n\n<answer>\nyes", "yes"),  # closing tag missing
    ("<think>a</think> blah <answer> B </answer> trailing text", "B"),  # text around ignored
    ("<answer>first</answer> then <answer>second</answer>", "second"),  # the last block
    ("<think>x</think>\n\nYes, it is.", "Yes, it is."),  # Cosmos-Reason2: after the last </think>
    ("<think>a</think><think>b</think> no", "no"),
    ("<think>x</think><answer></answer>", ""),  # extracted but empty: unparseable when scored
    ("Yes", None),  # no tags: not extractable in reasoning mode
    ("<think>I never finish thinking", None),
    ("<ANSWER>yes</ANSWER>", None),  # tags are matched in lower case, as the prompts write them
    (None, None),
]


@pytest.mark.parametrize(("response", "answer"), EXTRACT_REASONING)
def test_extract_reasoning(response, answer):
    assert extract_answer(response, "reasoning") == answer


def test_extract_short_is_the_whole_response():
    assert extract_answers([" Yes ", R1, None], "short") == ["Yes", R1, ""]
    with pytest.raises(ValueError, match="answer_type"):
        extract_answer("x", "long")


# ---- 2. normalisation -------------------------------------------------------------------------------

NORMALIZE = [
    ("Yes.", "yes"),
    ("  YES!  ", "yes"),
    ("No,", "no"),
    ("**yes**", "yes"),
    ('"left"', "left"),
    ("'quoted'", "quoted"),
    ("Turn\n  Left", "turn left"),
    ("Turn\tleft .", "turn left"),
    ("3.5", "3.5"),
    ("3.", "3"),
    ("a-b", "a-b"),
    (None, ""),
    (7, "7"),
    ("", ""),
    (" ... ", ""),
]


@pytest.mark.parametrize(("raw", "norm"), NORMALIZE)
def test_normalize(raw, norm):
    assert normalize_answer(raw) == norm


# ---- 3. yes / no ------------------------------------------------------------------------------------

YES_NO = [  # (answer, label or None = unparseable)
    ("yes", "yes"),
    ("Yes.", "yes"),
    ("Yes, there is a collision.", "yes"),
    ("NO", "no"),
    ("No, it is blue.", "no"),
    ("no-entry", "no"),  # a hyphen ends the word
    ("Yes, no collision happened.", "yes"),  # "no" here is not a second answer
    ("no, no", "no"),  # the same label twice
    ("Answer: yes", "yes"),
    ("The answer is no.", "no"),
    ("**Yes**", "yes"),
    ("yesterday", None),  # not the word yes
    ("nope", None),
    ("maybe", None),
    ("I think yes", None),  # the label must come first
    ("yes or no", None),  # both
    ("Yes/No", None),
    ("No, yes.", None),
    ("yes and no", None),
    ("", None),
    (None, None),
]


@pytest.mark.parametrize(("answer", "label"), YES_NO)
def test_yes_no(answer, label):
    rows = [{"gt": "yes", "response": answer}, {"gt": "no", "response": "no"}]
    scored = score_rows(rows)
    assert scored[0].kind == "yes_no"
    assert scored[0].answer == label
    assert scored[0].correct == (label == "yes")


# ---- 4. directions -----------------------------------------------------------------------------------

DIRECTIONS = [
    ("left", "left"),
    ("Left.", "left"),
    ("Right, clearly", "right"),
    ("straight ahead", "straight"),
    ("The answer is right", "right"),
    ("leftward", None),
    ("up", None),
    ("left or right", None),
    ("it turns left", None),
]


@pytest.mark.parametrize(("answer", "label"), DIRECTIONS)
def test_directions(answer, label):
    [scored] = score_rows([{"gt": "left", "response": answer}], "its_directionality")
    assert (scored.kind, scored.answer, scored.correct) == ("its_directionality", label, label == "left")


# ---- 5. multiple choice ----------------------------------------------------------------------------

QUESTIONS = {
    "lines": "What does the robot pick up?\nA) the red cup\nB) the blue plate\nC) the green bowl\nD) nothing",
    "parens": "What does the robot pick up? (A) the red cup (B) the blue plate (C) the green bowl (D) nothing",
    "dots": "What does the robot pick up?\nA. the red cup\nB. the blue plate\nC. the green bowl\nD. nothing",
}
MCQ = [  # (answer, option or None)
    ("B", "B"),
    ("b", "B"),
    ("(B)", "B"),
    ("B.", "B"),
    ("B)", "B"),
    ("B: the blue plate", "B"),
    ("B) the blue plate", "B"),
    ("(B) the blue plate.", "B"),
    ("Answer: B", "B"),
    ("The answer is B", "B"),
    ("The final answer is (B).", "B"),
    ("**B**", "B"),
    ("the blue plate", "B"),  # the option's text
    ("The blue plate.", "B"),
    ("D", "D"),
    ("E", None),  # not an option
    ("B or C", None),  # two options
    ("B, C", None),
    ("(B)/(C)", None),
    ("B because it is blue", None),  # a letter needs a delimiter before more text
    ("a blue plate", None),  # "a" the article, not option A
    ("blue", None),  # part of an option's text
    ("", None),
]


@pytest.mark.parametrize("layout", sorted(QUESTIONS))
@pytest.mark.parametrize(("answer", "option"), MCQ)
def test_mcq(answer, option, layout):
    [scored] = score_rows([{"question": QUESTIONS[layout], "gt": "B", "response": answer}], "mcq")
    assert (scored.kind, scored.answer, scored.truth, scored.correct) == ("mcq", option, "B", option == "B")


MCQ_TRUTHS = [  # a ground truth names an option like an answer does, else it is an input error (None)
    ("B", "B"),
    ("(C)", "C"),
    ("the green bowl", "C"),
    ("Nothing", "D"),
    ("purple", None),
    ("F", None),
]


@pytest.mark.parametrize(("gt", "option"), MCQ_TRUTHS)
def test_mcq_ground_truths(gt, option):
    [scored] = score_rows([{"question": QUESTIONS["lines"], "gt": gt, "response": "A"}], "mcq")
    assert scored.truth == option


@pytest.mark.parametrize("question", [
    "Which one? Answer with a letter.",  # no options
    "Which one?\nB) red\nC) blue",  # options must start at A
    "Which one?\nA) red",  # one option is not a choice
])
def test_mcq_questions_without_options(question):
    [scored] = score_rows([{"question": question, "gt": "A", "response": "A"}], "mcq")
    assert scored.truth is None and scored.answer is None


# ---- 6. exact match and groups ---------------------------------------------------------------------

EXACT = [
    ("red", "Red.", True),
    ("turn left", "Turn  left", True),
    ("3", "3.0", False),
    ("red", "red ball", False),
    ("red", "", None),  # empty: unparseable
]


@pytest.mark.parametrize(("gt", "answer", "correct"), EXACT)
def test_exact_match(gt, answer, correct):
    [scored] = score_rows([{"gt": gt, "response": answer}])
    assert scored.kind == "exact_match"
    assert scored.correct is bool(correct)
    assert (scored.answer is None) == (correct is None)


def test_yes_no_is_decided_per_family_and_dataset():
    rows = [
        {"gt": "yes", "response": "Yes, it is.", "family": "yn"},
        {"gt": "red", "response": "red", "family": "colour"},
        {"gt": "no", "response": "No.", "family": "colour"},  # colour is not all yes/no: exact match
        {"gt": "no", "response": "no, it is not", "dataset": "av"},
    ]
    scored = score_rows(rows)
    assert [(s.kind, s.answer, s.correct) for s in scored] == [
        ("yes_no", "yes", True), ("exact_match", "red", True), ("exact_match", "No.", True), ("yes_no", "no", True),
    ]


def test_unscorable_lists_rows_to_retry():
    rows = [
        {"question": "Is it red?", "gt": "yes", "response": "<think>a</think><answer>yes</answer>"},
        {"question": "Is it red?", "gt": "no", "response": "<think>still thinking"},
        {"question": "Is it red?", "gt": "no", "response": "<think>a</think><answer>perhaps</answer>"},
        {"question": "Is it red?", "gt": "yes", "response": "<answer></answer>"},
    ]
    assert unscorable(rows, "", "reasoning") == [1, 2, 3]
    assert unscorable(rows, "", "short") == [0, 1, 2, 3]
    assert unscorable([], "", "short") == []
