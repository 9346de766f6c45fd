"""One pass over an annotations file: every record's rules, then what only the whole dataset shows.

Per record (records.py): object, id, conversations, one media key, video_fps. Across records:
unique ids, media files present under the media folder and not escaping it, video and image
records mixed, overlap with the validation set, clip lengths against the token budget, and a
random sample of videos for --decode-sample. Memory stays flat: one batch of parsed records at a
time, plus the ids and the distinct media paths seen.
"""

from __future__ import annotations

import gc
import math
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from skillbank.preflight import media as media_mod
from skillbank.data.jsonstream import ArrayFormatError, iter_batches
from skillbank.preflight.records import Columns, Media, RecordChecker, Wants, fast_columns
from skillbank.preflight.report import Findings
from skillbank.preflight.vision import Estimate, TokenTally, VisionBudget, clip_from_record, text_chars


@dataclass
class Dataset:
    """What a dataset's scan leaves behind for the checks that span datasets and for the stats."""

    role: str
    file: str
    records: int = 0
    videos: int = 0
    images: int = 0
    complete: bool = True  # False when a format error stopped the scan
    ids: list[Any] = field(default_factory=list)  # per record, None when unusable
    keys: dict[tuple[Media, str], int] = field(default_factory=dict)  # (media, question) -> index (val only)
    media_root: str = ""
    sample: list[tuple[int, dict[str, Any], str]] = field(default_factory=list)  # (index, record, video file)
    with_meta: int = 0
    tokens: TokenTally = field(default_factory=TokenTally)  # tokens per sample of the clips whose length is known
    folders_listed: int = 0  # media folders read (one os.scandir each, however many records)
    probe: list[tuple[int, str, int, Any]] = field(default_factory=list)  # (index, video path as written, text chars, id): clips to probe


PROBE_ALL = -1  # ScanOptions.probe_sample: every record without a full clip description


@dataclass
class ScanOptions:
    media_root: str
    keep_keys: bool = False  # keep (media, question) keys: this is the set others are compared with
    overlap_with: Dataset | None = None
    budget: VisionBudget | None = None
    decode_sample: int = 0
    seed: int = 0
    probe_sample: int = 0  # records without a full clip description kept for the header probe: K spread over the file, PROBE_ALL every one


@contextmanager
def _no_gc() -> Iterator[None]:
    """Parsed records hold no cycles; the collector would only rescan them (a third of the time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def scan(role: str, file: str, options: ScanOptions, findings: Findings) -> Dataset:
    scanner = _Scanner(role, file, options, findings)
    with _no_gc():
        try:
            for batch in iter_batches(file):
                scanner.batch(batch)
        except ArrayFormatError as exc:
            scanner.data.complete = False
            findings.error(
                "annotations.format",
                f"{exc.message} (line {exc.line}, column {exc.column}); the records before it were checked, the rest of the file was not",
                "fix the JSON at that line and column (a JSON array of objects: [{...}, {...}])",
                f"{file}:{exc.line}:{exc.column}",
            )
        except OSError as exc:
            scanner.data.complete = False
            findings.error("annotations.format", f"cannot read the annotations: {exc.strerror or exc}", "check the path and its permissions", file)
    scanner.finish()
    return scanner.data


class _Scanner:
    def __init__(self, role: str, file: str, options: ScanOptions, findings: Findings) -> None:
        self.data = Dataset(role, file)
        self.options, self.findings = options, findings
        self.checker = RecordChecker(file, findings)
        self.media = media_mod.MediaIndex(options.media_root)
        self.data.media_root = self.media.root
        self.media_bad: dict[str, str] = {}
        self.root_ok = os.path.isdir(self.media.root)
        self.first: dict[str, int] = {}
        other = options.overlap_with
        self.wants = Wants(questions=options.keep_keys or bool(other and other.keys), meta=options.budget is not None)
        self.rng = random.Random(options.seed)
        self._other_ids: dict[Any, int] | None = None
        self._sample_seen = 0
        self._next_pick = 0
        self._w = 1.0
        self._probe_next, self._probe_step = 0, 1

    # -- per batch -----------------------------------------------------------------------------
    def batch(self, batch: list[Any]) -> None:
        start = self.data.records
        cols = fast_columns(batch, self.wants) or self.checker.columns(batch, start, self.wants)
        self.data.records += len(batch)
        self.data.ids.extend(cols.ids)
        if cols.videos is not None:
            self.data.videos += self._count("video", cols.videos, cols.ids, start)
        if cols.images is not None:
            self.data.images += self._count("image", cols.images, cols.ids, start)
        if self.options.overlap_with is not None:
            self._overlap(cols, start)
        if self.options.keep_keys and cols.questions is not None:
            self._keep_keys(cols, start)
        counted: set[int] = set()
        if cols.meta and self.options.budget is not None:
            counted = self._budget(batch, cols.meta, start)
        if self.options.probe_sample and cols.videos is not None and self.options.budget is not None:
            self._pick_probe(batch, cols.videos, counted, start)
        if self.options.decode_sample and cols.videos is not None:
            self._sample(batch, cols.videos, start)

    def _count(self, kind: str, paths: list[Media], ids: list[Any], start: int) -> int:
        """Records of this media kind in the batch (their files checked on the way)."""
        count = len(paths) - paths.count(None)
        if count and kind not in self.first:
            self.first[kind] = start + next(i for i, p in enumerate(paths) if p is not None)
        self._media(paths, ids, start, kind)
        return count

    def _where(self, index: int) -> str:
        return f"{self.data.file}#{index}"

    def _unique_ids(self) -> None:
        """One set over all ids at the end (C speed); the record-by-record pass only when one repeats."""
        ids = self.data.ids
        distinct = set(ids)
        distinct.discard(None)
        if len(distinct) == len(ids) - ids.count(None):
            return
        first: dict[Any, int] = {}
        for index, rid in enumerate(ids):
            if rid is None:
                continue
            earlier = first.setdefault(rid, index)
            if earlier != index:
                self.findings.error(
                    "annotations.unique_id",
                    f"record {index} (id {rid!r}): field id repeats the id of record {earlier}",
                    "give every record a unique id",
                    self._where(index),
                    group=self.data.file,
                )

    def _media(self, paths: list[Media], ids: list[Any], start: int, kind: str) -> None:
        if not self.root_ok:
            return  # one finding for the missing folder, in finish()
        distinct = set(paths)
        distinct.discard(None)
        if tuple in set(map(type, distinct)):
            distinct = {q for p in distinct for q in (p if type(p) is tuple else (p,))}
        bad = self.media.problems(distinct)
        if bad:
            self.media_bad.update(bad)
            self._report_media(paths, ids, start, kind)

    def _report_media(self, paths: list[Media], ids: list[Any], start: int, kind: str) -> None:
        bad = self.media_bad
        root = self.media.root
        for offset, value in enumerate(paths):
            if value is None:
                continue
            for path in value if type(value) is tuple else (value,):
                verdict = bad.get(path)
                if verdict is None:
                    continue
                index = start + offset
                if verdict == media_mod.ESCAPES:
                    self.findings.error(
                        "annotations.media_escape",
                        f"{_label(index, ids[offset])}: field {kind} {path!r} points outside the media folder {root}",
                        "use a path relative to the media folder, without '..' (or move the file under it)",
                        self._where(index),
                        group=self.data.file,
                    )
                else:
                    self.findings.error(
                        "annotations.media_exists",
                        f"{_label(index, ids[offset])}: field {kind} {path!r} does not exist under the media folder ({self.media.resolve(path)} is missing)",
                        "check the media folder setting and the record's path, or drop the record",
                        self._where(index),
                        group=self.data.file,
                    )

    def _overlap(self, cols: Columns, start: int) -> None:
        other = self.options.overlap_with
        assert other is not None
        hits: dict[int, str] = {}
        other_ids = self._other_ids
        if other_ids is None:
            other_ids = self._other_ids = {rid: i for i, rid in enumerate(other.ids) if rid is not None}
        same_ids = other_ids.keys() & set(cols.ids)
        same_ids.discard(None)
        if same_ids:
            for offset, rid in enumerate(cols.ids):
                if rid in same_ids:
                    hits[offset] = f"id {rid!r} is also record {other_ids[rid]} of {other.file}"
        if other.keys and cols.questions is not None:
            media = cols.videos if cols.videos is not None else cols.images
            if media is not None:
                if other.media_root != self.media.root:  # same file, seen from the other media folder
                    media = [_relative(m, self.media.root, other.media_root) for m in media]
                keys = list(zip(media, cols.questions))
                shared = other.keys.keys() & set(keys)
                if shared:
                    for offset, key in enumerate(keys):
                        if key in shared and offset not in hits and None not in key:
                            hits[offset] = f"same media and question as record {other.keys[key]} of {other.file}"
        for offset in sorted(hits):
            index = start + offset
            self.findings.warning(
                "annotations.overlap",
                f"{_label(index, cols.ids[offset])} of the {self.data.role} set: {hits[offset]} (the {other.role} set overlaps it, so its scores are optimistic)",
                "remove the shared records from one of the two sets",
                self._where(index),
                group=self.data.file,
            )

    def _keep_keys(self, cols: Columns, start: int) -> None:
        media = cols.videos if cols.videos is not None else cols.images
        if media is None:
            return
        keys = self.data.keys
        for offset, key in enumerate(zip(media, cols.questions or ())):
            if key[0] is not None and key[1] is not None:
                keys.setdefault(key, start + offset)

    def _budget(self, batch: list[Any], meta: list[tuple[int, dict[str, Any]]], start: int) -> set[int]:
        """Count the records that state their clip's length; returns their offsets. With every clip probed
        (PROBE_ALL), a record without frame size is left to the probe, which reads it exactly."""
        budget = self.options.budget
        assert budget is not None
        counted: set[int] = set()
        for offset, record in meta:
            clip = clip_from_record(record)
            if clip is None:
                continue
            self.data.with_meta += 1
            if clip.width is None and self.options.probe_sample == PROBE_ALL:
                continue
            counted.add(offset)
            est = check_clip(budget, clip, record, start + offset, self._where(start + offset), self.findings, group=self.data.file)
            if est is not None:
                self.data.tokens.add(est, clip)
        return counted

    def _pick_probe(self, batch: list[Any], videos: list[Media], counted: set[int], start: int) -> None:
        """Keep the records whose clip the token tally will read from its headers (preflight.probing): every one
        (PROBE_ALL: `skillbank plan`), or about K spread over the whole file: every step-th record, the step
        doubling (and every other pick dropped) whenever 2K are kept. Work per picked record, not per record."""
        k, probe = self.options.probe_sample, self.data.probe
        if k != PROBE_ALL and not probe and self._probe_next == 0:
            self._probe_step = max(1, len(batch) // k)  # the first batch: about K of it
        first = 0 if k == PROBE_ALL else max(0, self._probe_next - start)
        step = 1 if k == PROBE_ALL else self._probe_step
        for offset in range(first, len(batch), step):
            value = videos[offset]
            if value is None or offset in counted:
                continue
            path = value[0] if type(value) is tuple else value
            if path in self.media_bad or not self.root_ok:
                continue
            record = batch[offset]
            probe.append((start + offset, path, text_chars(record), record.get("id")))
        if k == PROBE_ALL:
            return
        if first < len(batch):
            self._probe_next = start + first + -(-(len(batch) - first) // step) * step
        while len(self.data.probe) >= 2 * k:
            self.data.probe = self.data.probe[::2]
            self._probe_step *= 2
            self._probe_next = self.data.probe[-1][0] + self._probe_step

    def _sample(self, batch: list[Any], videos: list[Media], start: int) -> None:
        """Reservoir sampling (algorithm L): K uniformly random video records in one pass (all of them when K < 0)."""
        k, rng, sample = self.options.decode_sample, self.rng, self.data.sample
        for offset, value in enumerate(videos):
            if value is None:
                continue
            n = self._sample_seen
            self._sample_seen += 1
            path = value[0] if type(value) is tuple else value
            if path in self.media_bad or not self.root_ok:
                continue
            item = (start + offset, batch[offset], self.media.resolve(path))
            if k < 0:  # --decode-sample all: every video record
                sample.append(item)
                continue
            if len(sample) < k:
                sample.append(item)
                if len(sample) == k:
                    self._w = math.exp(math.log(rng.random() or 1e-12) / k)
                    self._next_pick = n + 1 + self._skip()
            elif n == self._next_pick:
                sample[rng.randrange(k)] = item
                self._w *= math.exp(math.log(rng.random() or 1e-12) / k)
                self._next_pick = n + 1 + self._skip()

    def _skip(self) -> int:
        if self._w >= 1.0:
            return 0
        return int(math.log(self.rng.random() or 1e-12) / math.log(1 - self._w))

    # -- after the last batch ------------------------------------------------------------------
    def finish(self) -> None:
        data = self.data
        data.folders_listed = self.media.folders_listed
        self._unique_ids()
        if data.complete and data.records == 0:
            self.findings.error(
                "annotations.empty",
                f"the {data.role} annotations hold no records",
                "point the spec at a file with records (a JSON array of LLaVA records)",
                data.file,
            )
        if data.videos and data.images:
            self.findings.error(
                "annotations.mixed_media",
                f"{data.videos:,} video records (first: record {self.first['video']}) and {data.images:,} image records "
                f"(first: record {self.first['image']}) in one dataset; the data packer asserts on a mini-batch that mixes them",
                "keep one media type per dataset (split video and image records into separate datasets)",
                data.file,
            )
        if not self.root_ok and (data.videos or data.images):
            self.findings.error(
                "annotations.media_exists",
                f"the media folder {self.media.root} does not exist, so no record's media can be found",
                "set the media folder (custom.*_dataset.media_path / dataset.media_dir) to the folder the records' paths are relative to",
                data.file,
            )

def _relative(media: Media, root: str, other_root: str) -> Media:
    if media is None:
        return None
    if type(media) is tuple:
        return tuple(os.path.relpath(os.path.join(root, m), other_root) for m in media)
    return os.path.relpath(os.path.join(root, media), other_root)


def _label(index: int, rid: Any) -> str:
    return f"record {index} (id {rid!r})" if rid is not None else f"record {index}"


def check_clip(
    budget: VisionBudget, clip: Any, record: dict[str, Any], index: int, where: str, findings: Findings, *, group: str = "", chars: int | None = None
) -> Estimate | None:
    """The vision.budget finding of one clip whose length is known; its token estimate (None when it cannot be sampled).
    `chars`: the record's text characters when the record itself is no longer held (a probed clip)."""
    label = f"record {index} (id {record.get('id')!r})"
    try:
        est = budget.estimate(clip, text_chars(record) if chars is None else chars)
    except ValueError as exc:
        findings.error(
            "vision.budget",
            f"{label}: the clip has {clip.total_frames} frames but custom.vision.nframes asks for {budget.nframes}; qwen_vl_utils raises ({exc})",
            "lower custom.vision.nframes, or use custom.vision.fps, or drop clips this short",
            where,
            group=group,
        )
        return None
    limit = budget.model_max_length
    if est.high <= limit:
        return est
    fix = "lower custom.vision.fps / nframes or custom.vision.total_pixels, trim long clips, or raise policy.model_max_length"
    detail = (
        f"{est.frames} frames of a {clip.duration:.1f} s clip -> about {est.vision_low:,}-{est.vision_high:,} vision tokens "
        f"+ ~{est.text:,} text tokens vs policy.model_max_length {limit:,}"
    )
    if est.low > limit:
        why = "truncation breaks vision-token alignment ('vision_embeds ... must be equal to n_tokens')"
        findings.error("vision.budget", f"{label}: the sample exceeds the token budget ({detail}); {why}", fix, where, group=group)
    else:
        findings.warning("vision.budget", f"{label}: the sample may exceed the token budget ({detail}), depending on the frame size", fix, where, group=group)
    return est
