"""`skillbank data import SOURCE --out DIR`: the user's dataset -> DIR/<split>/annotations.json + videos/."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from skillbank.intake.detect import FORMATS
from skillbank.intake.fields import ANSWER_KEYS, QUESTION_KEYS, VIDEO_KEYS

DESCRIPTION = f"""\
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
carry one.

Bad input (a label naming a missing clip, an unreadable or corrupt clip, a malformed label file, an
item without question or answer, a duplicate id): exit 2 naming each (file, id, reason), nothing
written. --skip-bad writes the rest and lists what it skipped in import.json. SOURCE is never written to.
DIR is built in a temp folder beside it and renamed into place; an existing non-empty DIR is refused
unless --force (which replaces it whole).

import.json: source, out, reader, detected_by, fields, counts {{read, records, clips, skipped}},
splits {{<split>: {{records, clips, annotations, from}}}}, split_rule, families, media,
fps_histogram, duration_histogram, skipped [{{where, id, reason}}], reader_notes, next.
--json prints that document plus "paths" (out, import_json, <split>_annotations) as one JSON document.

examples:
  skillbank data import /data/av --out /data/av-llava                     # videos/ + metas/*.label.json
  skillbank data import /data/av --out DIR --clip-glob '*.camera_front_wide_120fov.mp4' --answer-key gt
  skillbank data import ~/hf/my_video_qa --out DIR                         # data/train-*.parquet, data/test-*.parquet
  skillbank data import ./saved_dataset --out DIR --question-key prompt    # Dataset.save_to_disk folder
  skillbank data import labels.csv --out DIR --video-key clip_path --media-root /mnt/clips
  skillbank data import qa.jsonl --out DIR --skip-bad --json
  skillbank data import old/annotations.json --out DIR --val-fraction 0.2 --seed 1 --copy-media
then: skillbank data stats DIR/train/annotations.json
      skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root DIR -o train.yaml
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import clips + labels, a HF dataset, CSV / JSONL or LLaVA into DIR/<split>/",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--val-fraction", type=float, default=0.1, metavar="F",
                   help="share of clips carved from train into val when the source has no val split (default: 0.1; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the carve (default: 0)")
    p.add_argument("--copy-media", action="store_true", help="copy clips into DIR/<split>/videos/ instead of linking the source's clip folder")
    p.add_argument("--skip-bad", action="store_true", help="import what can be imported; list the rest in import.json")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty DIR (the old one is removed)")
    p.add_argument("--workers", type=int, metavar="N", help="probing processes (default: one per CPU, at most 8)")
    p.add_argument("--json", action="store_true", help="print import.json's content plus paths as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from skillbank.errors import InputError
    from skillbank.intake.importer import Options, run_import

    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}", where="--workers", fix="pass e.g. 4, or leave it out")
    if not 0 <= args.val_fraction < 1:
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
    print(f"  duration: {', '.join(f'{k} x{v}' for k, v in doc['duration_histogram'].items())}")
    if c["skipped"]:
        print(f"  skipped {c['skipped']} item(s) (--skip-bad): listed in {doc['paths']['import_json']}")
    print(f"next: {doc['next']}")
    return 0
