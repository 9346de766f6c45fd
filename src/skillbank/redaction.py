"""Secrets are read by name and never printed, logged or written: `redact` masks them.

Masked: the value of every secret variable set in the environment (HF_TOKEN, WANDB_API_KEY,
AWS_* and friends) wherever it appears, `NAME=value` / `NAME: value` assignments of those names,
and the password of a URL (`scheme://user:password@host`, e.g. an AutoML storage URL).
"""

from __future__ import annotations

import os
import re
from typing import Any

SECRET_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "WANDB_API_KEY", "NGC_API_KEY")
SECRET_PREFIXES = ("AWS_",)
MASK = "***"
_ASSIGNMENT = re.compile(r"((?:" + "|".join(SECRET_NAMES + tuple(p + "[A-Z0-9_]+" for p in SECRET_PREFIXES)) + r")\s*[=:]\s*)(\S+)")
_URL_PASSWORD = re.compile(r"(//[^:/@\s]+):[^@/\s]+@")


def _secret_values() -> list[str]:
    names = [n for n in os.environ if n in SECRET_NAMES or n.startswith(SECRET_PREFIXES)]
    values = {os.environ[n] for n in names if len(os.environ.get(n, "")) >= 4}
    return sorted(values, key=len, reverse=True)


def redact(value: Any) -> Any:
    """Mask secrets in strings, lists and dicts (other values are returned as they are)."""
    if isinstance(value, str):
        for secret in _secret_values():
            value = value.replace(secret, MASK)
        value = _ASSIGNMENT.sub(lambda m: m.group(1) + MASK, value)
        return _URL_PASSWORD.sub(rf"\1:{MASK}@", value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value
