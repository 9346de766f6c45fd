"""The DEFT sets of the embedded default.

demo_sets (the loop's tests): from two demo datasets (skillbank.assets.demo_dataset, different seeds,
so different clips): base train = the first `base` train clips, pool = the other train clips, proxy =
the val clips, frozen benchmark = the second dataset's val clips with ids prefixed "bench_" (disjoint
by id and content).

weak_family_sets (`skillbank demo --deft`): one dataset, a base set that under-represents one family,
a proxy set and a pool where that family is rare from its train clips, the frozen benchmark = val.
Records are copied whole; their video paths stay relative to the split folders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillbank import atomic


def demo_sets(data: Path, bench: Path, out: Path, *, base: int) -> dict[str, dict[str, str]]:
    """Write out/{base,pool,bench}.json; return {role: {annotation_path, media_dir}} for the DEFT config
    (roles: train, pool, proxy, benchmark)."""
    train = json.loads((data / "train" / "annotations.json").read_text(encoding="utf-8"))
    bench_records: list[dict[str, Any]] = json.loads((bench / "val" / "annotations.json").read_text(encoding="utf-8"))
    for record in bench_records:
        record["id"] = "bench_" + str(record["id"])
    atomic.write_json(out / "base.json", train[:base])
    atomic.write_json(out / "pool.json", train[base:])
    atomic.write_json(out / "bench.json", bench_records)
    return {
        "train": {"annotation_path": str(out / "base.json"), "media_dir": str(data / "train")},
        "pool": {"annotation_path": str(out / "pool.json"), "media_dir": str(data / "train")},
        "proxy": {"annotation_path": str(data / "val" / "annotations.json"), "media_dir": str(data / "val")},
        "benchmark": {"annotation_path": str(out / "bench.json"), "media_dir": str(bench / "val")},
    }


WEAK = "directionality"


def weak_family_sets(data: Path, out: Path, *, weak: str = WEAK, base_per_family: int, base_weak: int, pool_weak_share: float,
                     proxy_per_family: int) -> dict[str, dict[str, str]]:
    """The sets of `skillbank demo --deft`, from one demo dataset. Frozen benchmark: every held-out
    (val) clip. From the train clips, in order: a base (seed) train set with `base_per_family` records
    of every other family and only `base_weak` of the weak one; a proxy set of `proxy_per_family`
    records of each family; a pool of the rest, the weak family thinned to `pool_weak_share` of it
    (random selection rarely picks it). Records are copied whole; videos stay relative to the split
    folders. Writes out/{base,pool,proxy,bench}.json; returns {role: {annotation_path, media_dir}}."""
    from skillbank.hashing import sha256_file

    train = json.loads((data / "train" / "annotations.json").read_text(encoding="utf-8"))
    bench = json.loads((data / "val" / "annotations.json").read_text(encoding="utf-8"))
    # small synthetic clips repeat now and then (a static square at the same rounded place): drop every
    # train record whose video has a benchmark video's content, as the DEFT preflight demands
    protected = {sha256_file(str(data / "val" / r["video"])) for r in bench}
    train = [r for r in train if sha256_file(str(data / "train" / r["video"])) not in protected]
    base, proxy, rest = [], [], []
    in_base: dict[str, int] = {}
    in_proxy: dict[str, int] = {}
    for rec in train:
        family = str(rec.get("family"))
        if in_base.get(family, 0) < (base_weak if family == weak else base_per_family):
            in_base[family] = in_base.get(family, 0) + 1
            base.append(rec)
        elif in_proxy.get(family, 0) < proxy_per_family:
            in_proxy[family] = in_proxy.get(family, 0) + 1
            proxy.append(rec)
        else:
            rest.append(rec)
    strong = [r for r in rest if r.get("family") != weak]
    weak_n = round(pool_weak_share * len(strong) / (1.0 - pool_weak_share)) if pool_weak_share < 1 else len(rest)
    keep = {str(r["id"]) for r in [r for r in rest if r.get("family") == weak][:weak_n]}
    pool = [r for r in rest if r.get("family") != weak or str(r["id"]) in keep]
    for name, records in (("base", base), ("pool", pool), ("proxy", proxy), ("bench", bench)):
        atomic.write_json(out / f"{name}.json", records)
    return {
        "train": {"annotation_path": str(out / "base.json"), "media_dir": str(data / "train")},
        "pool": {"annotation_path": str(out / "pool.json"), "media_dir": str(data / "train")},
        "proxy": {"annotation_path": str(out / "proxy.json"), "media_dir": str(data / "train")},
        "benchmark": {"annotation_path": str(out / "bench.json"), "media_dir": str(data / "val")},
    }
