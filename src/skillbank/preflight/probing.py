"""The token tally from the clips themselves: container headers read (skillbank.data.probe), not the vision budget.

When records state no clip length, preflight reads the headers of a sample of the train clips the scan
kept (preflight.datasets: K spread over the file, or every one for `skillbank plan`), cached by path,
size and mtime (skillbank.filecache), so a second plan pays nothing. Each counts at its real length
and frame size, with the same vision.budget finding a stated length gets; a clip that cannot be read
counts the spec's whole vision budget and is counted as such (TokenTally.budget).
"""

from __future__ import annotations

import os
import time
from typing import Any

from skillbank.preflight.datasets import PROBE_ALL, Dataset, check_clip
from skillbank.preflight.report import Findings
from skillbank.preflight.vision import Clip, VisionBudget


def probe_tally(data: Dataset, budget: VisionBudget, findings: Findings, sample: int) -> tuple[dict[str, Any], int]:
    """Add the kept clips to data.tokens; returns (what was probed, for stats["probe"]; records counted from a readable header)."""
    from skillbank.data.probe import probe_cached

    started = time.perf_counter()
    where = {raw: os.path.normpath(os.path.join(data.media_root, raw)) for raw in {entry[1] for entry in data.probe}}
    found = probe_cached(where.values())
    readable = 0
    for index, raw, chars, rid in data.probe:
        info = found.results[where[raw]]
        if isinstance(info, str):
            data.tokens.add_budget(budget.fill_tokens(chars))
            continue
        clip = Clip(info.num_frames, info.video_fps, info.width, info.height)
        est = check_clip(budget, clip, {"id": rid}, index, f"{data.file}#{index}", findings, group=data.file, chars=chars)
        if est is not None:
            data.tokens.add(est, clip, probed=True)
            readable += 1
    stats = {
        "sample": "all" if sample == PROBE_ALL else sample,
        "records": len(data.probe),
        "clips": len(where),
        "from_cache": found.cached,
        "read": found.probed,
        "unreadable": found.failed,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return stats, readable
