"""cache.stale: processed examples cached with other vision settings than the spec's.

`skillbank.data.examples` caches processed examples under `<cache_root>/<key>/`, the key a hash of
the settings, each folder with a `cache_key.json` of them (fps, nframes, total_pixels, max_pixels,
system_prompt, processor fingerprint). Looked at here: `<media_path>/.skillbank_cache/` of each
dataset, and the local trainer's shared root `examples.default_cache_root()`
($SKILLBANK_CACHE/examples: only the spec's own folder is judged there, since other keyed
folders in a shared root belong to other datasets). A per-dataset root may instead hold one `cache_meta.json` with keys
fps, nframes, total_pixels, max_pixels describing a single cache kept in that folder.

- error: the folder the spec's settings map to has a cache_key.json that disagrees with them
  (examples.cache_status says stale: the loader would reuse wrong examples);
- error: a root's cache_meta.json disagrees with the spec (a single-folder cache is reused as is);
- warning: keyed folders built with other fps / nframes / total_pixels / max_pixels (not used by
  this spec; they take disk and will not be refreshed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillbank.preflight.report import Findings

CACHE_DIR = ".skillbank_cache"
META_FILE = "cache_meta.json"
FIELDS = ("fps", "nframes", "total_pixels", "max_pixels")


def cache_roots(media_folders: list[str]) -> list[Path]:
    roots = []
    for folder in media_folders:
        root = Path(folder) / CACHE_DIR
        if root.is_dir() and root not in roots:
            roots.append(root)
    return roots


def check_cache(spec: Any, patch_size: int, media_folders: list[str], findings: Findings) -> int:
    """Checks every cache root; returns how many cache folders were looked at."""
    from skillbank.data import examples

    shared = examples.default_cache_root()
    roots = cache_roots(media_folders) + ([shared] if shared.is_dir() else [])
    if not roots:
        return 0

    vision = examples.VisionSettings.from_spec(spec, patch_size=patch_size)
    expected = {k: getattr(vision, k) for k in FIELDS}
    looked = 0
    for root in roots:
        meta = _read(root / META_FILE)
        if meta is not None:
            looked += 1
            _compare(root / META_FILE, meta, expected, "error", "this single-folder cache would be reused as is", findings)
        status = examples.cache_status(root, vision, model_path=spec.policy.model_name_or_path, system_prompt=spec.custom.system_prompt)
        if status["stale"]:
            findings.error(
                "cache.stale",
                f"the cache folder for this spec's settings, {status['folder']}, was built with other settings ({examples.CACHE_KEY_FILE} disagrees); "
                "training would reuse its examples",
                f"delete {status['folder']} (it is rebuilt on the next run)",
                status["folder"],
            )
        if root == shared:
            continue
        for key_file in sorted(root.glob(f"*/{examples.CACHE_KEY_FILE}")):
            if str(key_file.parent) == status["folder"]:
                continue
            fields = _read(key_file)
            if fields is not None:
                looked += 1
                _compare(key_file.parent, fields, expected, "warning", "not used by this spec; it takes disk", findings)
    return looked


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _compare(where: Path, found: dict[str, Any], expected: dict[str, Any], severity: str, consequence: str, findings: Findings) -> None:
    diff = [f"{k}={found.get(k)!r} (spec: {expected[k]!r})" for k in FIELDS if k in found and not _same(found.get(k), expected[k])]
    if not diff:
        return
    findings.add(
        "cache.stale",
        severity,  # type: ignore[arg-type]
        f"stale example cache built with {', '.join(diff)}; {consequence}",
        f"delete {where if where.is_dir() else where.parent} (or set custom.vision back to those values)",
        str(where),
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    return a == b
