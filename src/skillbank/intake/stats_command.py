"""`skillbank data stats`: argparse only here; the work is in skillbank.intake.stats (no torch, PyAV only for --probe)."""

from __future__ import annotations

import argparse
import json

DESCRIPTION = """\
Describe a LLaVA annotations file and what its samples cost, without a model or a GPU:
  records       count, video and image records
  families      records per `family` key (records without one count under "")
  answers       per family: distinct answers and the most common ones (first gpt turn, stripped)
  clips         lengths (duration_s min/median/max, total) and frame rates, from the records' duration /
                num_frames / video_fps; --probe reads the containers' headers (PyAV, no decode) for video
                records that state no length or no video_fps
  tokens        vision + text tokens per sample at the spec's vision settings (tokens_per_sample: samples,
                mean, min, max, bound; preflight reports the same as stats.tokens_per_sample), the longest
                clip a typical sample fits (longest_safe_clip_s), records over policy.model_max_length
--spec takes a train or rl spec (its custom.vision, policy.model_max_length, system prompt and the patch
size of policy.model_name_or_path's family); without it, the train template's settings. Paths in the
records are resolved as preflight resolves them: relative to --media-root, default the annotations'
folder. Nothing is written.
"""

EXAMPLES = """\
examples:
  skillbank data stats data/train/annotations.json
  skillbank data stats data/train/annotations.json --spec train.yaml --probe --json
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "stats",
        help="records, families, answers, clip lengths, vision tokens per sample at a spec's settings",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("annotations", metavar="ANNOTATIONS", help="the LLaVA annotations file (a JSON array; read only)")
    p.add_argument("--spec", metavar="SPEC", help="train or rl spec whose vision settings count the tokens (default: the train template's)")
    p.add_argument("--skill", default="tao-finetune-cosmos-reason", help="model skill the spec belongs to (default: %(default)s)")
    p.add_argument("--probe", action="store_true", help="read clip lengths and frame rates from the containers for records that state none")
    p.add_argument("--media-root", default="", metavar="DIR", help="folder the records' video paths are relative to, for --probe (default: the annotations' folder)")
    p.add_argument("--json", action="store_true", help="print one JSON document {ok, records, families, answers, clips, vision, tokens_per_sample, ...}")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.intake.stats import data_stats, lines, load_budget, spec_path_arg

    budget = load_budget(args.skill, spec_path_arg(args.spec))
    doc = data_stats(args.annotations, budget, probe=args.probe, media=args.media_root)
    if args.json:
        print(json.dumps({"ok": True, **doc}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(lines(doc)))
    return 0
