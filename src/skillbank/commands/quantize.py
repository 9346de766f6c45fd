"""`skillbank quantize`: FP8_DYNAMIC / W8A16 / W4A16 in the compressed-tensors format."""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_json, add_output, add_overwrite, add_spec, command_parser

DESCRIPTION = (
    "Quantize a Hugging Face model folder with compressed-tensors (the format vLLM loads). "
    "Writes the model, processor and quantize_manifest.json (sha256 of every file). Flags override the spec."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "quantize", DESCRIPTION, raw=False)
    add_spec(p, "quantize spec (QuantizeSpec YAML)", metavar="FILE")
    p.add_argument("--model", metavar="DIR", help="model folder (spec: model_path)")
    p.add_argument("--scheme", help="FP8_DYNAMIC (default, no calibration), W8A16 or W4A16 (spec: scheme)")
    add_output(p)
    add_overwrite(p)
    add_json(p, "print the manifest as one JSON document")
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
