"""`skillbank make-tiny-model` and `skillbank make-demo-dataset`: the embedded default, offline.

Light at import; torch / transformers / PyAV load inside the commands.
"""

from __future__ import annotations

import argparse
import json
import sys

from skillbank.commands.flags import add_json, command_parser

MODEL_HELP = """\
Build a random-init tiny Qwen-VL (same classes, processor and chat template as Cosmos-Reason) with a
byte-level BPE tokenizer trained locally: nothing is downloaded. The folder loads with
AutoProcessor + AutoModelForImageTextToText under HF_HUB_OFFLINE=1 and is deterministic given --seed.
  qwen2_5_vl  Qwen2.5-VL, the Cosmos-Reason1 family
  qwen3_vl    Qwen3-VL, the Cosmos-Reason2 family
The default size (text and vision hidden 128, 2 layers each, ~1.2M parameters) learns the demo tasks
on a CPU in minutes.
"""

DATA_HELP = """\
Write the synthetic demo dataset: LLaVA video QA about a coloured square on black (16 frames of 64x64
at 8 fps, mp4 via PyAV). Three task families with short constrained answers: yes_no ("Is the ball
red? Answer yes or no."), directionality ("... Answer left, right or straight.") and colour ("...
Answer with one word."). Layout: OUT/train and OUT/val, each with annotations.json and videos/;
val has ~15% of --records. Deterministic given --seed.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from skillbank.assets.tiny_model import FAMILIES  # light: the builder imports torch / transformers when it runs

    m = command_parser(subparsers, "make-tiny-model", MODEL_HELP)
    m.add_argument("--family", choices=FAMILIES, default=FAMILIES[0], help="model family (default: %(default)s)")
    m.add_argument("--out", default=None, help="output folder (default: the shared cache under $SKILLBANK_CACHE)")
    m.add_argument("--seed", type=int, default=0, help="weight-init seed (default 0)")
    m.add_argument("--cache", action="store_true", help="build once in the shared cache and copy it to --out")
    add_json(m, "print one JSON document")
    m.set_defaults(run=run_model)

    d = command_parser(subparsers, "make-demo-dataset", DATA_HELP)
    d.add_argument("--out", default=None, help="output folder (default: the shared cache under $SKILLBANK_CACHE)")
    d.add_argument("--records", type=int, default=2100, help="train records (default 2100); val gets ~15%% of this")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument("--cache", action="store_true", help="build once in the shared cache and copy it to --out")
    add_json(d, "print one JSON document")
    d.set_defaults(run=run_dataset)


def _emit(args: argparse.Namespace, doc: dict) -> None:
    if args.json:
        print(json.dumps({"ok": True, **doc}, indent=2))
    else:
        print(f"{doc['kind']} ready: {doc['path']}")


def run_model(args: argparse.Namespace) -> int:
    import time

    from skillbank.assets.tiny_model import build_tiny_model

    started = time.perf_counter()
    path = build_tiny_model(args.out, family=args.family, seed=args.seed, cache=args.cache)
    _emit(args, {"kind": "tiny model", "path": str(path), "family": args.family, "seed": args.seed, "seconds": round(time.perf_counter() - started, 2)})
    return 0


def run_dataset(args: argparse.Namespace) -> int:
    import time

    from skillbank.assets.demo_dataset import build_demo_dataset, split_sizes

    started = time.perf_counter()
    path = build_demo_dataset(args.out, records=args.records, seed=args.seed, cache=args.cache, progress=sys.stderr.isatty() or not args.json)
    doc = {
        "kind": "demo dataset",
        "path": str(path),
        "train": str(path / "train" / "annotations.json"),
        "val": str(path / "val" / "annotations.json"),
        "records": split_sizes(args.records),
        "seconds": round(time.perf_counter() - started, 2),
    }
    _emit(args, doc)
    return 0
