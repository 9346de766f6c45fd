"""`skillbank quantize`: FP8_DYNAMIC / W8A16 / W4A16 in the compressed-tensors format."""

from __future__ import annotations

import argparse
import json

from skillbank.cli import summary


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quantize",
        help=summary("quantize"),
        description="Quantize a Hugging Face model folder with compressed-tensors (the format vLLM loads). "
        "Writes the model, processor and quantize_manifest.json (sha256 of every file). Flags override the spec.",
    )
    p.add_argument("--spec", metavar="FILE", help="quantize spec (QuantizeSpec YAML)")
    p.add_argument("--model", metavar="DIR", help="model folder (spec: model_path)")
    p.add_argument("--scheme", help="FP8_DYNAMIC (default, no calibration), W8A16 or W4A16 (spec: scheme)")
    p.add_argument("--out", metavar="DIR", help="output folder (spec: output_dir)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    p.add_argument("--json", action="store_true", help="print the manifest as one JSON document")
    p.set_defaults(run=run_quantize)


def spec_from(args: argparse.Namespace):
    from skillbank.errors import InputError
    from skillbank.specification.actions import QuantizeSpec
    from skillbank.specification.io import spec_with_flags

    if not args.spec and not (args.model and args.out):
        raise InputError("give --spec FILE, or --model DIR and --out DIR", where="skillbank quantize", fix="skillbank quantize --model exported/ --scheme W4A16 --out quantized/")
    return spec_with_flags(QuantizeSpec, args.spec, {"model_path": args.model, "scheme": args.scheme, "output_dir": args.out})


def run_quantize(args: argparse.Namespace) -> int:
    from skillbank.quantize.compress import MANIFEST, quantize

    result = quantize(spec_from(args), overwrite=args.overwrite)
    if args.json:
        print(json.dumps({"ok": True, "output_dir": str(result.output_dir), "manifest": result.manifest}, indent=2))
        return 0
    m = result.manifest
    print(f"quantized {m['source']} ({m['scheme']}, {m['format']}, {m['quantized_modules']} layers)\n  -> {result.output_dir} ({MANIFEST})")
    for note in result.notes:
        print(f"  note: {note}")
    return 0
