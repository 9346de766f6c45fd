"""Batched answer generation: records -> prompt tensors (prepared ahead on worker threads) ->
left-padded `model.generate` -> decoded answers, in record order, with a tqdm bar on stderr; and the
seed's retries of the answers the scorer cannot read (any engine).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from skillbank import procs
from skillbank.data.prompts import collate_left

CACHE_BYTES = 1 << 30  # prepared prompts kept for the next checkpoint of a run (same processor)


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings of one pass, named as in the evaluate spec's generation section."""

    max_new_tokens: int = 16
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = 1

    @classmethod
    def from_spec(cls, generation: dict[str, Any], seed: int) -> "GenerationSettings":
        """From `GenerationSpec.resolved(answer_type)`."""
        keys = ("temperature", "top_p", "top_k", "repetition_penalty", "presence_penalty", "frequency_penalty")
        return cls(max_new_tokens=int(generation["max_tokens"]), seed=seed, **{k: generation[k] for k in keys})

    def retry(self, k: int) -> "GenerationSettings":
        """Retry pass k (the seed's evaluator): k * 256 more tokens, temperature + 0.05 * k up to 0.9, seed + k."""
        from skillbank.specification.evaluate import RETRY_TEMPERATURE_CAP, RETRY_TEMPERATURE_STEP, RETRY_TOKENS

        hotter = min(self.temperature + RETRY_TEMPERATURE_STEP * k, max(self.temperature, RETRY_TEMPERATURE_CAP))
        return replace(self, max_new_tokens=self.max_new_tokens + RETRY_TOKENS * k, temperature=round(hotter, 6), seed=self.seed + k)

    def generate_kwargs(self, prompt_length: int = 0) -> dict[str, Any]:
        """`model.generate` keywords; presence / frequency penalties become a logits processor."""
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "repetition_penalty": self.repetition_penalty}
        if self.temperature > 0:
            kwargs.update(do_sample=True, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if self.presence_penalty or self.frequency_penalty:
            from transformers import LogitsProcessorList

            kwargs["logits_processor"] = LogitsProcessorList(
                [PresenceFrequencyPenalty(self.presence_penalty, self.frequency_penalty, prompt_length)]
            )
        return kwargs


class PresenceFrequencyPenalty:
    """OpenAI / vLLM presence and frequency penalties, which transformers lacks: each token's logit
    drops by `presence` if it occurs in the answer so far and by `frequency` per occurrence. Only the
    generated tokens count (not the prompt), as in vLLM. A transformers LogitsProcessor."""

    def __init__(self, presence: float, frequency: float, prompt_length: int) -> None:
        self.presence, self.frequency, self.prompt_length = presence, frequency, prompt_length

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        generated = input_ids[:, self.prompt_length :]
        if generated.shape[1] == 0:
            return scores
        counts = scores.new_zeros(scores.shape).scatter_add_(1, generated, scores.new_ones(generated.shape))
        return scores - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)


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


class _StageClock:
    """Adds the seconds since the previous lap to `timings[stage]` (nothing when timings is None)."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
            self.last = now


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
    keys: Sequence[int] | None = None,
    progress: bool = True,
    desc: str = "generating",
    timings: dict[str, float] | None = None,
    lengths: list[int] | None = None,
) -> list[str]:
    """The model's answer to each record's prompt (special tokens dropped, whitespace stripped).

    Prompts are prepared on worker threads, up to two batches ahead of the one generating.
    keys: each record's key in `cache` (default: its position; a retry pass passes the record indices).
    timings: when given, seconds of the generating thread are added to it per stage: "wait_prompts"
    (prompts not prepared yet: decoding and the processor are the bound), "collate", "generate", "decode".
    lengths: when given, each answer's generated tokens before its stop token are appended to it (an
    answer that never stopped counts settings.max_new_tokens: it was cut off there).
    """
    import torch
    from tqdm import tqdm

    tokenizer = processor.tokenizer
    pad_id = tokenizer.pad_token_id
    dtype = next(model.parameters()).dtype

    def prepare(i: int) -> dict[str, Any]:
        return cache.get(keys[i] if keys is not None else i, lambda: builder(records[i])) if cache is not None else builder(records[i])

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

        clock = _StageClock(timings)
        for start in range(0, len(records), batch_size):
            procs.raise_if_stopped()  # a safe point: SIGTERM / Ctrl-C under procs.stop_on_signals (a study, DEFT) ends here
            submit_until(start + 3 * batch_size)
            items = [pending.popleft().result() for _ in range(min(batch_size, len(records) - start))]
            clock.lap("wait_prompts")
            batch = {key: value.to(device) for key, value in collate_left(items, pad_id).items()}
            batch["pixel_values_videos"] = batch["pixel_values_videos"].to(dtype)
            clock.lap("collate")
            out = model.generate(**batch, **settings.generate_kwargs(batch["input_ids"].shape[1]), pad_token_id=pad_id)
            clock.lap("generate")
            new_tokens = out[:, batch["input_ids"].shape[1] :]
            answers += [text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
            if lengths is not None:
                lengths += stopped_lengths(new_tokens.tolist(), stop_ids(model, pad_id), settings.max_new_tokens)
            clock.lap("decode")
            bar.update(new_tokens.shape[0])
    bar.close()
    return answers


def stop_ids(model: Any, pad_id: int | None) -> set[int]:
    """The tokens that end an answer: the generation config's eos (one or several) and the padding after it."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
    return ids | ({pad_id} if pad_id is not None else set())


def stopped_lengths(rows: list[list[int]], stops: set[int], max_new_tokens: int) -> list[int]:
    """Tokens each generated row holds before its first stop token; max_new_tokens for a row that never stopped."""
    return [next((i for i, token in enumerate(row) if token in stops), max_new_tokens) for row in rows]


Engine = Callable[[list[int], GenerationSettings], list[str]]  # (record indices, settings) -> responses


def generate_with_retries(
    engine: Engine, count: int, settings: GenerationSettings, *, max_retries: int, unscorable: Callable[[list[str]], list[int]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """Every record's response, regenerating the ones `unscorable` flags up to `max_retries` passes.

    Pass k regenerates only the records still flagged, with `settings.retry(k)`; a record takes the new
    response when it is no longer flagged (else it keeps its first one, as the seed's evaluator does).
    A pass that fixes nothing ends the retries (the next, a little longer and warmer, rarely does better,
    and each pass costs a full generation of the flagged records).
    Returns the responses and one {pass, regenerated, fixed, max_new_tokens, temperature} per pass.
    """
    responses = engine(list(range(count)), settings)
    flagged = unscorable(responses)
    passes: list[dict[str, Any]] = []
    for k in range(1, max_retries + 1):
        if not flagged:
            break
        retry = settings.retry(k)
        candidate = list(responses)
        for i, text in zip(flagged, engine(flagged, retry), strict=True):
            candidate[i] = text
        still = set(unscorable(candidate))
        fixed = [i for i in flagged if i not in still]
        for i in fixed:
            responses[i] = candidate[i]
        passes.append({"pass": k, "regenerated": len(flagged), "fixed": len(fixed),
                       "max_new_tokens": retry.max_new_tokens, "temperature": retry.temperature})
        flagged = [i for i in flagged if i in still]
        if not fixed:
            break
    return responses, passes
