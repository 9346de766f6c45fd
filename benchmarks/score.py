"""Scoring 1,000,000 reasoning results: `skillbank score` against a plain json.load + Python loop.

Target: `skillbank score` in <= 1/3 of the loop's wall time.

Data: a results.json (json.dump indent=2 style) of Cosmos-Reason-style yes/no answers, each response
~300 characters: `<think>\\n...\\n</think>\\n\\n<answer>\\nYes\\n</answer>`, with 10% in Cosmos-Reason2's
form (answer after </think>, no tags), 10% a sentence ("Yes, there is a collision."), 3% cut off
inside <think> (unparseable), 70% right. The loop is what one writes by hand, like the seed's
calculate_accuracy.py: json.load the file, then per row a regular expression for the answer, the
normalisation and the yes/no word rule (the same rules, so both count the same correct and
unparseable answers). Each method runs in a fresh interpreter (imports included); peak memory is
the child's own max RSS (ru_maxrss); CPU is the child's user + system time.

    .venv/bin/python benchmarks/score.py [--records 1000000] [--repeat 1] [--keep DIR]
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _child import child_argv, measure, size_args  # benchmarks/ is sys.path[0] when run as a script

WORDS = ("the", "car", "ahead", "brakes", "while", "a", "cyclist", "crosses", "from", "right", "lane", "stays", "clear",
         "and", "no", "vehicle", "touches", "another", "camera", "pans", "slowly", "left")
QUESTIONS = ("Is there a collision in the video? Answer yes or no.", "Does the ego vehicle stop before the crossing? Answer yes or no.")

ROW = """  {{
    "video_id": "{id}",
    "question": "{q}",
    "gt": "{gt}",
    "response": {r}
  }}"""

# The hand-written method: json.load, then a Python loop with the same rules.
LOOP = r"""
import json, re, sys
rows = json.load(open(sys.argv[1]))
ANSWER = re.compile(r"<answer>((?:(?!</answer>).)*)(?:</answer>|$)", re.S)
YES_NO = re.compile(r"^(yes|no)\b(?:(?: ?/ ?| or | and |[,.;] ?)(yes|no)(?:[^a-z0-9 ]|$))?")
ENDS = " \t\n\r\x0b\x0c.,!?;:'\"`*"
correct = unparseable = 0
for row in rows:
    response = row.get("response") or ""
    blocks = ANSWER.findall(response)
    if blocks:
        answer = blocks[-1]
    elif "</think>" in response:
        answer = response.rsplit("</think>", 1)[1]
    else:
        answer = None
    label = None
    if answer is not None:
        text = " ".join(answer.lower().split()).strip(ENDS)
        text = re.sub(r"^(?:the )?(?:final )?answer\b(?: is\b)?[\s.,!?;:'\"`*]*", "", text)
        m = YES_NO.match(text)
        if m and (m.group(2) in (None, m.group(1))):
            label = m.group(1)
    gt = " ".join(str(row.get("gt") or "").lower().split()).strip(ENDS)
    unparseable += label is None
    correct += label == gt
print(json.dumps({"total": len(rows), "correct": correct, "unparseable": unparseable}))
"""


def _think(rng: random.Random, chars: int = 240) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def generate(path: Path, records: int, seed: int = 0) -> dict[str, int]:
    """Write results.json; return the expected counts."""
    rng = random.Random(seed)
    thoughts = [_think(rng) for _ in range(4096)]  # drawn from a pool: generating stays fast
    expected = {"total": records, "correct": 0, "unparseable": 0}
    with open(path, "w") as f:
        f.write("[\n")
        block = []
        for i in range(records):
            gt = "yes" if rng.random() < 0.5 else "no"
            roll = rng.random()
            said = gt if rng.random() < 0.7 else ("no" if gt == "yes" else "yes")
            think = rng.choice(thoughts)
            if roll < 0.03:
                response = f"<think>\n{think}"  # cut off: unparseable
                expected["unparseable"] += 1
            else:
                answer = said.capitalize() if roll < 0.9 else ("Yes, there is a collision." if said == "yes" else "No, nothing hits.")
                response = (f"<think>\n{think}\n</think>\n\n{answer}" if roll < 0.13
                            else f"<think>\n{think}\n</think>\n\n<answer>\n{answer}\n</answer>")
                expected["correct"] += said == gt
            block.append(ROW.format(id=f"av_{i:07d}", q=QUESTIONS[i & 1], gt=gt, r=json.dumps(response)))
            if len(block) == 50_000 or i == records - 1:
                f.write(",\n".join(block) + ("\n" if i == records - 1 else ",\n"))
                block = []
        f.write("]\n")
    return expected


def ours_argv(data: Path) -> list[str]:
    body = ("import io, contextlib, json\nfrom skillbank.cli import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n    rc = main(argv)\nassert rc == 0, rc\n"
            "doc = json.loads(buf.getvalue())\n"
            "print(json.dumps({k: doc[k] for k in ('total', 'correct', 'unparseable')}))")
    return child_argv(body, "score", "--results-dir", str(data), "--answer-format", "reasoning",
            "--out", str(data / "metrics.json"), "--json")


def loop_argv(data: Path) -> list[str]:
    body = "sys.argv = [sys.argv[0], *argv]\nexec(compile(" + repr(LOOP) + ", 'json_load_loop', 'exec'), {'__name__': '__main__'})"
    return child_argv(body, str(data / "results.json"))


def main() -> None:
    args = size_args(__doc__)

    tmp = None if args.keep else tempfile.mkdtemp(prefix="score-bench-")
    data = Path(args.keep or tmp)
    data.mkdir(parents=True, exist_ok=True)
    try:
        expected_file = data / "expected.json"
        if not (data / "results.json").is_file():
            start = time.perf_counter()
            expected_file.write_text(json.dumps(generate(data / "results.json", args.records)))
            mb = (data / "results.json").stat().st_size / 1e6
            print(f"generated {args.records:,} reasoning results ({mb:,.0f} MB) in {time.perf_counter() - start:.1f} s")
        expected = json.loads(expected_file.read_text())
        names = ("json.load + Python loop", "skillbank score")
        runs: dict[str, list[tuple[float, float, float, str]]] = {name: [] for name in names}
        for _ in range(args.repeat):
            runs[names[0]].append(measure(loop_argv(data)))
            runs[names[1]].append(measure(ours_argv(data)))
        print(f"{'':26}{'wall s':>9}{'peak RSS GiB':>14}{'CPU s':>8}   counts")
        best = {}
        for name in names:
            best[name] = tuple(min(r[i] for r in runs[name]) for i in range(3))
            counts = json.loads(runs[name][-1][3])
            print(f"{name:26}{best[name][0]:>9.2f}{best[name][1]:>14.2f}{best[name][2]:>8.2f}   {counts}")
            if counts != expected:
                raise SystemExit(f"{name} counted {counts}, expected {expected}")
        (lw, lp, _), (ow, op, _) = best[names[0]], best[names[1]]
        ok = ow <= lw / 3
        print(f"skillbank score / loop: time {ow / lw:.3f} (target <= 0.333: {'met' if ok else 'NOT met'}), memory {op / lp:.3f}")
        sys.exit(0 if ok else 1)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
