"""`skillbank export`: a checkpoint, safetensors step or LoRA adapter -> a Hugging Face folder."""

from __future__ import annotations

import argparse
import json

from skillbank.commands.flags import add_json, add_output, add_overwrite, add_spec, command_parser

DESCRIPTION = (
    "Export a model to a Hugging Face safetensors folder with its processor and export_manifest.json "
    "(sha256 of every file). Source: <run>/checkpoints/step_N, <run>/safetensors/step_N, a run folder, "
    "or a LoRA adapter folder (merged into --base-model). Flags override the spec's values."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = command_parser(sub, "export", DESCRIPTION, raw=False)
    add_spec(p, "export spec (ExportSpec YAML)", metavar="FILE")
    p.add_argument("--source", metavar="DIR", help="source folder (spec: source)")
    add_output(p)
    p.add_argument("--base-model", metavar="DIR", help="base model of a LoRA adapter (spec: base_model_path)")
    p.add_argument("--dtype", help="bfloat16 (default), float16 or float32: dtype of the exported weights (spec: dtype)")
    p.add_argument("--no-merge", action="store_true", help="copy a LoRA adapter instead of merging it (spec: merge_lora: false)")
    add_overwrite(p)
    add_json(p, "print the manifest as one JSON document")
    p.set_defaults(run=run_export)


def spec_from(args: argparse.Namespace):
    from skillbank.errors import InputError
    from skillbank.specification.actions import ExportSpec
    from skillbank.specification.io import spec_with_flags

    if not args.spec and not (args.source and args.out):
        raise InputError("give --spec FILE, or --source DIR and --out DIR", where="skillbank export", fix="skillbank export --source RUN/safetensors/step_N --out exported/")
    return spec_with_flags(ExportSpec, args.spec, {
        "source": args.source, "output_dir": args.out, "base_model_path": args.base_model, "dtype": args.dtype,
        "merge_lora": False if args.no_merge else None,
    })


def run_export(args: argparse.Namespace) -> int:
    from skillbank.export.run import MANIFEST, export

    result = export(spec_from(args), overwrite=args.overwrite)
    if args.json:
        print(json.dumps({"ok": True, "output_dir": str(result.output_dir), "manifest": result.manifest}, indent=2))
        return 0
    print(f"exported {result.source.kind} {result.source.given}\n  -> {result.output_dir} ({len(result.manifest['files'])} files, {MANIFEST})")
    for note in result.notes:
        print(f"  note: {note}")
    return 0
