"""`skillbank data`: get the user's data in (import), mend it (fix), describe it (stats).

argparse only at import; the work is in skillbank.intake (importer, fix, stats: PyAV loads when it probes).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from skillbank.commands.flags import add_assignments, add_json, add_skill, add_spec, command_parser, DEFAULT_SKILL
from skillbank.intake.detect import FORMATS
from skillbank.intake.fields import ANSWER_KEYS, QUESTION_KEYS, VIDEO_KEYS
from skillbank.intake.split import MAX_RAISED_SHARE, MIN_VAL_CLIPS

DESCRIPTION = """\
Get a dataset into the shape the skills take (LLaVA annotations with video_fps, one folder per split):
  skillbank data import SOURCE --out DIR     clip folders + label files, Hugging Face datasets, CSV / JSONL, LLaVA
  skillbank data fix ANNOTATIONS --out FILE  a corrected copy (video_fps / duration from the containers)
  skillbank data stats ANNOTATIONS           records, families, answers, clip lengths, vision tokens per sample
then: skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root DIR -o train.yaml
"""

IMPORT_DESCRIPTION = f"""\
Turn a dataset as users keep it into what `skillbank spec --dataset-root DIR` takes: DIR/train and DIR/val
(or the source's own splits; validation/valid/dev become val), each with annotations.json (LLaVA records)
whose clips are reachable from that folder, plus DIR/import.json. Media: by default one symlink per split,
DIR/<split>/source -> the source's clip folder (records say source/videos/...; clips elsewhere get a link
each under videos/); --copy-media copies each split's clips into DIR/<split>/videos/ (a folder that
travels alone). Clips embedded in a dataset (bytes) are written under DIR/<split>/videos/.

SOURCE kinds (detected and named in the report; --format forces one):
  clips   a folder of clips with one label file per clip, anywhere under it, matched by clip id (the file
          name up to its first dot): videos/seq001.front_wide.mp4 <-> metas/seq001.label.json. A label
          file is a JSON object or a list of objects (several questions on one clip); a .json with neither
          the question nor the answer key (dataset_info.json) is no label file: listed, not refused.
  hf      a Hugging Face dataset on disk: parquet shards (data/<split>-00000-of-00001.parquet) or a
          datasets save_to_disk folder (arrow). The video column holds a path (relative to the dataset
          or absolute) or the Video feature's {{bytes, path}} struct (the bytes are written under DIR).
  csv, jsonl   a table with a video column (paths relative to the file's folder); a `split` column is kept.
  llava   an existing LLaVA annotations.json: re-probed and re-split (paths relative to its folder).
  messages   conversations as LLaMA-Factory (sharegpt, OpenAI) and ms-swift keep them: a .json array or
          .jsonl lines with `messages` ({{role, content}}) or `conversations` ({{from, value}}) and the clip
          under `videos` (a list of one) or `video`; every turn is kept, the <video> tag may sit in any
          user turn. A file of the wrong shape is one error naming the keys found and the shape expected.
Question / answer / video keys are found among common names
  question: {", ".join(QUESTION_KEYS)}
  answer:   {", ".join(ANSWER_KEYS)}
  video:    {", ".join(VIDEO_KEYS)}
or set with --question-key / --answer-key / --video-key; two candidates present is an error naming them. Every other
key stays on the record (weather, time_of_day, family, ...).

Every record gets video_fps, duration, num_frames, width, height read from the clip's container headers
(PyAV, no frame decoded; in parallel, with a progress bar on a terminal).

Split: a source without splits (or with train only) gets val carved from train: --val-fraction of the
clips (cosmos-rl's rounding: at least 1), by a hash of (--seed, clip) so reruns agree, grouped by clip
(two questions on one clip never straddle train and val), stratified by the `family` key where records
carry one. Without --val-fraction: 10%, raised to @@MIN@@ clips (the fewest whose accuracy a 95% interval
pins to +-15 points) where that is at most a quarter of the clips (from @@FROM@@ clips on). A --val-fraction
you pass is kept as given. A val split under @@MIN@@ clips (carved or the source's) is warned about with its
counts and the fix (a separate held-out set, or --val-fraction 0 and evaluate on a held-out set). Warnings
print as `warning: ...` with one `  fix: ...` line per fix, before the closing `next:` line (under --json:
the warnings list, each "WHAT; fix: FIX; fix: FIX").
The clip lengths of each split ("train clip lengths: 1.6-2.0 s, median 1.9 over 12 clip(s), 23 s in all") count
one length per clip, num_frames / video_fps as the records carry them: `skillbank data stats` on that split's
annotations.json prints the same figures.

Bad input (a label naming a missing clip, an unreadable or corrupt clip, a malformed label file, an
item without question or answer, a duplicate id): exit 2 naming each (file, id, reason), nothing
written. --skip-bad writes the rest and lists what it skipped in import.json. SOURCE is never written to.
DIR is built in a temp folder beside it and renamed into place; an existing non-empty DIR is refused
unless --force (which replaces it whole).

import.json: source, out, reader, detected_by, fields, counts {{read, records, clips, skipped}},
splits {{<split>: {{records, clips, annotations, from, clip_lengths {{clips, duration_s {{min, median, max}},
total_duration_s}}}}}}, split_rule, val_size {{clips, records, of_clips,
min_clips, ci95_half_width, enough, warning}}, warnings, families, media, fps_histogram, duration_histogram,
skipped [{{where, id, reason}}], reader_notes, next.
--json prints that document plus "paths" (out, import_json, <split>_annotations) as one JSON document.

examples:
  skillbank data import /data/av --out /data/av-llava                     # videos/ + metas/*.label.json
  skillbank data import /data/av --out DIR --clip-glob '*.camera_front_wide_120fov.mp4' --answer-key gt
  skillbank data import ~/hf/my_video_qa --out DIR                         # data/train-*.parquet, data/test-*.parquet
  skillbank data import ./saved_dataset --out DIR --question-key prompt    # Dataset.save_to_disk folder
  skillbank data import labels.csv --out DIR --video-key clip_path --media-root /mnt/clips
  skillbank data import qa.jsonl --out DIR --skip-bad --json
  skillbank data import old/annotations.json --out DIR --val-fraction 0.2 --seed 1 --copy-media
  skillbank data import chats.json --out DIR --media-root /mnt/clips     # messages + videos, several turns
then: skillbank data stats DIR/train/annotations.json
      skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root DIR -o train.yaml
""".replace("@@MIN@@", str(MIN_VAL_CLIPS)).replace("@@FROM@@", str(math.ceil(MIN_VAL_CLIPS / MAX_RAISED_SHARE)))

FIX_DESCRIPTION = """\
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

FIX_EXAMPLES = """\
examples:
  skillbank data fix data/train/annotations.json --out data/train/annotations.fixed.json
  skillbank data fix ann.json --media-root /mnt/videos --out ann.fixed.json --skip-bad --json
then point the spec at the copy (or move it over the original yourself) and run preflight again.
"""

STATS_DESCRIPTION = """\
Describe a LLaVA annotations file and what its samples cost, without a model or a GPU:
  records       count, video and image records
  families      records per `family` key (records without one count under "")
  answers       per family: distinct answers and the most common ones, over every gpt turn (stripped)
  turns         answers in all, per turn index (per_turn {"1": first answers, "2": ...}),
                records_by_answers, multi_turn_records
  clips         lengths (duration_s min/median/max and total_duration_s over distinct_with_length clips:
                one per clip, num_frames / video_fps, the figures `data import` printed) and frame rates,
                from the records' duration / num_frames / video_fps; --probe reads the containers' headers (PyAV, no decode) for video
                records that state no length or no video_fps
  tokens        vision + text tokens per sample at the spec's vision settings (tokens_per_sample: samples,
                mean, min, max, bound; preflight reports the same as stats.tokens_per_sample), the longest
                clip a typical sample fits (longest_safe_clip_s), records over policy.model_max_length
--spec takes a train or rl spec (its custom.vision, policy.model_max_length, system prompt and the vision
patch of policy.model_name_or_path: its config.json, the model table's for a model the bank ships, e.g. 14
for Qwen2.5-VL, 16 for Qwen3-VL); without it, the train template's settings; --set KEY=VALUE changes either
for this count (`--set model=Qwen/Qwen2.5-VL-3B-Instruct`, `--set fps=4`). Paths in the
records are resolved as preflight resolves them: relative to --media-root, default the annotations'
folder. Nothing is written.
"""

STATS_EXAMPLES = """\
examples:
  skillbank data stats data/train/annotations.json
  skillbank data stats data/train/annotations.json --spec train.yaml --probe --json
  skillbank data stats data/train/annotations.json --set model=Qwen/Qwen2.5-VL-3B-Instruct   # that model's patch (14)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "data", DESCRIPTION)
    parser.set_defaults(run=lambda _args: parser.print_help() or 2)
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    for add in (_register_import, _register_fix, _register_stats):  # the order `skillbank data --help` lists them
        add(sub)


def _verb(sub: argparse._SubParsersAction, name: str, help: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """One `skillbank data` subcommand's parser (its texts shown as written)."""
    return sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)


def _register_import(sub: argparse._SubParsersAction) -> None:
    p = _verb(sub, "import", "import clips + labels, a HF dataset, CSV / JSONL or LLaVA into DIR/<split>/", IMPORT_DESCRIPTION)
    p.add_argument("source", metavar="SOURCE", help="the dataset folder or file (only read)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (new or empty; see --force)")
    p.add_argument("--format", choices=FORMATS, help="force a reader instead of detecting one")
    p.add_argument("--question-key", metavar="KEY", help="the label / column holding the question")
    p.add_argument("--answer-key", metavar="KEY", help="the label / column holding the answer")
    p.add_argument("--video-key", metavar="KEY", help="the column holding the clip (hf, csv, jsonl)")
    p.add_argument("--media-root", type=Path, metavar="DIR",
                   help="where relative video paths resolve (default: the dataset folder, or the file's folder)")
    p.add_argument("--clip-glob", default="*", metavar="GLOB",
                   help="clips: only video files whose name matches, e.g. one camera of several (default: *)")
    p.add_argument("--val-fraction", type=float, metavar="F",
                   help=f"share of clips carved from train into val when the source has no val split, kept as given (0: none; "
                        f"default: 0.1, raised to {MIN_VAL_CLIPS} clips where that is at most a quarter of them)")
    p.add_argument("--seed", type=int, default=0, help="seed of the carve (default: 0)")
    p.add_argument("--copy-media", action="store_true", help="copy clips into DIR/<split>/videos/ instead of linking the source's clip folder")
    p.add_argument("--skip-bad", action="store_true", help="import what can be imported; list the rest in import.json")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty DIR (the old one is removed)")
    p.add_argument("--workers", type=int, metavar="N", help="probing processes (default: one per CPU, at most 8)")
    add_json(p, "print import.json's content plus paths as one JSON document")
    p.set_defaults(run=run_import)


def _register_fix(subparsers: argparse._SubParsersAction) -> None:
    p = _verb(subparsers, "fix", "a corrected copy: video_fps / duration (and missing num_frames, width, height) from the containers",
              FIX_DESCRIPTION, FIX_EXAMPLES)
    p.add_argument("annotations", metavar="ANNOTATIONS", help="the LLaVA annotations file to read (never modified)")
    p.add_argument("--out", required=True, metavar="FILE", help="the corrected copy to write (not the input)")
    p.add_argument("--media-root", default="", metavar="DIR", help="folder the records' video paths are relative to (default: the annotations' folder)")
    p.add_argument("--skip-bad", action="store_true", help="leave records whose clip is missing or unreadable out of the copy (listed as skipped) instead of exiting 2")
    add_json(p, "print one JSON document {ok, records, written, changed_records, fields, skipped, ...}")
    p.set_defaults(run=run_fix)


def _register_stats(subparsers: argparse._SubParsersAction) -> None:
    p = _verb(subparsers, "stats", "records, families, answers, clip lengths, vision tokens per sample at a spec's settings",
              STATS_DESCRIPTION, STATS_EXAMPLES)
    p.add_argument("annotations", metavar="ANNOTATIONS", help="the LLaVA annotations file (a JSON array; read only)")
    add_spec(p, "train or rl spec whose vision settings count the tokens (default: the train template's)", metavar="SPEC")
    add_skill(p, "model skill the spec belongs to (default: %(default)s)", default=DEFAULT_SKILL)
    add_assignments(p, "dotted key or shorthand override of the spec (or the template) for this count (repeatable; as `skillbank spec --set`)")
    p.add_argument("--probe", action="store_true", help="read clip lengths and frame rates from the containers for records that state none")
    p.add_argument("--media-root", default="", metavar="DIR", help="folder the records' video paths are relative to, for --probe (default: the annotations' folder)")
    add_json(p, "print one JSON document {ok, records, families, answers, clips, vision, tokens_per_sample, ...}")
    p.set_defaults(run=run_stats)


def run_import(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError, warning_lines
    from skillbank.intake.importer import Options, run_import
    from skillbank.intake.report import lengths_text

    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}", where="--workers", fix="pass e.g. 4, or leave it out")
    if args.val_fraction is not None and not 0 <= args.val_fraction < 1:
        raise InputError(f"--val-fraction must be in [0, 1), got {args.val_fraction}", where="--val-fraction", fix="pass e.g. 0.1")
    opts = Options(Path(args.source), Path(args.out), format=args.format, question_key=args.question_key, answer_key=args.answer_key,
                   video_key=args.video_key, media_root=args.media_root, clip_glob=args.clip_glob, val_fraction=args.val_fraction,
                   seed=args.seed, copy_media=args.copy_media, skip_bad=args.skip_bad, force=args.force, workers=args.workers)
    doc = run_import(opts)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    c = doc["counts"]
    print(f"imported {c['records']} record(s) on {c['clips']} clip(s) from {doc['source']} (reader {doc['reader']}: {doc['detected_by']})")
    for name, s in doc["splits"].items():
        print(f"  {name:<6} {s['records']:>7} records {s['clips']:>7} clips  {doc['out']}/{s['annotations']}  ({s['from']})")
    print(f"  fps: {', '.join(f'{k} x{v}' for k, v in doc['fps_histogram'].items())}")
    for name, s in doc["splits"].items():
        if s["clip_lengths"]["clips"]:
            print(f"  {name} clip lengths: {lengths_text(s['clip_lengths'])}")
    if c["skipped"]:
        print(f"  skipped {c['skipped']} item(s) (--skip-bad): listed in {doc['paths']['import_json']}")
    for warning in doc["warnings"]:  # on stdout, before the closing line (under --json: in the document only)
        print("\n".join(warning_lines(warning)))
    print(f"next: {doc['next']}")
    return 0


def run_fix(args: argparse.Namespace) -> int:
    from skillbank.intake.fix import fix_file

    report = fix_file(args.annotations, args.out, media=args.media_root, skip_bad=args.skip_bad, )
    if args.json:
        print(json.dumps({"ok": True, **report.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(report.lines()))
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from skillbank.intake.stats import data_stats, lines, load_budget, spec_path_arg

    budget = load_budget(args.skill, spec_path_arg(args.spec), args.assignments)
    doc = data_stats(args.annotations, budget, probe=args.probe, media=args.media_root)
    if args.json:
        print(json.dumps({"ok": True, **doc}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(lines(doc)))
    return 0
