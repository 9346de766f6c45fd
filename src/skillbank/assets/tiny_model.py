"""The embedded default model: a random-init tiny Qwen2.5-VL or Qwen3-VL built offline.

Same architecture classes, processor and chat template as Cosmos-Reason1 (qwen2_5_vl) and
Cosmos-Reason2 (qwen3_vl), scaled down until a CPU can train it in minutes; the tokenizer is a
byte-level BPE trained here on text that contains every demo question and answer word, so the
tokenizer needs no download either. The default size ("learnable": text and vision hidden 128,
2 layers each, ~1.2M parameters) is the smallest measured to learn the demo tasks (docs: cpu-stack).
The output folder loads with AutoProcessor and AutoModelForImageTextToText under HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from skillbank.assets import store
from skillbank.errors import InputError

FAMILIES: tuple[str, ...] = ("qwen2_5_vl", "qwen3_vl")
KIND = "tiny-model"

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Qwen2-VL's chat template (as shipped with Qwen2-VL-Instruct): both families use it here.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Qwen2's pre-tokenizer split: contractions, letters, single digits, punctuation, newlines, spaces.
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Per-frame pixel budgets of the image / video processors (small: a 64x64 clip becomes 56x56 or 64x64).
MIN_PIXELS = 28 * 28 * 4
MAX_PIXELS = 28 * 28 * 256


@dataclass(frozen=True)
class TinySize:
    """Layer sizes; the defaults are the measured "learnable" configuration (~1.24M parameters)."""

    vocab_size: int = 1024
    text_hidden: int = 128
    text_intermediate: int = 256
    text_layers: int = 2
    text_heads: int = 4
    text_kv_heads: int = 2
    vision_hidden: int = 128
    vision_intermediate: int = 256
    vision_depth: int = 2
    vision_heads: int = 4

    @property
    def head_dim(self) -> int:
        return self.text_hidden // self.text_heads

    @property
    def mrope_section(self) -> list[int]:
        """Split head_dim/2 rotary frequencies over (time, height, width); must sum to head_dim/2."""
        half = self.head_dim // 2
        t = half // 4
        h = (half - t) // 2
        return [t, h, half - t - h]


# Everyday English for the rest of the vocabulary (so BPE reaches ~1024 tokens on fixed local text).
COMMON_WORDS = """
about above across action after again against age ago air all almost alone along already also always among
amount angle animal another answer any appear apple area around arrive ask away back background ball base
because become before begin behind below best better between big bird black block blue board boat body book
both bottom box boy bright bring brown build busy call camera can car carry case cause centre change check
child circle city class clear clip close cloud cold colour come common complete consider contain continue
control corner could count course cover cross cut dark day decide deep describe detail different direction
distance does dog done door down draw drive during each early earth east edge effect empty end enough even
evening event every example face fact fall far fast few field figure fill final find fine fire first fish
five floor follow food foot force form forward four frame free friend from front full game general get give
glass go good great green ground group grow half hand happen hard have head hear heavy help here high hold
home horizontal house how idea image important inside into issue just keep kind know land large last late
lead learn leave left length less level light like line list little live long look low machine main make
many mark matter may mean measure middle might mind minute model moment more morning most motion move much
must name near need never new next night none north note nothing now number object often old once only open
order other outside over own page paint part pass path pattern people picture piece place plain plan play
point position power press problem program pull push question quick quiet reach read ready real reason red
region remain report rest result return right road rock roll room round rule run same scene screen second
see seem shape short should show side sign simple since size slow small so some sound south space speed
stand start state stay step still stop straight street strong such sun sure surface system table take talk
tell test than then there these thing think those three through time today together too top toward track
travel tree true try turn two under until upon usual vertical very video view wait walk wall want watch
water way week well west what wheel when where which while white whole why wide will window with within
without word work world would write year yellow yes yet young zero
"""


def tokenizer_corpus() -> str:
    """Local text the BPE is trained on: chat markup, the demo prompts, answers and timestamps."""
    from skillbank.assets import demo_dataset as demo

    # chat markup words are repeated so BPE keeps them whole ("assistant" is one token)
    lines = ["system\nuser\nassistant\n"] * 64 + [
        "You are a helpful assistant.",
        "You are a helpful assistant. Answer the question about the video with a short answer.",
        "Picture 1: Video 1: Video 2: Picture 2:",
    ]
    for colour in demo.COLOURS:
        for prompt in demo.prompts_for(colour):
            lines.append(prompt)
    # answers start a line in the chat ("assistant\nyes"), so teach them without a leading space too
    lines += [f"assistant\n{w}" for w in demo.ANSWER_WORDS for _ in range(32)]
    lines += [" ".join(demo.ANSWER_WORDS), " ".join(w.capitalize() for w in demo.ANSWER_WORDS)]
    lines += [f"<{t / 10:.1f} seconds>" for t in range(0, 200)]
    lines += [
        "The ball moves to the left. The ball moves to the right. The ball stays still or moves up and down.",
        "yes no left right straight red green blue yellow black white up down static moving ball square colour color",
        "What is happening in the video? Describe the motion of the object. Which way does it go?",
        "the a an is are was of to in on at it this that with for and or not one two three four",
        "0 1 2 3 4 5 6 7 8 9 10 100 . , ? ! : ; ' \" ( ) [ ] { } - _ / \\ + = * # @ % & < >",
    ]
    words = COMMON_WORDS.split()
    lines += [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    lines += [" ".join(w.capitalize() for w in words[i : i + 12]) for i in range(0, len(words), 24)]
    return "\n".join(lines) * 4


def build_tokenizer(vocab_size: int = 1024):
    """A byte-level BPE (Qwen2 pre-tokenization) wrapped as Qwen2TokenizerFast with the chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tokenizer_corpus().splitlines(), trainer=trainer)
    wrapped = Qwen2TokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _token_ids(tok) -> dict[str, int]:
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    return dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )


def _text_config(tok, size: TinySize, ids: dict, **family) -> dict:
    """The language-model config both families share; `family` adds or overrides their own keys."""
    return dict(
        vocab_size=len(tok),
        hidden_size=size.text_hidden,
        intermediate_size=size.text_intermediate,
        num_hidden_layers=size.text_layers,
        num_attention_heads=size.text_heads,
        num_key_value_heads=size.text_kv_heads,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        tie_word_embeddings=True,
        bos_token_id=ids["bos_token_id"],
        eos_token_id=ids["eos_token_id"],
        pad_token_id=ids["pad_token_id"],
        **family,
    )


def _vision_config(size: TinySize, **family) -> dict:
    return dict(
        depth=size.vision_depth,
        hidden_size=size.vision_hidden,
        intermediate_size=size.vision_intermediate,
        num_heads=size.vision_heads,
        out_hidden_size=size.text_hidden,
        spatial_merge_size=2,
        temporal_patch_size=2,
        **family,
    )


def _qwen2_5_vl(tok, size: TinySize):
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessorFast,
        Qwen2VLVideoProcessor,
    )

    ids = _token_ids(tok)
    config = Qwen2_5_VLConfig(
        text_config=_text_config(tok, size, ids, rope_scaling={"type": "mrope", "mrope_section": size.mrope_section}),
        vision_config=_vision_config(size, patch_size=14, window_size=112, fullatt_block_indexes=[size.vision_depth - 1]),
        tie_word_embeddings=True,
        **ids,
    )
    pixels = dict(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=14, merge_size=2, temporal_patch_size=2)
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessorFast(**pixels),
        video_processor=Qwen2VLVideoProcessor(**pixels),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    return Qwen2_5_VLForConditionalGeneration(config), processor


def _qwen3_vl(tok, size: TinySize):
    from transformers import (
        Qwen2VLImageProcessorFast,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    ids = _token_ids(tok)
    config = Qwen3VLConfig(
        text_config=_text_config(
            tok, size, ids, head_dim=size.head_dim,
            rope_scaling={"rope_type": "default", "mrope_section": size.mrope_section, "mrope_interleaved": True},
        ),
        vision_config=_vision_config(size, patch_size=16, num_position_embeddings=64, deepstack_visual_indexes=[0]),
        tie_word_embeddings=True,
        image_token_id=ids["image_token_id"],
        video_token_id=ids["video_token_id"],
        vision_start_token_id=ids["vision_start_token_id"],
        vision_end_token_id=ids["vision_end_token_id"],
    )
    budget = {"shortest_edge": 32 * 32 * 4, "longest_edge": 32 * 32 * 256}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessorFast(
            min_pixels=budget["shortest_edge"], max_pixels=budget["longest_edge"], patch_size=16, merge_size=2,
            temporal_patch_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
        ),
        video_processor=Qwen3VLVideoProcessor(size=budget, patch_size=16, merge_size=2, temporal_patch_size=2),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    return Qwen3VLForConditionalGeneration(config), processor


def write_tiny_model(out_dir: str | os.PathLike[str], *, family: str = "qwen2_5_vl", seed: int = 0, size: TinySize = TinySize()) -> Path:
    """Build the model into an existing empty folder (no caching, no atomic rename: see build_tiny_model)."""
    import torch

    if family not in FAMILIES:
        raise InputError(f"unknown model family {family!r}", where="--family", fix=f"one of: {', '.join(FAMILIES)}")
    out = Path(out_dir)
    tok = build_tokenizer(size.vocab_size)
    devices = []  # fork the RNG so building never disturbs a caller's random state
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        model, processor = (_qwen2_5_vl if family == "qwen2_5_vl" else _qwen3_vl)(tok, size)
    model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.pad_token_id = tok.convert_tokens_to_ids("<|endoftext|>")
    model.generation_config.do_sample = False
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    return out


def _args(family: str, seed: int, size: TinySize) -> dict:
    from importlib.metadata import version  # not `import transformers`: a cache hit must not load torch

    return {"family": family, "seed": seed, "size": asdict(size), "transformers": version("transformers")}


def build_tiny_model(
    out_dir: str | os.PathLike[str] | None = None,
    *,
    family: str = "qwen2_5_vl",
    seed: int = 0,
    size: TinySize = TinySize(),
    cache: bool = False,
) -> Path:
    """Build (or reuse) a tiny model folder and return its path.

    out_dir=None returns the copy cached under `skillbank.paths.cache_dir()`; with cache=True and an
    out_dir, the cached copy is built once and copied to out_dir. The same (family, seed, size, code)
    gives the same weights and tokenizer.
    """
    if family not in FAMILIES:
        raise InputError(f"unknown model family {family!r}", where="--family", fix=f"one of: {', '.join(FAMILIES)}")
    args = _args(family, seed, size)
    version = store.code_version(__name__, "skillbank.assets.demo_dataset")

    def build(tmp: Path) -> None:
        write_tiny_model(tmp, family=family, seed=seed, size=size)

    return store.asset_folder(out_dir, cache=cache, kind=KIND, args=args, version=version, build=build)
