"""Batched answer generation: records -> prompt tensors (prepared ahead on worker threads) ->
left-padded `model.generate` -> decoded answers, in record order, with a tqdm bar on stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from skillbank.evaluation.inputs import collate_left

CACHE_BYTES = 1 << 30  # prepared prompts kept for the next checkpoint of a run (same processor)


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 16
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int = 1

    def generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "repetition_penalty": self.repetition_penalty}
        if self.temperature > 0:
            kwargs.update(do_sample=True, temperature=self.temperature, top_p=self.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        return kwargs


class PromptCache:
    """Prepared prompts by record index, up to a byte budget (what does not fit is rebuilt)."""

    def __init__(self, limit_bytes: int = CACHE_BYTES) -> None:
        self.limit = limit_bytes
        self.used = 0
        self.items: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()  # several preparing threads share it

    def get(self, index: int, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        item = self.items.get(index)
        if item is None:
            item = build()
            size = sum(t.numel() * t.element_size() for t in item.values())
            with self.lock:
                if self.used + size <= self.limit:
                    self.items[index] = item
                    self.used += size
        return item


def prepare_workers() -> int:
    """Threads that decode videos and run the processor while the model generates (one per core, at most 4)."""
    return max(1, min(4, os.cpu_count() or 2))


def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)  # per thread (OpenMP): small preprocessing ops, no oversubscription


def generate_answers(
    model: Any,
    processor: Any,
    builder: Callable[[dict[str, Any]], dict[str, Any]],
    records: Sequence[dict[str, Any]],
    *,
    device: Any,
    batch_size: int = 8,
    settings: GenerationSettings = GenerationSettings(),
    cache: PromptCache | None = None,
    progress: bool = True,
    desc: str = "generating",
) -> list[str]:
    """The model's answer to each record's prompt (special tokens dropped, whitespace stripped).

    Prompts are prepared on worker threads, up to two batches ahead of the one generating.
    """
    import torch
    from tqdm import tqdm

    tokenizer = processor.tokenizer
    pad_id = tokenizer.pad_token_id
    dtype = next(model.parameters()).dtype

    def prepare(i: int) -> dict[str, Any]:
        return cache.get(i, lambda: builder(records[i])) if cache is not None else builder(records[i])

    torch.manual_seed(settings.seed)
    answers: list[str] = []
    bar = tqdm(total=len(records), desc=desc, unit="sample", file=sys.stderr, disable=not progress, dynamic_ncols=True)
    pending: deque[Future[dict[str, Any]]] = deque()
    with ThreadPoolExecutor(max_workers=prepare_workers(), initializer=_one_torch_thread) as pool, torch.inference_mode():
        submitted = 0

        def submit_until(n: int) -> None:
            nonlocal submitted
            while submitted < min(n, len(records)):
                pending.append(pool.submit(prepare, submitted))
                submitted += 1

        for start in range(0, len(records), batch_size):
            submit_until(start + 3 * batch_size)
            items = [pending.popleft().result() for _ in range(min(batch_size, len(records) - start))]
            batch = {key: value.to(device) for key, value in collate_left(items, pad_id).items()}
            batch["pixel_values_videos"] = batch["pixel_values_videos"].to(dtype)
            out = model.generate(**batch, **settings.generate_kwargs(), pad_token_id=pad_id)
            new_tokens = out[:, batch["input_ids"].shape[1] :]
            answers += [text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
            bar.update(new_tokens.shape[0])
    bar.close()
    return answers
