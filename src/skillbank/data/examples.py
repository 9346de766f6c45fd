"""LLaVA record -> chat -> processor -> training tensors, with an on-disk cache of the results.

One example: input_ids, attention_mask, labels (-100 except the assistant answer tokens and their
<|im_end|>), pixel_values_videos, video_grid_thw (and second_per_grid_ts for Qwen2.5-VL, whose
M-RoPE needs it). Vision settings come from the spec's custom.vision: fps XOR nframes picks the
frames (qwen_vl_utils rules), total_pixels / max_pixels bound each frame's size as qwen_vl_utils
does, so the local backend sees what cosmos-rl's packers see.

The processor is the slow part (tens of ms per clip on CPU), so processed examples are cached per
record under <cache_root>/<key>/ (the trainer's root: `default_cache_root()`, $SKILLBANK_CACHE/examples),
key = (fps, nframes, total_pixels, max_pixels, system prompt, processor files). Each cache folder
holds `cache_key.json` with those fields, so a preflight check can say whether a cache matches a
spec (see `cache_status`); a record's file name hashes the record and its video's size and mtime. Pixel values are stored
as their uint8 source codes when that is lossless (it is for the Qwen processors: 1/4 the bytes).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skillbank.data import chat, video

CACHE_FORMAT = 3  # 2: a record's own system turn replaces the run's system prompt (examples cached by 1 skipped it);
# 3: Qwen3-VL frames at the per-frame budget (format 2 shrank them by the frame count)
CACHE_KEY_FILE = "cache_key.json"
IGNORE_INDEX = -100
PROCESSOR_FILES = (
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "processor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
)


def default_cache_root() -> Path:
    """Where the local trainer caches processed examples: $SKILLBANK_CACHE/examples (never the dataset folder)."""
    from skillbank.paths import cache_dir

    return cache_dir() / "examples"


@dataclass(frozen=True)
class VisionSettings:
    """custom.vision of the spec, with total_pixels already resolved from model_max_length."""

    fps: float | None = 2.0
    nframes: int | None = None
    total_pixels: int | None = None
    max_pixels: int | None = None

    @classmethod
    def from_spec(cls, spec: Any, *, patch_size: int = 14, merge_size: int = 2) -> "VisionSettings":
        """From a TrainSpec: a null total_pixels becomes 90% of model_max_length in pixels."""
        vision = spec.custom.vision
        total = vision.total_pixels
        if total is None:
            total = video.default_total_pixels(spec.policy.model_max_length, (patch_size * merge_size) ** 2)
        return cls(fps=vision.fps, nframes=vision.nframes, total_pixels=total, max_pixels=vision.max_pixels)


def has_processor(folder: str | os.PathLike[str]) -> bool:
    """The folder carries a processor or tokenizer of its own (a LoRA adapter may not)."""
    return any((Path(folder) / name).is_file() for name in PROCESSOR_FILES if name != "config.json")


def pixels_per_token(model_path: str | os.PathLike[str]) -> int | None:
    """(patch_size * merge_size)**2 of a model folder's video processor, from its config files (no
    transformers import); None when the folder has none."""
    for name in ("video_preprocessor_config.json", "preprocessor_config.json"):
        try:
            config = json.loads((Path(model_path) / name).read_text(encoding="utf-8"))
            return (int(config["patch_size"]) * int(config["merge_size"])) ** 2
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def processor_fingerprint(model_path: str | os.PathLike[str]) -> str:
    """A digest of the files that decide tokenization and preprocessing (no transformers import)."""
    digest = hashlib.sha256()
    folder = Path(model_path)
    for name in PROCESSOR_FILES:
        path = folder / name
        if path.is_file():
            digest.update(name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _budget_is_per_clip(processor: Any) -> bool:
    """Whether the video processor reads `size` as pixels of the whole clip (t x h x w), not of one frame.

    Qwen3-VL's video processor (Cosmos-Reason2) resizes with smart_resize(num_frames, h, w, ...): its
    shortest/longest_edge bound all frames together, so a per-frame budget given as is shrinks every frame
    by the frame count (16 frames of 448x448 became 128x128). Qwen2-VL / Qwen2.5-VL's read it per frame.
    The budget is scaled where the processor's module resizes by frame count."""
    import inspect
    import sys

    video_processor = getattr(processor, "video_processor", None)
    module = sys.modules.get(type(video_processor).__module__) if video_processor is not None else None
    resize = getattr(module, "smart_resize", None)
    try:
        return resize is not None and "num_frames" in inspect.signature(resize).parameters
    except (TypeError, ValueError):
        return False


def cache_key_fields(vision: VisionSettings, *, model_path: str | os.PathLike[str], system_prompt: str) -> dict[str, Any]:
    return {
        "format": CACHE_FORMAT,
        **asdict(vision),
        "system_prompt": system_prompt,
        "processor": processor_fingerprint(model_path),
    }


def cache_folder(cache_root: str | os.PathLike[str], fields: dict[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_root) / key


def cache_status(cache_root: str | os.PathLike[str], vision: VisionSettings, *, model_path: str, system_prompt: str) -> dict[str, Any]:
    """Where examples for these settings are cached and whether that folder is usable.

    {"folder", "exists", "stale" (its cache_key.json disagrees), "entries", "expected", "found"}.
    """
    expected = cache_key_fields(vision, model_path=model_path, system_prompt=system_prompt)
    folder = cache_folder(cache_root, expected)
    found = None
    try:
        found = json.loads((folder / CACHE_KEY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    exists = folder.is_dir()
    entries = sum(1 for _ in folder.glob("*.pt")) if exists else 0
    stale = exists and found is not None and {k: found.get(k) for k in expected} != expected
    return {"folder": str(folder), "exists": exists, "stale": stale, "entries": entries, "expected": expected, "found": found}


# ---- pixel codec: normalised floats <-> their uint8 codes ----------------------------------------


class PixelCodec:
    """Pixel values are (code * rescale - mean) / std per channel with integer codes 0..255 (the
    processor resizes uint8 frames): storing the codes is lossless and 1/4 of float32."""

    def __init__(self, processor):
        vp = processor.video_processor
        self.mean = [float(m) for m in vp.image_mean]
        self.std = [float(s) for s in vp.image_std]
        self.scale = float(getattr(vp, "rescale_factor", 1 / 255))
        self._affine: dict[int, tuple] = {}

    def affine(self, width: int):
        """(a, b) per column with code = pixel * a + b (columns are channel-major: C x T x P x P)."""
        if width not in self._affine:
            import torch

            channel = torch.arange(width) // (width // len(self.mean))
            std, mean = torch.tensor(self.std)[channel], torch.tensor(self.mean)[channel]
            self._affine[width] = (std / self.scale, mean / self.scale)
        return self._affine[width]

    def encode(self, pixels) -> dict[str, Any]:
        import torch

        a, b = self.affine(pixels.shape[-1])
        raw = torch.addcmul(b, pixels.float(), a)
        codes = raw.round()
        if float((raw - codes).abs().max()) < 1e-2 and float(codes.min()) >= 0 and float(codes.max()) <= 255:
            return {"codes": codes.to(torch.uint8)}
        return {"float": pixels.float()}

    def decode(self, stored: dict[str, Any]):
        if "float" in stored:
            return stored["float"]
        a, b = self.affine(stored["codes"].shape[-1])
        return (stored["codes"].float() - b) / a


# ---- labels ---------------------------------------------------------------------------------------


def answer_labels(input_ids, tokenizer):
    """-100 everywhere except each assistant turn's tokens and its closing <|im_end|>."""
    import torch

    ids = input_ids.tolist()
    start_id = tokenizer.convert_tokens_to_ids("<|im_start|>")
    end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    header = tokenizer.encode("assistant\n", add_special_tokens=False)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    i = 0
    while i < len(ids):
        if ids[i] == start_id and ids[i + 1 : i + 1 + len(header)] == header:
            j = i + 1 + len(header)
            while j < len(ids) and ids[j] != end_id:
                j += 1
            stop = min(j + 1, len(ids))  # include <|im_end|>
            labels[i + 1 + len(header) : stop] = input_ids[i + 1 + len(header) : stop]
            i = stop
        else:
            i += 1
    return labels


# ---- the builder ----------------------------------------------------------------------------------


class ExampleBuilder:
    """Turns records into tensors with one processor and one set of vision settings.

    cache_root: where processed examples are kept between epochs and runs (None: no disk cache).
    memory: also keep processed examples in this process (compact form) for later epochs.
    """

    def __init__(
        self,
        processor,
        *,
        model_path: str | os.PathLike[str],
        vision: VisionSettings,
        system_prompt: str,
        media_path: str | os.PathLike[str] = "",
        cache_root: str | os.PathLike[str] | None = None,
        memory: bool = True,
    ):
        self.processor = processor
        self.vision = vision
        self.system_prompt = system_prompt
        self.media_path = str(media_path)
        self.memory: dict[str, dict[str, Any]] | None = {} if memory else None
        self.codec = PixelCodec(processor)
        vp = processor.video_processor
        self.min_pixels = int(vp.size["shortest_edge"])
        self.frame_max_pixels = int(vp.size["longest_edge"])
        self.cache_dir: Path | None = None
        if cache_root is not None:
            fields = cache_key_fields(vision, model_path=model_path, system_prompt=system_prompt)
            self.cache_dir = cache_folder(cache_root, fields)
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            key_file = self.cache_dir / CACHE_KEY_FILE
            if not key_file.is_file():
                from skillbank import atomic

                atomic.write_json(key_file, fields)

    # -- pixel budget as qwen_vl_utils computes it
    def frame_pixels(self, nframes: int) -> int:
        budget = video.frame_pixel_budget(
            nframes, total_pixels=self.vision.total_pixels, min_pixels=self.min_pixels,
            frame_max_pixels=self.frame_max_pixels, max_pixels=self.vision.max_pixels,
        )
        return int(max(budget, self.min_pixels))

    def record_key(self, record: dict[str, Any]) -> str:
        path = chat.video_path(record, self.media_path)
        try:
            st = os.stat(path)
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "missing"
        blob = json.dumps(record, sort_keys=True, ensure_ascii=False) + "|" + os.path.abspath(path) + "|" + stamp
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def prompt_parts(self, record: dict[str, Any], *, generation: bool = False, turn: int = 0) -> tuple[str, Any, Any, dict[str, Any]]:
        """What the processor gets for a record: the chat text (the whole chat for training, or with
        generation=True the prompt up to the answer of assistant turn `turn`: chat.build_messages), the sampled frames [T, 3, H, W] (uint8), their
        VideoMetadata and the processor's video keywords. An undecodable video raises video.DecodeError."""
        from transformers.video_utils import VideoMetadata

        path = chat.video_path(record, self.media_path)
        fallback_fps = float(record.get("video_fps") or 0) or 2.0  # when the container has no frame rate

        def pick(total: int, rate: float) -> list[int]:
            return video.sample_indices(total, rate or fallback_fps, fps=self.vision.fps, nframes=self.vision.nframes)

        frames, meta = video.decode_video(path, pick)  # only the sampled frames, converted to RGB
        fps = meta["fps"] or fallback_fps
        total = meta["total_num_frames"]
        indices = pick(total, meta["fps"])
        messages = chat.build_messages(
            record, media_path=self.media_path, system_prompt=self.system_prompt, fps=self.vision.fps, nframes=self.vision.nframes,
            with_answer=not generation, turn=turn,
        )
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        metadata = VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps, frames_indices=indices)
        per_clip = len(indices) if _budget_is_per_clip(self.processor) else 1
        size = {"shortest_edge": self.min_pixels * per_clip, "longest_edge": self.frame_pixels(len(indices)) * per_clip}
        return text, frames, metadata, {"do_sample_frames": False, "fps": len(indices) / total * fps, "size": size}

    def model_inputs(self, record: dict[str, Any], *, generation: bool = False, turn: int = 0):
        """The processor's outputs (batch of one) for a record (see prompt_parts). Training and evaluation
        both come here, so they see the same frames, resolution and chat."""
        text, frames, metadata, kwargs = self.prompt_parts(record, generation=generation, turn=turn)
        return self.processor(text=[text], videos=[frames], video_metadata=[metadata], return_tensors="pt", **kwargs)

    def process(self, record: dict[str, Any]) -> dict[str, Any]:
        """Run decode + processor: input_ids, labels, pixels ({"float": ...}), grid (+ second_per_grid_ts)."""
        import torch

        out = self.model_inputs(record)
        input_ids = out["input_ids"][0]
        labels = answer_labels(input_ids, self.processor.tokenizer)
        if not bool((labels != IGNORE_INDEX).any()):
            raise ValueError(f"record {record.get('id', '?')} has no answer tokens (empty gpt turn?)")
        compact: dict[str, Any] = {
            "input_ids": input_ids.to(torch.int32),
            "labels": labels.to(torch.int32),
            "pixels": {"float": out["pixel_values_videos"]},
            "video_grid_thw": out["video_grid_thw"].to(torch.int32),
        }
        if "second_per_grid_ts" in out:
            compact["second_per_grid_ts"] = torch.as_tensor(out["second_per_grid_ts"], dtype=torch.float32)
        return compact

    def compact(self, record: dict[str, Any]) -> dict[str, Any]:
        import torch

        key = self.record_key(record)
        if self.memory is not None and key in self.memory:
            return self.memory[key]
        item = None
        path = self.cache_dir / f"{key}.pt" if self.cache_dir else None
        if path is not None and path.is_file():
            try:
                item = torch.load(path, map_location="cpu", weights_only=True)
            except Exception:  # noqa: BLE001 - a torn or foreign file is rebuilt
                item = None
        if item is None:
            item = self.process(record)
            if path is not None or self.memory is not None:
                item = {**item, "pixels": self.codec.encode(item["pixels"]["float"])}
            if path is not None:
                from skillbank import atomic

                with atomic.atomic_path(path) as tmp:
                    torch.save(item, tmp)
        if self.memory is not None:
            self.memory[key] = item
        return item

    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        """The training example of one record (tensors without a batch dimension)."""
        import torch

        item = self.compact(record)
        input_ids = item["input_ids"].long()
        example = {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "labels": item["labels"].long(),
            "pixel_values_videos": self.codec.decode(item["pixels"]),
            "video_grid_thw": item["video_grid_thw"].long(),
        }
        if "second_per_grid_ts" in item:
            example["second_per_grid_ts"] = item["second_per_grid_ts"]
        return example


def collate(examples: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Right-pad token tensors; concatenate the vision tensors (the model splits them by grid)."""
    import torch

    longest = max(e["input_ids"].shape[0] for e in examples)

    def pad(key: str, value: int):
        rows = []
        for e in examples:
            t = e[key]
            rows.append(torch.cat([t, t.new_full((longest - t.shape[0],), value)]))
        return torch.stack(rows)

    batch = {
        "input_ids": pad("input_ids", pad_token_id),
        "attention_mask": pad("attention_mask", 0),
        "labels": pad("labels", IGNORE_INDEX),
        "pixel_values_videos": torch.cat([e["pixel_values_videos"] for e in examples]),
        "video_grid_thw": torch.cat([e["video_grid_thw"] for e in examples]),
    }
    if all("second_per_grid_ts" in e for e in examples):
        batch["second_per_grid_ts"] = torch.cat([e["second_per_grid_ts"] for e in examples])
    return batch
