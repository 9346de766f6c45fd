"""`skillbank evals list|prepare|grade|fixture|run`: agent evals graded by checks a program runs (skillbank.evals).

`list` and `grade` are agent-facing and light (no torch); prepare, fixture and run build workspaces (the tiny
model and the demo dataset come from the skillbank cache).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from skillbank.cli import COMMANDS
from skillbank.commands.flags import add_json, command_parser
from skillbank.errors import InputError

HELP = """\
Each skill's evals/evals.json holds tasks as a user would put them to an agent, each with checks a program
runs on the workspace the agent leaves (files, spec keys, job records, the answer in answer.md) and on its
transcript (which skillbank commands ran, with what, in what order). Check kinds: file, parses, key,
records, text, unchanged, code_lines, skillbank, preflight, job, ran, not_ran, order, number, any
(schemas/evals.schema.json; docs/development.md, "Agent evals").
  list      the evals (pending: an eval that needs a skillbank command not there yet)
  prepare   a fresh workspace for one eval: its files, the prompt, and a `skillbank` that records each call
            into DIR/.skillbank-transcript.jsonl (put the printed folder first on PATH)
  grade     one line per check; exit 0 when all pass, 1 when one fails, 2 for bad input
  fixture   the eval's known-good workspace (or --bad: the known-bad one), built by running the real commands
  run       an agent command over evals, each in a fresh workspace, graded: OUT/results.json, OUT/results.md
examples:
  skillbank evals list --skill tao-finetune-cosmos-reason
  skillbank evals prepare --skill tao-finetune-cosmos-reason --eval spec-lora-plan --workspace /tmp/ws
  skillbank evals grade --skill tao-finetune-cosmos-reason --eval spec-lora-plan --workspace /tmp/ws
  skillbank evals run --agent 'claude -p "$(cat {prompt_file})"' --skill tao-run-automl --out results/evals
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "evals", HELP)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    ls = verbs.add_parser("list", help="the evals of every skill (or one)")
    ls.add_argument("--skill", default=None, help="one skill's evals")
    add_json(ls, "print one JSON document {ok, evals: [{skill, id, question, expected_script, checks, pending}], count}")
    ls.set_defaults(run=run_list)

    pre = verbs.add_parser("prepare", help="build one eval's fresh workspace, prompt and recording shim")
    _one(pre)
    pre.add_argument("--workspace", required=True, help="a new (or empty) folder")
    add_json(pre, "print one JSON document {ok, workspace, prompt_file, path, transcript, bank}")
    pre.set_defaults(run=run_prepare)

    gr = verbs.add_parser("grade", help="grade a workspace: one line per check, exit 0 only when all pass")
    _one(gr)
    gr.add_argument("--workspace", required=True, help="the folder the agent worked in")
    gr.add_argument("--transcript", action="append", default=[], metavar="FILE",
                    help="the agent's own transcript too (JSONL with argv / command / message entries, or text with `$ ` command lines); repeatable")
    add_json(gr, "print one JSON document {ok, passed, failed, checks: [{id, kind, passed, why, note}], ...}")
    gr.set_defaults(run=run_grade)

    fx = verbs.add_parser("fixture", help="build the eval's known-good workspace (--bad: the known-bad one)")
    _one(fx)
    fx.add_argument("--workspace", required=True, help="a new (or empty) folder")
    fx.add_argument("--bad", action="store_true", help="the known-bad workspace (the good one with the eval's bad steps)")
    add_json(fx, "print one JSON document (prepare's, with fixture and the checks it should fail)")
    fx.set_defaults(run=run_fixture)

    rn = verbs.add_parser("run", help="run an agent command over evals, each in a fresh workspace, graded")
    rn.add_argument("--agent", required=True, metavar="CMD",
                    help="a shell command; {prompt_file}, {workspace}, {skill}, {eval_id} and {bank} are replaced (quoted). "
                    "It runs in the workspace with the recording skillbank first on PATH")
    rn.add_argument("--skill", default=None, help="only this skill's evals")
    rn.add_argument("--eval", dest="eval_id", default=None, help="only this eval")
    rn.add_argument("--timeout", type=float, default=1800.0, metavar="S", help="seconds per eval before the agent is stopped (default 1800)")
    rn.add_argument("--out", default="results/evals", metavar="DIR", help="workspaces and results (default results/evals); must not hold a previous run")
    add_json(rn, "print one JSON document (OUT/results.json's)")
    rn.set_defaults(run=run_run)


def _one(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skill", default=None, help="the eval's skill (optional when the id is unique)")
    parser.add_argument("--eval", dest="eval_id", required=True, help="the eval's id (`skillbank evals list`)")


def _entry(args: argparse.Namespace):
    from skillbank.evals.catalog import find

    entry = find(args.skill, args.eval_id)
    missing = entry.missing(set(COMMANDS))
    if missing:
        raise InputError(f"eval {entry.key} is pending: it needs `skillbank {' '.join(missing)}`, which this skillbank does not have",
                         where="--eval", fix="grade it once the command exists")
    return entry


def run_list(args: argparse.Namespace) -> int:
    from skillbank.evals.catalog import load

    entries = load(args.skill)
    rows = [{"skill": e.skill, "id": e.eval.id, "question": e.eval.question, "expected_script": e.eval.expected_script,
             "checks": [c.id for c in e.eval.checks], "pending": e.missing(set(COMMANDS))} for e in entries]
    if args.json:
        print(json.dumps({"ok": True, "evals": rows, "count": len(rows)}, indent=2))
        return 0
    for row in rows:
        state = f"  (pending: needs skillbank {' '.join(row['pending'])})" if row["pending"] else ""
        print(f"{row['skill']:<28} {row['id']:<32} {len(row['checks']):>2} checks{state}")
        print(f"    {row['question']}")
    print(f"{len(rows)} eval(s)")
    return 0


def _print_workspace(info: dict, as_json: bool, extra: dict | None = None) -> None:
    if as_json:
        print(json.dumps({"ok": True, **info, **(extra or {})}, indent=2))
        return
    print(f"workspace : {info['workspace']}")
    print(f"prompt    : {info['prompt_file']}")
    print(f"transcript: {info['transcript']}")
    print(f"export PATH={shlex.quote(info['path'])}:\"$PATH\"   # the recording skillbank first; then cd to the workspace")


def run_prepare(args: argparse.Namespace) -> int:
    from skillbank.evals.runner import prepare

    _print_workspace(prepare(_entry(args), Path(args.workspace)), args.json)
    return 0


def run_fixture(args: argparse.Namespace) -> int:
    from skillbank.evals.runner import fixture

    entry = _entry(args)
    info = fixture(entry, Path(args.workspace), bad=args.bad)
    expected = entry.eval.fixtures.bad_fails if args.bad else []
    _print_workspace(info, args.json, {"fixture": "bad" if args.bad else "good", "fails": expected})
    if not args.json:
        print(f"fixture   : {'bad' if args.bad else 'good'}; grading it should fail: {', '.join(expected) or 'nothing'}")
    return 0


def run_grade(args: argparse.Namespace) -> int:
    from skillbank.evals.grade import grade

    graded = grade(_entry(args), Path(args.workspace), [Path(t) for t in args.transcript])
    if args.json:
        print(json.dumps(graded.to_json(), indent=2))
    else:
        print("\n".join(graded.lines()))
    return 0 if graded.passed else 1


def run_run(args: argparse.Namespace) -> int:
    from skillbank.evals.catalog import load
    from skillbank.evals.runner import run

    entries = [e for e in load(args.skill) if args.eval_id in (None, e.eval.id)]
    if not entries:
        raise InputError("no eval matches", where="--skill / --eval", fix="`skillbank evals list` lists them")
    pending = [e.key for e in entries if e.missing(set(COMMANDS))]
    entries = [e for e in entries if not e.missing(set(COMMANDS))]
    out = Path(args.out)
    if (out / "results.json").exists():
        raise InputError(f"{out} holds a previous run", where="--out", fix="name a new folder")
    doc = run(entries, args.agent, out, args.timeout, pending)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for r in doc["results"]:
            print(f"{'PASS' if r['passed'] else 'FAIL'} {r['skill']}/{r['eval']} ({r['wall_s']:g} s)"
                  + (f": failed {', '.join(r['failed'])}" if r["failed"] else ""))
        print(f"{doc['passed']}/{doc['evals']} evals passed" + (f"; pending (skipped): {', '.join(pending)}" if pending else ""))
        print(f"wrote {out / 'results.json'} and {out / 'results.md'}")
    return 0 if doc["passed"] == doc["evals"] else 1
