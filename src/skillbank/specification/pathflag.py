"""The --path-map flag as argparse sees it: commands register it without importing the spec models
(skillbank.specification.pathmap parses and applies the maps)."""

from __future__ import annotations

from typing import Any

FLAG = "--path-map"
HELP = ("LOCAL=REMOTE (repeatable): data and models are checked at LOCAL on this machine, every file written for the job "
        "names REMOTE (both absolute; the longest matching LOCAL wins)")


def add_argument(parser: Any) -> None:
    """The one --path-map flag every command that plans for another machine takes."""
    parser.add_argument(FLAG, dest="path_map", action="append", default=[], metavar="LOCAL=REMOTE", help=HELP)
