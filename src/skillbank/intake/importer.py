"""`skillbank data import`: read (one reader per source kind; each clip probed as it is read) -> split
-> place -> write DIR.

Everything is built in a temp folder beside DIR and renamed onto it at the end, so DIR is either the
whole import or untouched; SOURCE is only read. Bad inputs are collected from every stage and named
together: without --skip-bad any one of them stops the import before anything is written.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank import atomic
from skillbank.errors import InputError
from skillbank.intake.items import Bad, Item, Read

REPORT = "import.json"
SHOWN = 20  # bad items named in the error message (all of them go to import.json under --skip-bad)


@dataclass
class Options:
    source: Path
    out: Path
    format: str | None = None
    question_key: str | None = None
    answer_key: str | None = None
    video_key: str | None = None
    media_root: Path | None = None
    clip_glob: str = "*"
    val_fraction: float | None = None  # None: the default rule (intake.split.val_clip_count); a number is kept as given
    seed: int = 0
    copy_media: bool = False
    skip_bad: bool = False
    force: bool = False
    workers: int | None = None
    progress: bool | None = None


def _check_paths(opts: Options) -> tuple[Path, Path]:
    source, out = opts.source.expanduser().absolute(), opts.out.expanduser().absolute()
    if not source.exists():
        raise InputError("no such file or folder", where=str(source), fix="pass the dataset folder or file")
    real_source, real_out = source.resolve(), out.resolve()
    if real_out == real_source or real_source in real_out.parents or (real_source.is_file() and real_out == real_source.parent):
        raise InputError("--out lies inside SOURCE (the source is never written to)", where=str(out), fix="pass an --out folder outside the source")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not opts.force:
        raise InputError("--out exists and is not empty", where=str(out), fix="pass an empty or new folder, or --force to replace it whole")
    return source, out


SPLIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _screen(items: list[Item]) -> tuple[list[Item], list[Bad]]:
    """Drop items with an id seen before, or a split name that is no plain folder name (a CSV's
    `split` cell is data: "../x" must not become a path)."""
    first: dict[str, str] = {}
    keep, bad = [], []
    for item in items:
        if item.split is not None and not SPLIT_NAME.fullmatch(item.split):
            bad.append(Bad(item.where, item.id, f"split name {item.split!r} is not a plain folder name (letters, digits, _ . -)"))
        elif item.id in first:
            bad.append(Bad(item.where, item.id, f"duplicate id (first at {first[item.id]})"))
        else:
            first[item.id] = item.where
            keep.append(item)
    return keep, bad


def _unreadable(items: list[Item], infos: dict[str, Any]) -> tuple[list[Item], list[Bad]]:
    keep, bad = [], []
    for item in items:
        info = infos[item.video]
        if isinstance(info, str):
            bad.append(Bad(item.where, item.id, f"unreadable clip {item.clip}: {info}"))
        else:
            keep.append(item)
    return keep, bad


def _grouped(bad: list[Bad]) -> list[str]:
    """One line per reason: the item itself, or for a reason several items share, their count and the
    first of them (24 records of the wrong shape are one line, not 24)."""
    groups: dict[str, list[Bad]] = {}
    for b in bad:
        groups.setdefault(b.reason, []).append(b)
    lines = []
    for reason, members in groups.items():
        first = members[0]
        where = first.where + (f" [{first.id}]" if first.id else "")
        lines.append(first.line() if len(members) == 1 else f"{len(members)} items, the first {where}: {reason}")
    return lines


def _refuse(bad: list[Bad], source: Path) -> InputError:
    lines = _grouped(bad)
    if len(lines) > SHOWN:
        lines[SHOWN:] = [f"... and {len(lines) - SHOWN} more"]
    return InputError(f"{len(bad)} item(s) of the source cannot be imported; nothing was written:\n    " + "\n    ".join(lines),
                      where=str(source), fix="mend them, or pass --skip-bad to import the rest (import.json then lists what was skipped)")


def run_import(opts: Options) -> dict[str, Any]:
    """Import SOURCE into opts.out; the import.json document (plus "paths")."""
    from skillbank.data.probe import ProbePool
    from skillbank.intake.detect import read
    from skillbank.intake.layout import place_split, record, write_annotations
    from skillbank.intake.rows import Spill
    from skillbank.intake.split import assign, val_size

    source, out = _check_paths(opts)
    created = [p for p in out.parents if not p.exists()]  # made for the temp folder; removed again on failure
    tmp = atomic.temp_dir(out)
    try:
        with ProbePool(workers=opts.workers, progress=opts.progress) as pool:  # probes each clip as soon as a reader names it
            got, why = read(source, opts.format, spill=Spill(tmp / ".embedded"), on_clip=pool.add, clip_glob=opts.clip_glob,
                            media_root=opts.media_root and opts.media_root.expanduser().absolute(),
                            question_key=opts.question_key, answer_key=opts.answer_key, video_key=opts.video_key)
            infos = pool.results()
        items, bad = _screen(got.items)
        items, unreadable = _unreadable(items, infos)
        bad = got.bad + bad + unreadable
        if bad and not opts.skip_bad:
            raise _refuse(bad, source)
        if not items:
            raise InputError("no item of the source could be imported", where=str(source), fix="see the skipped items in the message above" if bad else "check the source")
        splits, how = assign(items, opts.val_fraction, opts.seed)
        size = val_size(splits, how, opts.val_fraction)
        moved: dict[str, Path] = {}
        summary: dict[str, Any] = {}
        for name, members in splits.items():
            folder = tmp / name
            folder.mkdir()
            videos = place_split(members, folder, root=got.root, copy=opts.copy_media, moved=moved)
            write_annotations(folder / "annotations.json", [record(i, videos[i.video], infos[i.video].fields()) for i in members])
            summary[name] = {"records": len(members), "clips": len(videos), "annotations": f"{name}/annotations.json", "from": how[name],
                             "clip_lengths": _lengths([infos[v] for v in videos])}
        shutil.rmtree(tmp / ".embedded", ignore_errors=True)
        used = [infos[v] for v in dict.fromkeys(i.video for i in items)]
        families = Counter(i.family for i in items if i.family is not None)
        doc = _document(opts, source, out, got, why, summary, bad, used, families, len(got.items) + len(got.bad), size)
        atomic.write_json(tmp / REPORT, doc)
        _commit(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in created:  # deepest first
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    doc["paths"] = {"out": str(out), "import_json": str(out / REPORT), **{f"{k}_annotations": str(out / v["annotations"]) for k, v in summary.items()}}
    return doc


def _lengths(infos: list[Any]) -> dict[str, Any]:
    """A split's clip lengths as `data stats` states them for its annotations file: frames / fps of the records."""
    from skillbank.intake.report import lengths
    from skillbank.preflight.vision import clip_from_record

    return lengths(c for info in infos if (c := clip_from_record(info.fields())) is not None)


def _document(opts: Options, source: Path, out: Path, got: Read, why: str, summary: dict[str, Any], bad: list[Bad],
              clips: list[Any], families: Counter, read_count: int, size: dict[str, Any]) -> dict[str, Any]:
    from skillbank.intake.report import duration_histogram, fps_histogram
    from skillbank.intake.split import DEFAULT_VAL_FRACTION, MAX_RAISED_SHARE, MIN_VAL_CLIPS

    return {
        "source": str(source),
        "out": str(out),
        "reader": got.reader,
        "detected_by": why,
        "fields": got.fields,
        "counts": {"read": read_count, "records": sum(s["records"] for s in summary.values()), "clips": len(clips), "skipped": len(bad)},
        "splits": summary,
        "split_rule": {"val_fraction": DEFAULT_VAL_FRACTION if opts.val_fraction is None else opts.val_fraction,
                       "val_fraction_given": opts.val_fraction is not None, "min_val_clips": MIN_VAL_CLIPS,
                       "max_raised_share": MAX_RAISED_SHARE, "seed": opts.seed, "grouped_by": "clip",
                       "stratified_by": "family" if families else None},
        "val_size": size,
        "warnings": [size["warning"]] if size["warning"] else [],
        "families": dict(sorted(families.items())),
        "media": "copy" if opts.copy_media else "symlink",
        "fps_histogram": fps_histogram(clips),
        "duration_histogram": duration_histogram(clips),
        "skipped": [b.to_dict() for b in bad],
        "reader_notes": got.notes,
        "next": (f"skillbank spec --skill tao-finetune-cosmos-reason --action train --dataset-root {out} -o train.yaml" if "train" in summary
                 else f"skillbank spec --skill tao-finetune-cosmos-reason --action evaluate --dataset-root {out / next(iter(summary))} -o eval.toml"),
    }


def _commit(tmp: Path, out: Path) -> None:
    """Rename the finished folder onto out; an existing out (empty, or --force) is moved aside first."""
    if not out.exists() and not out.is_symlink():
        os.replace(tmp, out)
        return
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        out.rmdir()
        os.replace(tmp, out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True) if old.is_dir() and not old.is_symlink() else old.unlink()
