"""`skillbank report` end to end: read and check every input, build every section in memory, then the
summary from them, then write report.html, report.md and the PNGs under --out (nothing is written when an
input is bad). Sections without data are left out of the page and listed, with what they need, under
"Not in this report"; --json says the same (shown, why, the images and curves each drew)."""

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
    annotations: str | None = None  # --annotations: the evaluated file when metrics.json names none (skillbank score's)
    max_strips: int = MAX_STRIPS
    frames: bool = True
    progress: bool = True
    title: str | None = None  # --title: the page's heading (default TITLE)


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
            sections.failures(evals, max_strips=req.max_strips, frames=req.frames, media_dir=req.media_dir, annotations=req.annotations,
                              progress=bar.update if bar is not None else None),
            sections.recipe(run, evals, base),
            sections.comparison(evals, base),
        ]
    finally:
        if bar is not None:
            bar.close()
    from skillbank.reporting.summary import summary

    top = summary(run, evals, base, parts[5].facts.get("documents") or [])
    intro = []
    if run is not None:
        intro.append(f"Run: `{run.folder}`.")
    intro += [f"Evaluation {ev.label}: `{ev.folder}` ({ev.items} items, model `{ev.metrics.get('model') or '?'}`)."
              for ev in ([base] if base else []) + evals]
    title = (req.title or "").strip() or TITLE
    paths = document.write(req.out, title, intro, [top, *parts])
    return {"ok": True, "title": title, **paths, "summary": top.facts,
            "sections": {s.key: _section_json(s) for s in parts},
            "comparison": {f"{a} vs {b}": _comparison_json(doc) for a, b, doc in parts[5].facts.get("documents") or []},
            "accuracy": parts[1].facts, "failures": parts[3].facts, "wall_s": round(time.perf_counter() - started, 2)}


def _section_json(s: sections.Section) -> dict[str, Any]:
    """What the page shows of a section: shown (and why not), the pictures it drew, the training curves."""
    out: dict[str, Any] = {"title": s.title, "shown": s.shown, "needs": s.needs, "images": [img.name for img in document.images([s])]}
    if s.why:
        out["why"] = s.why
    if s.key == "training" and s.shown:
        out.update(s.facts)
    return out


def _comparison_json(doc: dict[str, Any]) -> dict[str, Any]:
    keep = ("n", "diff", "diff_ci95", "diff_ci95_exact", "p_value", "n_for_power_0_8", "disagreement")
    return {"overall": {k: doc["overall"][k] for k in keep},
            "families": {f: {k: row[k] for k in (*keep, "p_adjusted")} for f, row in doc["families"].items()},
            "clean": {k: doc["clean"][k] for k in ("n", "excluded", *keep) if k in doc["clean"]} if doc.get("clean") else None}
