"""What a request fixes: the epochs ("for 3 epochs"), the GPUs ("on one 80 GB GPU") and LoRA on or off
("LoRA SFT", "full fine-tuning") it names.

Each is named by a `skillbank spec --set` shorthand of the skill (skill_info spec_shorthand_keys: epochs,
num_gpus, lora), so the router can say which spec key it fixes; a spec written with those --set values
records them (user_set) and AutoML leaves them out of its search. A bound ("up to 3 epochs", "1-3 epochs")
fixes nothing, nor does a GPU count of more than one node (routing.phrases.nodes_from_request says that).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from skillbank.routing.phrases import _NUMBER_WORDS, GPUS_PER_NODE, normalise


@dataclass(frozen=True)
class Fixed:
    name: str  # the skill's spec shorthand: epochs, num_gpus, lora
    value: Any
    words: str  # the request's words that say so


_COUNT = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_EPOCHS = re.compile(rf"\b{_COUNT}\s+(?:full\s+)?epochs?\b")
_EPOCHS_SET = re.compile(r"\bepochs?\s*[=:]\s*(\d+)\b")
_EPOCH_BOUND = re.compile(r"\b(up\s+to|at\s+most|no\s+more\s+than|max|maximum|between|under|within)\s+$")
_EPOCH_RANGE = re.compile(rf"\b{_COUNT}\s*(?:-|–|to|or)\s*{_COUNT}\s+epochs?\b")
_GPU_WORD = r"(?:gpus?|h100s?|h200s?|a100s?|b200s?|l40s?)"
_GPUS = re.compile(rf"\b({_COUNT[1:-1]}|an?)\s*(?:x\s+|\s)(?:\d+\s*gb\s+)?(?:nvidia\s+)?{_GPU_WORD}\b(?!\s+(?:nodes?|machines?|servers?|hosts?|hours?|h)\b)")
_GPUS_PACKED = re.compile(rf"\b(\d+)x{_GPU_WORD}\b(?!\s+(?:nodes?|machines?|servers?|hosts?)\b)")  # "8xH100"
_LORA_OFF_BEFORE = {"no", "not", "without", "disable", "never", "skip"}
_LORA_OFF_AFTER = {"off", "disabled", "false"}
_FULL = re.compile(r"\bfull\s+(finetune|parameter|parameters|weights?|model|sft|training)\b|\ball\s+(the\s+)?weights\b")


def _count(word: str) -> int:
    return int(word) if word.isdigit() else 1 if word in ("a", "an") else _NUMBER_WORDS[word]


def _epochs(text: str, joined: str) -> Fixed | None:
    lower = text.lower()
    if m := _EPOCHS_SET.search(lower):
        return Fixed("epochs", int(m[1]), m[0])
    if _EPOCH_RANGE.search(lower):
        return None  # "1-3 epochs": a range to search, not a value
    for m in _EPOCHS.finditer(joined):
        if not _EPOCH_BOUND.search(joined[: m.start()]):
            return Fixed("epochs", _count(m[1]), m[0])
    return None


def _gpus(joined: str) -> Fixed | None:
    for pattern in (_GPUS, _GPUS_PACKED):
        if (m := pattern.search(joined)) and 1 <= _count(m[1]) <= GPUS_PER_NODE:
            return Fixed("num_gpus", _count(m[1]), m[0])
    return None


def _lora(tokens: list[str], joined: str) -> Fixed | None:
    """The last word on LoRA wins: a mention of it (on), unless negated ("no LoRA", "LoRA off"); full fine-tuning (off)."""
    found: list[tuple[int, Fixed]] = []
    for i, tok in enumerate(tokens):
        if tok not in ("lora", "qlora"):
            continue
        before = next((t for t in tokens[max(0, i - 2):i] if t in _LORA_OFF_BEFORE), None)
        after = next((t for t in tokens[i + 1:i + 2] if t in _LORA_OFF_AFTER), None)
        found.append((i, Fixed("lora", not (before or after), " ".join(filter(None, (before, tok, after))))))
    for m in _FULL.finditer(joined):
        pos = len(joined[: m.start()].split())
        if not any(t in ("not", "no", "without") for t in tokens[max(0, pos - 2):pos]):
            found.append((pos, Fixed("lora", False, m[0])))
    return max(found, key=lambda f: f[0])[1] if found else None


def fixed_from_request(text: str | None) -> list[Fixed]:
    """The values the request names: epochs, GPUs (one node's at most), LoRA on or off; [] when it names none."""
    if not text:
        return []
    tokens = normalise(text)
    joined = " ".join(tokens)
    return [f for f in (_epochs(text, joined), _gpus(joined), _lora(tokens, joined)) if f is not None]


def fixed_keys(found: list[Fixed], shorthands: dict[str, str]) -> list[dict[str, Any]]:
    """Each fixed value as the route JSON names it: the spec key (the action's shorthand resolved), the value, the
    words, and the `skillbank spec --set` that writes it; a name the action has no shorthand for is left out."""
    out = []
    for f in found:
        key = shorthands.get(f.name)
        if key:
            shown = str(f.value).lower() if isinstance(f.value, bool) else str(f.value)
            out.append({"key": key, "value": f.value, "words": f.words, "set": f"{key}={shown}"})
    return out
