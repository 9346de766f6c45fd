"""LLaVA record -> generation prompt tensors, and left-padded batches of them.

The training data path does the work: ExampleBuilder.model_inputs(generation=True) decodes and
samples the frames, sizes them and builds the chat exactly as for a training example, so evaluation
sees the frames and resolution training saw. What differs is only the end of the prompt
(`add_generation_prompt=True`, no answer, no labels) and the padding side (left, for batched generate).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from skillbank.data import chat, video
from skillbank.data.examples import ExampleBuilder, VisionSettings
from skillbank.errors import InputError

SHOWN = 5


def check_videos(records: list[dict[str, Any]], media_path: str, *, where: str) -> None:
    """Fail before loading any model when videos are missing (how many, the first few)."""
    missing = []
    for i, record in enumerate(records):
        path = chat.video_path(record, media_path)
        if not Path(path).is_file():
            missing.append(f"record {i} ({record.get('id', '?')}): {path}")
    if missing:
        shown = "; ".join(missing[:SHOWN])
        raise InputError(
            f"{len(missing)} video(s) not found: {shown}{'; ...' if len(missing) > SHOWN else ''}",
            where=where,
            fix="check dataset.media_dir: record video paths are relative to it",
        )


def with_question_suffix(record: dict[str, Any], suffix: str, turn: int = 0) -> dict[str, Any]:
    """A copy of the record whose question of assistant turn `turn` (chat.question_position: 0 the
    first, -1 the last) ends with `suffix` (the input is not modified)."""
    if not suffix:
        return record
    at = chat.question_position(record, turn)
    turns = [dict(t) for t in record.get("conversations", [])]
    if at is not None:
        turns[at]["value"] = str(turns[at].get("value", "")).rstrip() + suffix
    return {**record, "conversations": turns}


class PromptBuilder:
    """Turns a record into the tensors of its generation prompt (no batch dimension).

    question_suffix: appended to the asked question (Cosmos-Reason2's reasoning instruction).
    turn: the assistant turn whose answer the prompt stops before (chat.build_messages): 0, the first
    (GRPO, embeddings); -1, the last (evaluate, whose records chat.through_turn cut at the asked turn).
    """

    def __init__(
        self, processor: Any, *, vision: VisionSettings, system_prompt: str, media_path: str | os.PathLike[str] = "", question_suffix: str = "",
        turn: int = 0,
    ) -> None:
        # the training builder owns the data path; no cache, nothing kept in memory
        self.examples = ExampleBuilder(
            processor, model_path="", vision=vision, system_prompt=system_prompt, media_path=media_path, cache_root=None, memory=False
        )
        self.question_suffix = question_suffix
        self.turn = turn

    def parts(self, record: dict[str, Any]) -> tuple[str, Any, Any, dict[str, Any]]:
        """(chat text, sampled frames, their metadata, the processor's video keywords): an engine that runs
        the processor itself (vLLM) gets these."""
        try:
            return self.examples.prompt_parts(with_question_suffix(record, self.question_suffix, self.turn), generation=True, turn=self.turn)
        except video.DecodeError as exc:
            raise InputError(str(exc), where=f"record {record.get('id', '?')}", fix="re-encode or remove the video") from None

    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        try:
            out = self.examples.model_inputs(with_question_suffix(record, self.question_suffix, self.turn), generation=True, turn=self.turn)
        except video.DecodeError as exc:
            raise InputError(str(exc), where=f"record {record.get('id', '?')}", fix="re-encode or remove the video") from None
        item = {
            "input_ids": out["input_ids"][0],
            "pixel_values_videos": out["pixel_values_videos"],
            "video_grid_thw": out["video_grid_thw"],
        }
        if "second_per_grid_ts" in out:
            import torch

            item["second_per_grid_ts"] = torch.as_tensor(out["second_per_grid_ts"], dtype=torch.float32)
        return item


def collate_left(items: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Left-pad the prompts (generation appends on the right); concatenate the vision tensors."""
    import torch

    longest = max(item["input_ids"].shape[0] for item in items)
    ids, mask = [], []
    for item in items:
        t = item["input_ids"]
        pad = longest - t.shape[0]
        ids.append(torch.cat([t.new_full((pad,), pad_token_id), t]))
        mask.append(torch.cat([torch.zeros(pad, dtype=torch.long), torch.ones(t.shape[0], dtype=torch.long)]))
    batch = {
        "input_ids": torch.stack(ids),
        "attention_mask": torch.stack(mask),
        "pixel_values_videos": torch.cat([item["pixel_values_videos"] for item in items]),
        "video_grid_thw": torch.cat([item["video_grid_thw"] for item in items]),
    }
    if all("second_per_grid_ts" in item for item in items):
        batch["second_per_grid_ts"] = torch.cat([item["second_per_grid_ts"] for item in items])
    return batch
