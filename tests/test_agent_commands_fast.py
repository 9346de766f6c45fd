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


OWN = {"route": "route", "spec": "spec", "preflight": "preflight", "schemas": "schemas", "validate": "validate"}
COMMAND_PROBE = """
import sys, io, contextlib
from skillbank import cli
with contextlib.redirect_stdout(io.StringIO()):
    try:
        cli.main({argv!r})
    except SystemExit:
        pass
print(" ".join(sorted(m for m in sys.modules if m.startswith("skillbank.commands."))))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["route", "--skill", SKILL, "--action", "train", "--request", "no HPO", "--json"],
        ["spec", "--skill", SKILL, "--action", "train", "--set", "epoch=1", "--json"],
        ["preflight", "--help"],
        ["schemas", "generate", "--check"],
        ["validate", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_a_fast_command_imports_no_other_command_module(argv):
    """skillbank.cli imports the module of the command that runs and no other (their parsers are not built)."""
    proc = subprocess.run([sys.executable, "-c", COMMAND_PROBE.format(argv=argv)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert loaded <= {f"skillbank.commands.{OWN[argv[0]]}", "skillbank.commands.flags"}, f"{argv[0]} imported {sorted(loaded)}"


def test_top_level_help_imports_no_command_module():
    proc = subprocess.run([sys.executable, "-c", COMMAND_PROBE.format(argv=["--help"])], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []


def test_the_lazy_parser_is_the_whole_parser():
    """What `skillbank --help` lists from cli's table, and each command's parser built alone, match the parser
    every module builds (cli.build_parser()): one help line per command, whichever way it is built."""
    import argparse

    from skillbank import cli

    def commands(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))

    whole = cli.build_parser()
    assert cli.build_parser("").format_help() == whole.format_help()
    assert list(commands(whole).choices) == list(cli.COMMANDS)
    for name in cli.COMMANDS:
        alone = commands(cli.build_parser(name))
        assert alone.choices[name].format_help() == commands(whole).choices[name].format_help(), name
    assert len(cli.command_modules()) == len(set(module for module, _ in cli.COMMANDS.values()))


def test_the_parser_imports_no_spec_model():
    """Building the whole parser imports no pydantic (the spec models): `skillbank gaps`, `compare` and the
    like start without it (the --path-map flag lives in commands.flags for that)."""
    probe = "import sys; from skillbank.cli import build_parser; build_parser(); print('pydantic' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
