"""`skillbank export`: a checkpoint, safetensors step or LoRA adapter -> a Hugging Face folder."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="merge a LoRA adapter or convert a checkpoint step into a Hugging Face safetensors folder",
        description="Export a model to a Hugging Face safetensors folder with its processor and export_manifest.json "
        "(sha256 of every file). Source: <run>/checkpoints/step_N, <run>/safetensors/step_N, a run folder, "
        "or a LoRA adapter folder (merged into --base-model). Flags override the spec's values.",
    )
    p.add_argument("--spec", metavar="FILE", help="export spec (ExportSpec YAML)")
    p.add_argument("--source", metavar="DIR", help="source folder (spec: source)")
    p.add_argument("--out", metavar="DIR", help="output folder (spec: output_dir)")
    p.add_argument("--base-model", metavar="DIR", help="base model of a LoRA adapter (spec: base_model_path)")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), help="dtype of the exported weights (spec: dtype)")
    p.add_argument("--no-merge", action="store_true", help="copy a LoRA adapter instead of merging it (spec: merge_lora: false)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    p.add_argument("--json", action="store_true", help="print the manifest as one JSON document")
    p.set_defaults(run=run_export)


def request_from(args: argparse.Namespace):
    from skillbank.errors import InputError
    from skillbank.export.run import ExportRequest

    values: dict = {}
    if args.spec:
        from skillbank.spec.actions import ExportSpec
        from skillbank.spec.io import load_spec

        values = load_spec(args.spec, ExportSpec).model_dump()
    elif not (args.source and args.out):
        raise InputError("give --spec FILE, or --source DIR and --out DIR", where="skillbank export", fix="skillbank export --source RUN/safetensors/step_N --out exported/")
    for flag, key in (("source", "source"), ("out", "output_dir"), ("base_model", "base_model_path"), ("dtype", "dtype")):
        if getattr(args, flag):
            values[key] = getattr(args, flag)
    if args.no_merge:
        values["merge_lora"] = False
    values.setdefault("dtype", "bfloat16")
    values.setdefault("output_dir", "./results/export")
    return ExportRequest(
        source=values.get("source", ""), output_dir=values["output_dir"], base_model_path=values.get("base_model_path", ""),
        merge_lora=values.get("merge_lora", True), dtype=values["dtype"], overwrite=args.overwrite,
    )


def run_export(args: argparse.Namespace) -> int:
    from skillbank.export.run import MANIFEST, export

    result = export(request_from(args))
    if args.json:
        print(json.dumps({"ok": True, "output_dir": str(result.output_dir), "manifest": result.manifest}, indent=2))
        return 0
    print(f"exported {result.source.kind} {result.source.given}\n  -> {result.output_dir} ({len(result.manifest['files'])} files, {MANIFEST})")
    for note in result.notes:
        print(f"  note: {note}")
    return 0
