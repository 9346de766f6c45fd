"""Tokens per sample and the records counted, the two data figures a plan stands on.

From the data (the default): preflight's scan of the spec's records with every clip that states no
length read from its container headers (preflight.probing: PyAV, no decode, worker processes, cached
by path, size and mtime), one token estimate per record (preflight.vision.VisionBudget, the figure
`preflight --json` reports as stats.tokens_per_sample). A clip that cannot be read counts the spec's
whole vision budget, and `tokens_per_sample.budget` counts those.

From a description (`--records N --clip-seconds S [--resolution WxH]`): N records of one clip each,
estimated by the same VisionBudget, so a described set and the same clips stated in records agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from skillbank.errors import InputError
from skillbank.preflight.vision import CHARS_PER_TOKEN, NOMINAL_FPS, TYPICAL_TEXT_TOKENS, Clip, VisionBudget
from skillbank.runs import steps


@dataclass(frozen=True)
class Described:
    """A dataset the user describes instead of pointing at (`plan --records ...`)."""

    records: int
    clip_seconds: float
    width: int | None = None
    height: int | None = None
    clip_fps: float = NOMINAL_FPS
    text_tokens: int = TYPICAL_TEXT_TOKENS  # question + answer
    val_records: int | None = None


def parse_resolution(text: str) -> tuple[int, int]:
    """WxH (1280x720), or a height with p (720p: 16:9)."""
    value = text.strip().lower()
    try:
        if value.endswith("p"):
            height = int(value[:-1])
            return round(height * 16 / 9 / 2) * 2, height
        width, height = (int(v) for v in value.split("x"))
    except ValueError:
        raise InputError(f"--resolution {text!r} is not WxH", where="--resolution", fix="write it as WIDTHxHEIGHT (1280x720) or 720p") from None
    if width < 1 or height < 1:
        raise InputError(f"--resolution {text!r} must be positive", where="--resolution", fix="write it as WIDTHxHEIGHT, e.g. 1280x720")
    return width, height


@dataclass
class TokenFigures:
    """What a plan takes from the data: tokens per sample (memory at the longest, time at the mean) and the records."""

    tokens: dict[str, Any]
    records: steps.TrainCount | None
    val_records: int | None = None
    counted: dict[str, Any] | None = None  # preflight's stats["plan"] (the run's arithmetic) when the records were counted
    preflight_errors: int = 0
    assumptions: list[str] = field(default_factory=list)


def budget_of(spec: Any, patch: int, action: str) -> VisionBudget:
    if action == "rl":
        from skillbank.preflight.rl_checks import rl_budget

        return rl_budget(spec, patch)
    return VisionBudget.from_train_spec(spec, patch)


def from_data(spec: Any, skill: str, action: str, *, decode_sample: int = 0) -> TokenFigures:
    """The figures from preflight's data scan with every clip probed (stats.tokens_per_sample, stats.plan)."""
    from skillbank.preflight.run import PROBE_ALL, run_preflight

    report = run_preflight(skill=skill, action=action, spec=spec.model_dump(mode="json"), only=["data"], decode_sample=decode_sample,
                           probe_sample=PROBE_ALL, start_check=False)
    stats = report.stats
    counted = stats.get("plan")
    records = steps.TrainCount(counted["annotated_records"], counted["validation_split"]) if counted else None
    val = (counted.get("validation") or {}).get("records") if counted else None
    if action == "rl":
        prompts = (stats.get("records") or {}).get("train")
        records = steps.TrainCount(prompts, 0) if prompts else None
    figures = TokenFigures({}, records, val, counted, stats.get("errors", 0))
    if figures.preflight_errors:
        figures.assumptions.append(f"preflight found {figures.preflight_errors} error(s) in the data: run `skillbank preflight` on this spec and fix them first")
    tally = stats.get("tokens_per_sample")
    if not tally:
        figures.assumptions.append("no train record could be counted (no annotations, or no readable video record): tokens per sample unknown")
        return figures
    probe = stats.get("probe") or {}
    source = "preflight's data scan (stats.tokens_per_sample)"
    how = [f"{tally['samples'] - tally['probed'] - tally['budget']:,} from the lengths the records state"] if tally["samples"] > tally["probed"] + tally["budget"] else []
    if tally["probed"]:
        how.append(f"{tally['probed']:,} from their clips' container headers ({probe.get('clips', 0):,} clip(s), {probe.get('from_cache', 0):,} from the cache)")
    if tally["budget"]:
        how.append(f"{tally['budget']:,} clip(s) could not be read and count the spec's whole vision budget")
    figures.assumptions.append(f"tokens per sample over {tally['samples']:,} train records: " + "; ".join(how)
                               + f" (bound {tally['bound']}); memory at the longest ({tally['max']:,}), time at the mean ({tally['mean']:,})")
    figures.tokens = {**tally, "memory_at": tally["max"], "time_at": tally["mean"], "source": source, "probe": probe or None}
    return figures


def from_description(spec: Any, described: Described, budget: VisionBudget, action: str) -> TokenFigures:
    """N records of one S-second clip each (WxH, or the pixel budget's bound when no resolution is given)."""
    if described.records < 1 or not 0 < described.clip_seconds < math.inf:
        raise InputError("--records must be at least 1 and --clip-seconds positive", where="--records", fix="describe the set, e.g. --records 50000 --clip-seconds 10")
    frames = max(1, round(described.clip_seconds * described.clip_fps))
    clip = Clip(frames, described.clip_fps, described.width, described.height)
    chars = described.text_tokens * CHARS_PER_TOKEN
    try:
        est = budget.estimate(clip, chars)
    except ValueError as exc:
        raise InputError(f"the described clips cannot be sampled: {exc}", where="--clip-seconds", fix="lower custom.vision.nframes, or describe longer clips") from None
    tokens = est.high
    size = f"{described.width}x{described.height}" if described.width else "no resolution given: the pixel budget's upper bound per frame"
    assumptions = [
        f"a described dataset: {described.records:,} records of one {described.clip_seconds:g}-s clip each ({size}; {described.clip_fps:g} fps native, "
        f"{est.frames} frames sampled), ~{described.text_tokens} text tokens of question and answer (--text-tokens) + the system prompt and chat template: "
        f"{est.vision_high:,} vision + {est.text:,} text = {tokens:,} tokens per sample (preflight.vision.VisionBudget, as for stated records)",
    ]
    if action == "rl":
        return TokenFigures(_fixed(tokens, est.low == est.high), steps.TrainCount(described.records, 0), None, None, 0, assumptions)
    count = steps.train_count(spec, described.records)
    val = count.split or described.val_records
    if spec.validation.enable and not count.split and described.val_records is None:
        assumptions.append("custom.val_dataset is set but not counted for a described set: validation time is left out (pass --val-records M)")
    return TokenFigures(_fixed(tokens, est.low == est.high), count, val, None, 0, assumptions)


def _fixed(tokens: int, exact: bool) -> dict[str, Any]:
    return {"samples": 0, "mean": tokens, "min": tokens, "max": tokens, "bound": "exact" if exact else "upper", "probed": 0, "budget": 0,
            "memory_at": tokens, "time_at": tokens, "source": "the described clips (--records / --clip-seconds / --resolution)"}


def no_data(spec: Any, budget: VisionBudget) -> TokenFigures:
    """No annotations to read and no description: every sample is taken to fill the vision budget (said)."""
    tokens = budget.fill_tokens(TYPICAL_TEXT_TOKENS * CHARS_PER_TOKEN)
    return TokenFigures(
        {"samples": 0, "mean": tokens, "min": tokens, "max": tokens, "bound": "budget", "probed": 0, "budget": 0,
         "memory_at": tokens, "time_at": tokens, "source": "the spec's vision budget (no data to read)"},
        None, None, None, 0,
        [f"no train annotations to read: every sample is taken to fill the vision budget ({tokens:,} tokens); point the spec at the data, "
         "or describe it with --records N --clip-seconds S [--resolution WxH]"],
    )
