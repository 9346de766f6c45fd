"""Embeddings of records (video + question) for mining.

The default embedder is the model being trained: its last hidden states, mean-pooled over the prompt
tokens (system prompt, video tokens and question: what evaluation feeds it), L2-normalised. The
prompt is built by the evaluation data path (skillbank.data.prompts.PromptBuilder ->
ExampleBuilder.model_inputs(generation=True)), so the frames and resolution are the ones evaluation
and training see. No extra model, offline, and the same code runs Cosmos-Reason.

Another embedder (Cosmos-Embed, a CLIP, ...) plugs in as `mining.embedder: "package.module:function"`,
a function (records: list[dict], media_dir: str) -> float32 array [len(records), d]; it embeds pool
and gaps alike.

Pool embeddings are cached under <output_dir>/embeddings/<key>.npy, the key covering the embedder,
the model's weights (path, sizes, mtimes), the pool file's sha256, the media folder and the vision
settings: later rounds and resumes reuse them while the model is unchanged. They are written chunk
by chunk into a memory map, so an interrupted embedding of a large pool resumes at its last chunk.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from skillbank import atomic
from skillbank.errors import InputError

Embedder = Callable[[list[dict[str, Any]], str], Any]


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def model_stamp(model_path: str) -> list[tuple[str, int, int]]:
    folder = Path(model_path)
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []
    return [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def load_hook(ref: str) -> Embedder:
    module, _, name = ref.partition(":")
    if not module or not name:
        raise InputError(f"mining.embedder {ref!r} is neither 'model' nor module:function", where="mining.embedder",
                         fix="use 'model' or e.g. 'my_embedders.cosmos_embed:embed'")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot load mining.embedder {ref!r}: {exc}", where="mining.embedder",
                         fix="make the module importable (installed or on PYTHONPATH) and name a function in it") from None
    return fn


class ModelEmbedder:
    """Mean-pooled last hidden states of a VLM over each record's generation prompt."""

    def __init__(self, model_path: str, eval_spec: Any, *, batch_size: int = 16) -> None:
        from skillbank.evaluation.evaluate import resolve_settings

        self.model_path = model_path
        self.spec = resolve_settings(eval_spec, model_path)[0]  # the vision settings evaluation uses for this model
        self.batch_size = batch_size
        self._loaded: Any = None

    def key_fields(self) -> dict[str, Any]:
        v = self.spec.vision
        return {"embedder": "model", "model": self.model_path, "weights": model_stamp(self.model_path),
                "vision": [v.fps, v.num_frames, v.total_pixels, v.max_pixels], "system_prompt": system_prompt(self.spec, self.model_path)}

    def __call__(self, records: list[dict[str, Any]], media_dir: str) -> Any:
        import numpy as np
        import torch

        from skillbank.data.examples import VisionSettings
        from skillbank.data.prompts import PromptBuilder, collate_left
        from skillbank.evaluation.model import load_model

        if self._loaded is None:
            self._loaded = load_model(self.model_path, dtype=self.spec.model.dtype, num_gpus=self.spec.num_gpus)
        loaded = self._loaded
        v = self.spec.vision
        vision = VisionSettings(fps=v.fps, nframes=v.num_frames, total_pixels=v.total_pixels, max_pixels=v.max_pixels)
        builder = PromptBuilder(loaded.processor, vision=vision, system_prompt=system_prompt(self.spec, loaded.path), media_path=media_dir)
        pad = loaded.processor.tokenizer.pad_token_id
        body = getattr(loaded.model, "model", loaded.model)  # the VL body without the LM head
        dtype = next(loaded.model.parameters()).dtype
        out = []
        with torch.inference_mode():
            for start in range(0, len(records), self.batch_size):
                items = [builder(r) for r in records[start : start + self.batch_size]]
                batch = {k: t.to(loaded.device) for k, t in collate_left(items, pad).items()}
                batch["pixel_values_videos"] = batch["pixel_values_videos"].to(dtype)
                hidden = body(**batch).last_hidden_state.float()
                mask = batch["attention_mask"].unsqueeze(-1).float()
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                out.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, 1), np.float32)


def system_prompt(spec: Any, model_path: str) -> str:
    """The system prompt evaluation uses: the config's, else the model's recipe's, else its answer
    type's default for this model's prompt family (skillbank.evaluation.evaluate.resolve_settings)."""
    from skillbank.evaluation.evaluate import resolve_settings
    from skillbank.recipe import model_type_of, prompt_family_of
    from skillbank.specification.evaluate import default_prompt

    spec = resolve_settings(spec, model_path)[0]
    family = spec.evaluation.prompt_family
    family = prompt_family_of(model_type_of(model_path)) if family == "auto" else family
    return default_prompt(spec.evaluation.answer_type or "short", family, spec.dataset.system_prompt)[0]


def make_embedder(ref: str, model_path: str, eval_spec: Any, *, batch_size: int) -> tuple[Embedder, dict[str, Any]]:
    """(embedder, its cache-key fields)."""
    if ref == "model":
        e = ModelEmbedder(model_path, eval_spec, batch_size=batch_size)
        return e, e.key_fields()
    return load_hook(ref), {"embedder": ref}


def cached_embeddings(cache_dir: Path, key_fields: dict[str, Any], n: int, embed: Callable[[int, int], Any],
                      *, chunk: int = 4096) -> tuple[Any, Path, bool]:
    """(embeddings [n, d], file, reused): embed rows [start, stop) chunk by chunk into a memory-mapped
    `<key>.partial.npy` (progress in `<key>.partial.json`), so a pool of millions never sits in memory
    twice and a killed run resumes at the last finished chunk; the finished file is renamed to `<key>.npy`."""
    import numpy as np

    key = hashlib.sha256(json.dumps(key_fields, sort_keys=True, default=str).encode()).hexdigest()[:20]
    path = cache_dir / f"{key}.npy"
    if path.is_file():
        return np.load(path, mmap_mode="r"), path, True
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial, progress = cache_dir / f"{key}.partial.npy", cache_dir / f"{key}.partial.json"
    done = json.loads(progress.read_text(encoding="utf-8"))["done"] if progress.is_file() and partial.is_file() else 0
    out = np.lib.format.open_memmap(partial, mode="r+") if done else None
    for start in range(done, n, chunk):
        block = np.ascontiguousarray(embed(start, min(n, start + chunk)), dtype=np.float32)
        if out is None:
            out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=(n, block.shape[1]))
        out[start : start + len(block)] = block
        out.flush()
        atomic.write_json(progress, {"done": start + len(block), "of": n})
    if out is None:  # an empty set
        out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=(0, 1))
    del out
    atomic.write_json(cache_dir / f"{key}.json", key_fields)
    os.replace(partial, path)
    progress.unlink(missing_ok=True)
    return np.load(path, mmap_mode="r"), path, False
