"""Agent-facing commands import no torch, transformers, cosmos_rl or optuna (they answer in a fraction of a second)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT, SKILL

HEAVY = ("torch", "transformers", "cosmos_rl", "optuna")

PROBE = """
import sys, io, contextlib
from skillbank import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        cli.main({argv!r})
    except SystemExit:
        pass
print(" ".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["route", "--skill", SKILL, "--action", "train", "--request", "no HPO", "--json"],
        ["spec", "--skill", SKILL, "--action", "train", "--set", "epoch=1", "--json"],
        ["schemas", "generate", "--check"],
        ["validate", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_no_heavy_imports(argv):
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1:] in ([], [""]), f"{argv[0]} imported {proc.stdout.strip()}"


def test_plan_help_imports_nothing_heavy():
    """`skillbank plan` counts on the meta device (torch inside its run); its parser stays light."""
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=["plan", "--help"], heavy=HEAVY)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1:] in ([], [""]), f"plan --help imported {proc.stdout.strip()}"


def test_python_dash_m_skillbank_runs_the_cli():
    proc = subprocess.run([sys.executable, "-m", "skillbank", "route", "--skill", SKILL, "--action", "train",
                           "--request", "no HPO", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"automl_policy"' in proc.stdout


def test_the_parser_imports_no_spec_model():
    """Building the whole parser imports no pydantic (the spec models): `skillbank gaps`, `compare` and the
    like start without it (the --path-map flag lives in specification.pathflag for that)."""
    probe = "import sys; from skillbank.cli import build_parser; build_parser(); print('pydantic' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
