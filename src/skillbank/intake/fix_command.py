"""`skillbank data fix`: argparse only here; the work is in skillbank.intake.fix (PyAV loads when it probes)."""

from __future__ import annotations

import argparse
import json

DESCRIPTION = """\
Write a corrected copy of a LLaVA annotations file (a JSON array), every video record's clip metadata
read from its container's headers with PyAV (no frame decoded, clips probed in parallel):
  video_fps, duration          written when missing, not a positive number, or more than 5% off the file's
  num_frames, width, height    added where missing (a record with `frames` keeps it)
Every other key, the record order, image records and records without a video path are kept as they are.
Video paths are resolved as preflight resolves them: relative to --media-root, default the annotations'
folder (what an empty media_path means in a spec).

The input is never modified: the copy goes to --out (written atomically; --out may not be the input).
A clip that is missing or cannot be read stops the command with exit 2 (file, record index, id, reason)
and nothing is written; --skip-bad leaves those records out of the copy and lists them (skipped).
Prints what changed: per field, how many records gained it (added) or had it replaced (corrected), and
the first record indices; --json prints it as one JSON document.
"""

EXAMPLES = """\
examples:
  skillbank data fix data/train/annotations.json --out data/train/annotations.fixed.json
  skillbank data fix ann.json --media-root /mnt/videos --out ann.fixed.json --skip-bad --json
then point the spec at the copy (or move it over the original yourself) and run preflight again.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "fix",
        help="a corrected copy: video_fps / duration (and missing num_frames, width, height) from the containers",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("annotations", metavar="ANNOTATIONS", help="the LLaVA annotations file to read (never modified)")
    p.add_argument("--out", required=True, metavar="FILE", help="the corrected copy to write (not the input)")
    p.add_argument("--media-root", default="", metavar="DIR", help="folder the records' video paths are relative to (default: the annotations' folder)")
    p.add_argument("--skip-bad", action="store_true", help="leave records whose clip is missing or unreadable out of the copy (listed as skipped) instead of exiting 2")
    p.add_argument("--json", action="store_true", help="print one JSON document {ok, records, written, changed_records, fields, skipped, ...}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.intake.fix import fix_file

    report = fix_file(args.annotations, args.out, media=args.media_root, skip_bad=args.skip_bad, )
    if args.json:
        print(json.dumps({"ok": True, **report.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(report.lines()))
    return 0
