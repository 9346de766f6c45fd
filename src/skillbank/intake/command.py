"""`skillbank data`: get the user's data in (import), mend it (fix), describe it (stats).

One parser group; each subcommand registers itself from its own module (argparse only at import).
"""

from __future__ import annotations

import argparse

from skillbank.intake import fix_command, import_command, stats_command

DESCRIPTION = """\
Get a dataset into the shape the skills take (LLaVA annotations with video_fps, one folder per split):
  skillbank data import SOURCE --out DIR     clip folders + label files, Hugging Face datasets, CSV / JSONL, LLaVA
  skillbank data fix ANNOTATIONS --out FILE  a corrected copy (video_fps / duration from the containers)
  skillbank data stats ANNOTATIONS           records, families, answers, clip lengths, vision tokens per sample
then: skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root DIR -o train.yaml
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "data", help="get data in: import, fix, stats", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.set_defaults(run=lambda _args: parser.print_help() or 2)
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    for module in (import_command, fix_command, stats_command):  # the order `skillbank data --help` lists them
        module.register(sub)
