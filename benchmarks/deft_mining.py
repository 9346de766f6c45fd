"""FAISS search time for DEFT mining: exact (IndexFlatIP) vs approximate (IVF) over synthetic pools.

A round's mining builds one index over the pool embeddings and searches it once per proxy gap, so
the cost that matters is build + search for a round's gaps. For each pool size: the exact index's
build and search, the IVF index's train + add and search (nlist ~ sqrt(n), nprobe as given), and the
IVF recall@k against the exact answer. Embeddings are clustered synthetic unit vectors (a pool of
near-duplicates, as real video pools are), float32. The crossover is the smallest pool where IVF
build + search beats exact build + search (a round that trains the IVF index), and the smallest where
IVF search alone does (later rounds: the loop caches the trained IVF index beside the embeddings);
it moves with the number of gaps searched per round.

    .venv/bin/python benchmarks/deft_mining.py [--sizes 10000,100000,300000,1000000] [--dim 256]
        [--queries 256,4096] [--k 8] [--nprobe 16] [--threads 2]

The defaults take about 3 minutes on 2 CPU cores (1M x 256 float32 = 1 GB).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def pool(n: int, dim: int, rng: np.random.Generator, centres: int = 1000):
    c = rng.standard_normal((centres, dim), dtype=np.float32)
    x = c[rng.integers(0, centres, n)] + 0.5 * rng.standard_normal((n, dim), dtype=np.float32)
    return x


def main() -> None:
    import faiss

    from skillbank.deft.index import build_index, normalise

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,300000,1000000")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--queries", default="256,4096")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    sizes = [int(s) for s in args.sizes.split(",")]
    nqs = [int(q) for q in args.queries.split(",")]
    biggest = normalise(pool(max(sizes), args.dim, rng))
    queries = normalise(biggest[rng.integers(0, max(sizes), max(nqs))] + 0.1 * rng.standard_normal((max(nqs), args.dim), dtype=np.float32))
    print(f"dim {args.dim}, k {args.k}, nprobe {args.nprobe}, {args.threads} thread(s); seconds")
    print(f"{'pool':>9s} {'gaps':>6s} {'exact build':>12s} {'exact search':>13s} {'ivf build':>10s} {'ivf search':>11s} {'recall@k':>9s}"
          f" {'faster (build+search)':>22s} {'faster (cached ivf)':>20s}")
    crossover: dict[tuple[str, int], int] = {}
    for n in sizes:
        x = biggest[:n]
        t = time.perf_counter()
        exact, _ = build_index(x, exact_max=n)
        eb = time.perf_counter() - t
        t = time.perf_counter()
        ivf, kind = build_index(x, exact_max=0, seed=0)
        ib = time.perf_counter() - t
        ivf.nprobe = args.nprobe
        for q in nqs:
            t = time.perf_counter()
            _, ie = exact.search(queries[:q], args.k)
            es = time.perf_counter() - t
            t = time.perf_counter()
            _, ii = ivf.search(queries[:q], args.k)
            is_ = time.perf_counter() - t
            recall = np.mean([len(set(a) & set(b)) / args.k for a, b in zip(ie, ii)])
            first = "ivf" if ib + is_ < eb + es else "exact"
            cached = "ivf" if is_ < eb + es else "exact"
            print(f"{n:9d} {q:6d} {eb:12.3f} {es:13.3f} {ib:10.3f} {is_:11.3f} {recall:9.3f} {first:>22s} {cached:>20s}", flush=True)
            for label, winner in (("build+search", first), ("cached ivf", cached)):
                if winner == "ivf":
                    crossover.setdefault((label, q), n)
    for (label, q), n in sorted(crossover.items()):
        print(f"crossover ({label}, {q} gaps): IVF faster from a pool of {n:,} (smallest size measured where it wins)")


if __name__ == "__main__":
    main()
