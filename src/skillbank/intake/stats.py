"""`skillbank data stats`: what an annotations file holds, and what its samples cost in tokens.

Records, media kinds, families (the record's `family` key), the answers (every assistant turn: per turn
index and the most common per family), clip
lengths and frame rates from the records' metadata (`--probe`: from the containers' headers for the
records that state none), and vision tokens per sample at a spec's vision settings (default: the train
template's). The token figures are preflight's own: VisionBudget.estimate per sample, aggregated by
TokenTally into the shape preflight reports as stats.tokens_per_sample, and longest_safe_clip for the
longest clip a typical sample fits. Nothing here imports torch or transformers (PyAV only for --probe).
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbank.data.media import media_root
from skillbank.errors import InputError
from skillbank.intake.fix import read_annotations
from skillbank.intake.report import lengths, lengths_text
from skillbank.preflight.decode import spread
from skillbank.preflight.vision import Clip, TokenTally, VisionBudget, clip_from_record, text_chars

TOP_ANSWERS = 5
FIRST = 5  # record indices listed
NO_FAMILY = ""  # the family key of records without one
ACTIONS = ("train", "rl")  # the specs with a token budget (policy.model_max_length, custom.vision)


@dataclass(frozen=True)
class Budget:
    """The vision settings the tokens are counted at, and where they came from."""

    budget: VisionBudget
    source: str  # "the train template" or the spec file
    action: str
    model: str

    def to_dict(self) -> dict[str, Any]:
        b = self.budget
        return {
            "source": self.source,
            "action": self.action,
            "model": self.model,
            "patch_size": b.patch_size,
            "fps": b.fps,
            "nframes": b.nframes,
            "total_pixels": b.total_pixels,
            "max_pixels": b.max_pixels,
            "model_max_length": b.model_max_length,
        }


def load_budget(skill: str, spec_path: str | None, assignments: list[str] | None = None) -> Budget:
    """The spec's VisionBudget (a train or rl spec; the train template when no spec is given), with `assignments`
    (--set) applied. The patch size comes from the model the spec names, as preflight takes it (env_checks.patch_size:
    its config.json, the model table's for a model the bank ships)."""
    from skillbank.preflight import env_checks
    from skillbank.preflight.rl_checks import rl_budget
    from skillbank.specification.build import infer_action, load_template
    from skillbank.specification.io import read_spec_file
    from skillbank.specification.registry import spec_model
    from skillbank.specification.validation import validate

    if spec_path is None:
        data, source, action = load_template(skill, "train"), "the train template", "train"
    else:
        data, source = read_spec_file(spec_path), str(spec_path)
        action = infer_action(skill, data, where=source)
        if action not in ACTIONS:
            raise InputError(
                f"{spec_path} is a {action} spec; token counts need a train or rl spec (policy.model_max_length, custom.vision)",
                where="--spec",
                fix="pass the train (or rl) spec of the run, or leave --spec out for the train template's settings",
            )
    if assignments:
        from skillbank.specification.build import with_assignments

        data = with_assignments(skill, action, data, assignments)[0]
        source += " with " + " ".join(f"--set {a}" for a in assignments)
    spec: Any = validate(spec_model(skill, action), data, source=source)
    model_name = spec.policy.model_name_or_path
    patch = env_checks.patch_size(env_checks.resolve("policy.model_name_or_path", model_name)) if model_name.strip() else 16
    budget = VisionBudget.from_train_spec(spec, patch) if action == "train" else rl_budget(spec, patch)
    return Budget(budget, source, action, model_name)


def _answers(record: dict[str, Any]) -> list[str]:
    """Every gpt turn's text, stripped, in order: a multi-turn record trains on each of them."""
    return [turn["value"].strip() for turn in record.get("conversations") or ()
            if isinstance(turn, dict) and str(turn.get("from", "")).lower() in ("gpt", "assistant") and isinstance(turn.get("value"), str)]


def turn_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Answers per turn index (turn 1 = each record's first answer), records by their number of answers,
    and the total: every assistant turn trains (the loss covers each one, on both backends)."""
    per_turn: Counter[int] = Counter()
    by_count: Counter[int] = Counter()
    for record in records:
        n = len(_answers(record))
        by_count[n] += 1
        per_turn.update(range(1, n + 1))
    return {"answers": sum(per_turn.values()), "per_turn": {str(k): per_turn[k] for k in sorted(per_turn)},
            "records_by_answers": {str(k): by_count[k] for k in sorted(by_count)},
            "multi_turn_records": sum(c for k, c in by_count.items() if k > 1)}


def _video(record: dict[str, Any]) -> str | None:
    video = record.get("video")
    if isinstance(video, list):
        video = video[0] if video else None
    return video if isinstance(video, str) and video else None


def _fps(record: dict[str, Any]) -> float | None:
    fps = record.get("video_fps")
    return float(fps) if type(fps) in (int, float) and 0 < fps < math.inf else None


def _probe(records: list[dict[str, Any]], wanted: list[int], root: str) -> tuple[dict[int, Clip], list[dict[str, Any]]]:
    """Clips of the `wanted` records from their container headers; the failures (record, id, video, reason)."""
    from skillbank.data.probe import probe_cached

    paths = {i: os.path.normpath(os.path.join(root, _video(records[i]) or "")) for i in wanted}
    infos = probe_cached(paths.values()).results  # cached by path, size and mtime: plan and preflight read the same
    clips, failed = {}, []
    for i, path in paths.items():
        info = infos[path]
        if isinstance(info, str):
            failed.append({"record": i, "id": records[i].get("id"), "video": path, "reason": info})
        else:
            clips[i] = Clip(info.num_frames, info.video_fps, info.width, info.height)
    return clips, failed


def data_stats(annotations: str, budget: Budget, *, probe: bool = False, media: str = "") -> dict[str, Any]:
    """The stats document of one annotations file (see the module docstring)."""
    records = read_annotations(annotations)
    videos = [i for i, r in enumerate(records) if _video(r) is not None]
    images = sum(1 for r in records if r.get("image") is not None and _video(r) is None)
    clips = {i: clip for i in videos if (clip := clip_from_record(records[i])) is not None and _fps(records[i]) is not None}
    rates = {i: f for i in videos if (f := _fps(records[i])) is not None}  # stated, else probed
    probed: dict[str, Any] | None = None
    if probe:
        root = media_root(media, annotations)
        if not os.path.isdir(root):
            raise InputError(f"media root {root} is not a folder", where="--media-root", fix="pass --media-root DIR: the folder the records' video paths are relative to")
        wanted = [i for i in videos if i not in clips]
        found, failed = _probe(records, wanted, root)
        clips.update(found)
        rates.update({i: c.video_fps for i, c in found.items() if i not in rates})
        probed = {"media_root": root, "clips": len(wanted), "failed": len(failed), "failures": failed[:FIRST]}
    else:
        clips.update({i: c for i in videos if i not in clips and (c := clip_from_record(records[i])) is not None})  # a duration without video_fps

    families: Counter[str] = Counter()
    answers: dict[str, Counter[str]] = defaultdict(Counter)  # every answer of every turn
    holding: dict[str, Counter[str]] = defaultdict(Counter)  # records holding the answer at some turn
    for record in records:
        family = record.get("family")
        family = str(family) if family is not None else NO_FAMILY
        families[family] += 1
        said = _answers(record)
        answers[family].update(said)
        holding[family].update(set(said))

    b = budget.budget
    tally, over, unsampleable = TokenTally(), [], []
    for i in sorted(clips):
        try:
            est = b.estimate(clips[i], text_chars(records[i]))
        except ValueError:
            unsampleable.append(i)  # nframes above the clip's frames: qwen_vl_utils raises
            continue
        tally.add(est, clips[i])
        if est.high > b.model_max_length:
            over.append(i)
    longest = b.longest_safe_clip()
    per_clip: dict[str, Clip] = {}
    for i in sorted(clips):  # a clip asked about twice counts once; its first record's length
        per_clip.setdefault(str(_video(records[i])), clips[i])
    length = lengths(per_clip.values())
    return {
        "annotations": annotations,
        "records": len(records),
        "videos": len(videos),
        "images": images,
        "families": dict(families.most_common()),
        "answers": {
            family: {"distinct": len(counts),
                     "top": [{"answer": a, "records": holding[family][a], "answers": n} for a, n in counts.most_common(TOP_ANSWERS)]}
            for family, counts in sorted(answers.items())
        },
        "turns": turn_counts(records),
        "clips": {
            "with_length": len(clips),
            "without_length": len(videos) - len(clips),
            "distinct_with_length": length["clips"],
            "duration_s": length["duration_s"],  # per clip, as `data import` states them (intake.report.lengths)
            "total_duration_s": length["total_duration_s"],
            "with_fps": len(rates),
            "video_fps": spread(list(rates.values()), 3),
            "frame_rates": {f"{r:g}": n for r, n in Counter(round(r, 3) for r in rates.values()).most_common(TOP_ANSWERS)},
        },
        "probed": probed,
        "vision": budget.to_dict(),
        "tokens_per_sample": tally.to_dict(),
        "longest_safe_clip_s": round(longest, 3) if longest is not None else None,
        "over_budget": {"records": len(over), "first_records": over[:FIRST]},
        "unsampleable": {"records": len(unsampleable), "first_records": unsampleable[:FIRST]},
    }


def lines(doc: dict[str, Any]) -> list[str]:
    """The stats for a person: one line per topic."""
    out = [f"{doc['annotations']}: {doc['records']:,} records ({doc['videos']:,} video, {doc['images']:,} image)"]
    fams = doc["families"]
    if set(fams) != {NO_FAMILY}:
        out.append("families: " + ", ".join(f"{k or '(none)'} {n:,}" for k, n in fams.items()))
    t = doc["turns"]
    per_turn = ", ".join(f"turn {k}: {n:,}" for k, n in t["per_turn"].items())
    out.append(f"answers: {t['answers']:,} ({per_turn})" + (f"; {t['multi_turn_records']:,} multi-turn record(s), every assistant turn trains"
                                                            if t["multi_turn_records"] else ""))
    for family, a in doc["answers"].items():
        top = ", ".join(f"{t['answer'][:40]!r} {t['answers']:,}" for t in a["top"])
        out.append(f"answers{' (' + family + ')' if family else ''}: {a['distinct']:,} distinct; top {top}")
    c = doc["clips"]
    if c["duration_s"]:
        out.append(f"clip lengths: {lengths_text({'clips': c['distinct_with_length'], **c})} ({c['with_length']:,} record(s) state one)")
    if c["without_length"]:
        out.append(f"clips: {c['without_length']:,} video records state no length (pass --probe to read the containers, or `skillbank data fix` to write them)")
    if c["frame_rates"]:
        out.append("frame rates: " + ", ".join(f"{r} fps {n:,}" for r, n in c["frame_rates"].items()))
    if doc["probed"]:
        p = doc["probed"]
        out.append(f"probed: {p['clips']:,} clip(s) under {p['media_root']}, {p['failed']:,} unreadable" + "".join(f"; record {f['record']}: {f['reason']}" for f in p["failures"][:2]))
    v = doc["vision"]
    sampling = f"fps {v['fps']:g}" if v["fps"] is not None else f"nframes {v['nframes']}"
    out.append(f"vision ({v['source']}): {sampling}, total_pixels {v['total_pixels']:,}, patch {v['patch_size']}, model_max_length {v['model_max_length']:,}")
    t = doc["tokens_per_sample"]
    if t:
        out.append(f"tokens per sample ({t['bound']} bound, {t['samples']:,} samples): mean {t['mean']:,.0f}, min {t['min']:,}, max {t['max']:,}")
    if doc["longest_safe_clip_s"] is not None:
        out.append(f"longest clip that fits a typical sample: ~{doc['longest_safe_clip_s']:.0f} s")
    if doc["over_budget"]["records"]:
        o = doc["over_budget"]
        out.append(f"over model_max_length: {o['records']:,} record(s) (first: {', '.join(map(str, o['first_records']))}); `skillbank preflight` names each")
    if doc["unsampleable"]["records"]:
        u = doc["unsampleable"]
        out.append(f"shorter than nframes: {u['records']:,} record(s) (first: {', '.join(map(str, u['first_records']))})")
    return out


def spec_path_arg(value: str | None) -> str | None:
    if value is not None and not Path(value).is_file():
        raise InputError(f"spec file not found: {value}", where="--spec", fix="pass the path of a train (or rl) spec, e.g. one `skillbank spec ... -o train.yaml` wrote")
    return value
