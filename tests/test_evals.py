"""Agent evals (skills/*/*/evals/evals.json, skillbank.evals): every eval's known-good workspace passes every check
and its known-bad one fails exactly the checks it names, so each eval is shown able to fail; `skillbank evals`
list / prepare / grade / run on real workspaces; the transcript readers and the recording shim.

The fixtures are built once per session, by running the real commands (the shared tiny model and demo dataset
from conftest, dry runs, one evaluation of 9 clips on the tiny model), several evals at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from skillbank.cli import COMMANDS
from skillbank.evals import catalog, steps
from skillbank.evals.checks import CHECKS
from skillbank.evals.grade import grade
from skillbank.evals.runner import fixture, prepare
from skillbank.evals.transcript import from_shell, read
from skillbank.evals.workspace import Workspace
from skillbank.specification import evals as spec

from helpers import ROOT, SKILL, json_out, skillbank

ENTRIES = catalog.load()
GRADED = [e for e in ENTRIES if not e.missing(set(COMMANDS))]
PENDING = [e for e in ENTRIES if e.missing(set(COMMANDS))]


def _kinds(union: Any) -> set[str]:
    members = union.__args__[0].__args__  # Annotated[Union[...], Field] -> the members
    return {m.model_fields["kind"].annotation.__args__[0] for m in members}


def test_every_skill_ships_evals_and_30_in_all():
    folders = catalog.skill_folders()
    assert all((f / "evals" / "evals.json").is_file() for f in folders)
    by_skill = {f.name: sum(e.skill == f.name for e in ENTRIES) for f in folders}
    assert all(n >= 3 for n in by_skill.values()), by_skill
    assert len(GRADED) >= 30, by_skill
    assert all(e.eval.expected_skill == e.skill for e in ENTRIES)


def test_every_kind_has_one_implementation():
    assert set(CHECKS) == _kinds(spec.Check)
    assert set(steps.STEPS) == _kinds(spec.Step)


def test_every_check_kind_is_used_and_shown_failing():
    """Across the bank's evals each check kind appears, and each fails in some known-bad fixture."""
    used = {c.kind for e in ENTRIES for c in spec.walk(e.eval.checks)}
    failing = {c.kind for e in GRADED for c in e.eval.checks if c.id in e.eval.fixtures.bad_fails}
    assert used == set(CHECKS), set(CHECKS) - used
    assert failing >= set(CHECKS) - {"any"}, set(CHECKS) - {"any"} - failing


# ---- the fixtures of every eval, graded ------------------------------------------------------------------


def _build(entry: catalog.Entry, root: Path) -> dict[str, Any]:
    started = time.perf_counter()
    runs: dict = {}
    fixture(entry, root)
    good = grade(entry, root, runs=runs)
    steps.apply(entry.eval.fixtures.bad, Workspace(root, entry), agent=True)
    bad = grade(entry, root, runs=runs)
    return {"good": good, "bad": bad, "seconds": time.perf_counter() - started}


@pytest.fixture(scope="session")
def fixtures_graded(tmp_path_factory, tiny_model_dir, demo_dataset_dir) -> dict[str, Any]:
    """Every graded eval's good and bad workspaces, built side by side (the assets cached first, one build each)."""
    from skillbank.assets.demo_dataset import build_demo_dataset
    from skillbank.assets.tiny_model import build_tiny_model

    for step in {(type(s), s.model_dump_json(exclude={"out"})): s for e in GRADED for s in e.eval.setup}.values():
        if isinstance(step, spec.DemoDatasetStep):
            build_demo_dataset(None, records=step.records, seed=step.seed, progress=False)
        elif isinstance(step, spec.TinyModelStep):
            build_tiny_model(None, family=step.family, seed=step.seed)
    base = tmp_path_factory.mktemp("evals")
    slow_first = sorted(GRADED, key=lambda e: e.eval.id not in ("maintainer-regenerate", "plan-described", "spec-lora-plan", "evaluate-tiny"))
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) + 1)) as pool:
        futures = {e.key: pool.submit(_build, e, base / e.skill / e.eval.id) for e in slow_first}
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("key", [e.key for e in GRADED])
def test_good_fixture_passes_and_bad_fixture_fails_the_named_checks(fixtures_graded, key):
    entry = next(e for e in GRADED if e.key == key)
    built = fixtures_graded[key]
    good, bad = built["good"], built["bad"]
    assert good.passed, "\n".join(good.lines())
    assert set(bad.failed) == set(entry.eval.fixtures.bad_fails), "\n".join(bad.lines())


def test_pending_evals_wait_for_their_command():
    """An eval that needs a command not there yet (`skillbank models add`) is listed as pending and not graded."""
    for entry in PENDING:
        assert entry.eval.requires and all(c not in COMMANDS for c in entry.missing(set(COMMANDS)))
    listed = json_out(skillbank("evals", "list", "--json"))
    assert listed["count"] == len(ENTRIES)
    assert {r["id"] for r in listed["evals"] if r["pending"]} == {e.eval.id for e in PENDING}
    for entry in PENDING:
        proc = skillbank("evals", "grade", "--skill", entry.skill, "--eval", entry.eval.id, "--workspace", str(ROOT))
        assert proc.returncode == 2 and "pending" in proc.stderr


# ---- the command line ------------------------------------------------------------------------------------


def test_prepare_then_grade_from_the_command_line(tmp_path, demo_dataset_dir):
    """prepare writes the workspace, the prompt and the shim; the shim records the calls; grade prints one
    line per check and exits 1 on a failure, 0 when all pass; bad input exits 2."""
    ws = tmp_path / "ws"
    info = json_out(skillbank("evals", "prepare", "--skill", SKILL, "--eval", "spec-edit-copy", "--workspace", str(ws), "--json"))
    assert Path(info["prompt_file"]).read_text().count("train2.yaml") == 1 and (ws / "train.yaml").is_file()
    shim = Path(info["path"]) / "skillbank"
    proc = subprocess.run([str(shim), "spec", "--from", "train.yaml", "--set", "epochs=2", "-o", "train2.yaml"], cwd=ws,
                          capture_output=True, text=True, env={**os.environ, "SKILLBANK_EVAL_NESTED": ""})
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((ws / ".skillbank-transcript.jsonl").read_text().splitlines()[-1])
    assert entry["argv"][:2] == ["spec", "--from"] and entry["exit"] == 0 and entry["cwd"] == str(ws.resolve())

    half = skillbank("evals", "grade", "--eval", "spec-edit-copy", "--workspace", str(ws))
    assert half.returncode == 1
    lines = half.stdout.splitlines()
    assert len(lines) == 7 and lines[1].startswith("FAIL lr (key): train2.yaml train.optm_lr = ")
    assert "PASS original-unchanged" in half.stdout

    subprocess.run([str(shim), "spec", "--from", "train2.yaml", "--set", "learning_rate=5e-5", "-o", "train2.yaml"], cwd=ws, check=True,
                   capture_output=True)
    done = json_out(skillbank("evals", "grade", "--eval", "spec-edit-copy", "--workspace", str(ws), "--json"))
    assert done["passed"] and done["failed"] == [] and len(done["checks"]) == 6

    assert skillbank("evals", "grade", "--eval", "no-such-eval", "--workspace", str(ws)).returncode == 2
    assert skillbank("evals", "grade", "--eval", "spec-edit-copy", "--workspace", str(tmp_path / "nowhere")).returncode == 2
    assert skillbank("evals", "prepare", "--eval", "spec-edit-copy", "--workspace", str(ws)).returncode == 2  # not a fresh folder


AGENT = """#!/bin/bash
# Stands in for an LLM coding agent: it takes the known-good steps of spec-edit-copy and a wrong answer to
# data-stats, with `skillbank` from PATH (the recording shim `evals run` puts first), as an agent's shell would.
set -e
prompt="$1"; cd "$2"
case "$3" in
  spec-edit-copy)
    grep -q "Make train2.yaml from it" "$prompt"
    skillbank spec --from train.yaml --set epochs=2 --set learning_rate=5e-5 -o train2.yaml ;;
  data-stats)
    skillbank data stats data/qa/train/annotations.json > /dev/null
    echo "Total: 24 records, yes_no: 9" > answer.md ;;
esac
"""


def test_run_grades_a_scripted_agent(tmp_path, demo_dataset_dir):
    """`evals run` with a shell script standing in for an LLM agent: each eval in a fresh workspace, graded,
    results.json and results.md; a wrong answer fails its check; an agent past --timeout is stopped."""
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    out = tmp_path / "out"
    proc = skillbank("evals", "run", "--agent", f"bash {agent} {{prompt_file}} {{workspace}} {{eval_id}}", "--skill", SKILL,
                     "--eval", "spec-edit-copy", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json_out(proc)
    (row,) = doc["results"]
    assert row["passed"] and row["agent_exit"] == 0 and not row["timed_out"] and row["wall_s"] > 0
    assert (out / SKILL / "spec-edit-copy" / "workspace" / "train2.yaml").is_file()
    assert json.loads((out / "results.json").read_text())["passed"] == 1
    assert "| tao-finetune-cosmos-reason | spec-edit-copy | PASS | 6/6 |" in (out / "results.md").read_text()

    wrong = skillbank("evals", "run", "--agent", f"bash {agent} {{prompt_file}} {{workspace}} {{eval_id}}", "--eval", "data-stats",
                      "--out", str(tmp_path / "out2"), "--json")
    assert wrong.returncode == 1
    (row,) = json_out(wrong)["results"]
    assert row["agent_exit"] == 0 and row["failed"] == ["yes-no"]  # 9 is not the 8 yes/no records data stats counts

    slow = skillbank("evals", "run", "--agent", "sleep 60", "--eval", "spec-edit-copy", "--timeout", "1", "--out", str(tmp_path / "out3"), "--json")
    (row,) = json_out(slow)["results"]
    assert slow.returncode == 1 and row["timed_out"] and row["wall_s"] < 30 and "two-epochs" in row["failed"]


def test_agent_transcripts_are_read_as_given(tmp_path):
    """An agent's own transcript: JSONL argv / shell command / message entries, or text with `$ ` lines."""
    assert from_shell("cd ws && PYTHONPATH=src python -m skillbank.cli plan --spec t.yaml --json | head; skillbank route --json") == [
        ["plan", "--spec", "t.yaml", "--json"], ["route", "--json"]]
    assert from_shell(".venv/bin/skillbank train --spec 'my spec.yaml' --dry-run") == [["train", "--spec", "my spec.yaml", "--dry-run"]]
    jsonl = tmp_path / "agent.jsonl"
    jsonl.write_text("\n".join(json.dumps(e) for e in [
        {"command": "skillbank submit --platform=slurm --spec train.yaml --dry-run", "exit": 0},
        {"role": "assistant", "content": [{"type": "text", "text": "The job is rendered."}]},
        {"argv": ["jobs", "status", "x"], "exit": 2}]))
    text = tmp_path / "agent.txt"
    text.write_text("I will plan first.\n$ skillbank plan --records 10\nDone.\n")
    got = read([jsonl, text, tmp_path / "missing.jsonl"])
    assert [i.argv[:3] for i in got.invocations] == [("submit", "--platform", "slurm"), ("jobs", "status", "x"), ("plan", "--records", "10")]
    assert got.final_message == "The job is rendered." and len(got.files) == 2


def test_grade_reads_an_agent_transcript_and_its_final_message(tmp_path, demo_dataset_dir):
    entry = catalog.find(None, "gaps-failures")
    info = prepare(entry, tmp_path / "ws")
    ws = Path(info["workspace"])
    subprocess.run([sys.executable, "-m", "skillbank.cli", "gaps", "--results-dir", "results/eval_ft", "--out", "gaps.parquet"], cwd=ws,
                   check=True, capture_output=True)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"command": "skillbank gaps --results-dir results/eval_ft --out gaps.parquet"}) + "\n"
                          + json.dumps({"message": "There are 2 failures."}) + "\n")
    graded = grade(entry, ws, [transcript])
    assert graded.passed, "\n".join(graded.lines())
    assert not grade(entry, ws).passed  # without it: no transcript, no answer


def test_reading_help_is_not_running_the_command(tmp_path, demo_dataset_dir):
    """An agent benchmark failed three evals for `skillbank submit --help`: a help call launches nothing."""
    entry = catalog.find(None, "automl-slurm-job")
    ws = Path(fixture(entry, tmp_path / "ws")["workspace"])
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"command": "skillbank submit --help"}) + "\n")
    graded = grade(entry, ws, [transcript])
    assert "nothing-launched" not in graded.failed, "\n".join(graded.lines())
    transcript.write_text(json.dumps({"command": "skillbank submit --platform slurm --spec train.yaml"}) + "\n")
    assert "nothing-launched" in grade(entry, ws, [transcript]).failed
    stats = catalog.find(None, "data-stats")  # and a help call does not count as having run the command
    ws2 = Path(prepare(stats, tmp_path / "ws2")["workspace"])  # nothing run in it
    transcript.write_text(json.dumps({"command": "skillbank data stats --help"}) + "\n")
    assert "used-data-stats" in grade(stats, ws2, [transcript]).failed


def test_evals_list_and_grade_import_nothing_heavy(tmp_path, demo_dataset_dir):
    entry = catalog.find(None, "spec-edit-copy")
    ws = Path(fixture(entry, tmp_path / "ws")["workspace"])
    probe = ("import sys, io, contextlib\nfrom skillbank import cli\nfor argv in ({!r}, {!r}):\n"
             "    with contextlib.redirect_stdout(io.StringIO()):\n        cli.main(argv)\n"
             "print(' '.join(m for m in ('torch', 'transformers', 'cosmos_rl', 'optuna') if m in sys.modules))")
    code = probe.format(["evals", "list", "--json"], ["evals", "grade", "--eval", "spec-edit-copy", "--workspace", str(ws), "--json"])
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_validate_names_a_broken_evals_file(tmp_path, monkeypatch):
    """skillbank validate checks every evals.json against schemas/evals.schema.json and the model's rules."""
    from skillbank.validate import checks

    assert checks.evals() == []
    folder = ROOT / "skills" / "platform" / "tao-run-platform"
    data = json.loads((folder / "evals" / "evals.json").read_text())
    data[0]["checks"][0]["kind"] = "jobb"
    data[1]["fixtures"]["bad_fails"] = ["no-such-check"]
    broken = tmp_path / "skills" / "platform" / "tao-run-platform"
    (broken / "evals").mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\nname: tao-run-platform\n---\n")
    (broken / "evals" / "evals.json").write_text(json.dumps(data))
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "evals.schema.json").write_text((ROOT / "schemas" / "evals.schema.json").read_text())
    monkeypatch.setattr(checks, "bank_root", lambda: tmp_path)
    found = checks.evals()
    assert any("evals.json: 0.checks.0:" in p for p in found), found
    assert any("no-such-check" in p for p in found), found
