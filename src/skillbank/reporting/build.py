"""`skillbank report` end to end: read and check every input, build every section in memory, then write
report.html, report.md and the PNGs under --out (nothing is written when an input is bad)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.errors import InputError
from skillbank.reporting import document, sections
from skillbank.reporting.inputs import EvalInputs, labels, read_eval, read_run

TITLE = "Training and evaluation report"
MAX_STRIPS = 40  # failures per evaluation shown with frames by default (all are listed)


@dataclass
class Request:
    out: Path
    run: str | None = None
    evals: tuple[str, ...] = ()
    base: str | None = None
    media_dir: str | None = None
    max_strips: int = MAX_STRIPS
    frames: bool = True
    progress: bool = True


def _inputs(req: Request) -> tuple[Any, list[EvalInputs], EvalInputs | None]:
    if not req.run and not req.evals:
        raise InputError("nothing to report: give --run, --eval or both", where="--run / --eval",
                         fix="skillbank report --run RUN --eval EVAL_DIR --out DIR")
    if req.max_strips < 0:
        raise InputError(f"--max-failures must be 0 or more, not {req.max_strips}", where="--max-failures", fix="0 shows no frames")
    names = labels(list(req.evals), req.base)
    base = read_eval(req.base, names.pop(0), "--base") if req.base else None
    evals = [read_eval(path, name, "--eval") for path, name in zip(req.evals, names)]
    run = read_run(req.run) if req.run else None
    return run, evals, base


def build(req: Request) -> dict[str, Any]:
    """Build the report; return {ok, html, markdown, images, sections, accuracy, failures, wall_s}."""
    started = time.perf_counter()
    run, evals, base = _inputs(req)
    bar = None
    if req.progress and req.frames and req.max_strips and evals:
        from tqdm import tqdm

        bar = tqdm(desc="frames of failures", unit="clip", file=sys.stderr, leave=False)
    try:
        parts = [
            sections.training(run),
            sections.accuracy(evals, base),
            sections.confusion(evals),
            sections.failures(evals, max_strips=req.max_strips, frames=req.frames, media_dir=req.media_dir,
                              progress=bar.update if bar is not None else None),
            sections.recipe(run, evals, base),
            sections.comparison(evals),
        ]
    finally:
        if bar is not None:
            bar.close()
    intro = []
    if run is not None:
        intro.append(f"Run: `{run.folder}`.")
    intro += [f"Evaluation {ev.label}: `{ev.folder}` ({ev.items} items, model `{ev.metrics.get('model') or '?'}`)."
              for ev in ([base] if base else []) + evals]
    paths = document.write(req.out, TITLE, intro, parts)
    return {"ok": True, **paths, "sections": {s.key: {"title": s.title, "shown": s.shown, "needs": s.needs, **({"why": s.why} if s.why else {})} for s in parts},
            "accuracy": parts[1].facts, "failures": parts[3].facts, "wall_s": round(time.perf_counter() - started, 2)}

