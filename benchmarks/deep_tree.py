"""Time and memory of a deep tree's import and splits: 10,000 leaves x 7 levels x 500,000 samples.

    python benchmarks/deep_tree.py [--leaves 10000] [--samples 500000] [--dim 16] [--naive-queries 200]

Writes a taxonomy CSV (one row per leaf, seven level columns), a labels CSV (id,leaf,split) and a
features .npz to a temporary folder, then measures in this process, stage by stage: the generic import
(taxonomy from rows, labels, features matched by id, the FeatureSet and its hash), the [N, 7] label
matrix, hierarchy-disjoint splits at level 2 (genus) and level 5 (class), and the strict valid-query
counts at all seven levels of half the official test rows as queries against a gallery of the other half
plus the last split's train part (~50,000 queries x ~370,000 gallery rows). Peak RSS comes from
`resource.getrusage` (the process's high-water mark, so each figure is the peak up to that stage); the
issue's bound is 2 GiB. Nothing builds an N x N or leaves x leaves array: the relations come from
ancestor codes and group sizes.

The naive baseline counts valid queries with one pass over the gallery per query (what a per-query
loop costs), timed on a subsample and scaled to all queries; its counts on the subsample must equal the
group-size method's.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hierconsole.datasets.generic import import_generic  # noqa: E402
from hierconsole.datasets.splits import hierarchy_disjoint_split, strict_valid_counts  # noqa: E402
from hierconsole.levels import Levels  # noqa: E402

RANKS = ("Species", "Genus", "Family", "Order", "Class", "Phylum", "Kingdom")
GIB = 1 << 30


def peak_bytes() -> int:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def level_sizes(n_leaves: int, k: int) -> list[int]:
    """Geometric from n_leaves down to 8 at the top, each level strictly smaller."""
    sizes = [n_leaves]
    for j in range(1, k):
        ideal = round(n_leaves * (8 / n_leaves) ** (j / (k - 1)))
        sizes.append(max(k - j, min(sizes[-1] - 1, ideal)))
    return sizes


def write_inputs(folder: Path, n_leaves: int, n_samples: int, dim: int, rng: np.random.Generator) -> tuple:
    sizes = level_sizes(n_leaves, len(RANKS))
    parents = []
    for j in range(len(sizes) - 1):
        extra = rng.integers(0, sizes[j + 1], size=sizes[j] - sizes[j + 1])
        parents.append(rng.permutation(np.concatenate([np.arange(sizes[j + 1]), extra])))
    anc = np.empty((n_leaves, len(sizes)), dtype=np.int64)
    anc[:, 0] = np.arange(n_leaves)
    for j, p in enumerate(parents):
        anc[:, j + 1] = p[anc[:, j]]
    with (folder / "taxonomy.csv").open("w") as fh:
        fh.write(",".join(r.lower() for r in RANKS) + "\n")
        for row in anc.tolist():
            fh.write(",".join(f"{RANKS[j][:2].lower()}{i:05d}" for j, i in enumerate(row)) + "\n")
    leaf = rng.integers(0, n_leaves, n_samples)
    leaf[:n_leaves] = np.arange(n_leaves)  # every leaf has a sample
    ids = np.array([f"img{i:07d}" for i in range(n_samples)])
    split = np.where(rng.random(n_samples) < 0.8, "train", "test")
    with (folder / "labels.csv").open("w") as fh:
        fh.write("id,leaf,split\n")
        step = 50_000
        for s in range(0, n_samples, step):
            fh.write(
                "".join(
                    f"{i},sp{lf:05d},{sp}\n"
                    for i, lf, sp in zip(
                        ids[s : s + step], leaf[s : s + step], split[s : s + step], strict=True
                    )
                )
            )
    order = rng.permutation(n_samples)  # features in their own order: matched by id
    x = rng.standard_normal((n_samples, dim), dtype=np.float32)
    np.savez(folder / "features.npz", features=x[order], ids=ids[order])
    return sizes


def naive_valid(labels: np.ndarray, query: np.ndarray, gallery: np.ndarray) -> list[int]:
    """One pass over the gallery per query and level: a query is valid at level k when some other
    gallery row shares its level-k group but not its level-(k-1) group."""
    g = labels[gallery]
    counts = [0] * labels.shape[1]
    for q in query.tolist():
        row = labels[q]
        not_self = gallery != q
        same_prev = None
        for k in range(labels.shape[1]):
            same = (g[:, k] == row[k]) & not_self
            hit = same if same_prev is None else same & ~same_prev
            counts[k] += bool(hit.any())
            same_prev = g[:, k] == row[k]
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=500_000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--naive-queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.write_only:
        # The child that writes the inputs, so their generation does not count in this process's peak.
        sizes = write_inputs(args.write_only, args.leaves, args.samples, args.dim, rng)
        print(" / ".join(f"{n:,}" for n in sizes))
        return 0
    print(
        f"# deep tree  {time.strftime('%Y-%m-%d %H:%M')}  {args.leaves:,} leaves x {len(RANKS)} levels x "
        f"{args.samples:,} samples, {args.dim}-D features"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        argv = [sys.executable, __file__, "--write-only", str(folder), "--leaves", str(args.leaves)]
        argv += ["--samples", str(args.samples), "--dim", str(args.dim), "--seed", str(args.seed)]
        sizes = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()
        print(
            f"  inputs written          {time.perf_counter() - t0:7.2f} s   (by a child process: not measured)"
        )
        print(f"  level sizes             {sizes}")
        base = peak_bytes()
        stages: list[tuple[str, float, int]] = []

        def stage(name: str, t: float) -> None:
            stages.append((name, time.perf_counter() - t, peak_bytes()))

        t = time.perf_counter()
        fs = import_generic(
            folder / "features.npz", folder / "labels.csv", folder / "taxonomy.csv", name="deep"
        )
        stage("import generic", t)
        t = time.perf_counter()
        labels = fs.labels
        stage("labels [N, 7]", t)
        levels: Levels = fs.taxonomy.levels
        for ref in ("genus", "class"):
            t = time.perf_counter()
            split = hierarchy_disjoint_split(labels, level=ref, levels=levels, seed=42)
            stage(f"disjoint split at {ref}", t)
        sizes_of = split.sizes()
        test = np.flatnonzero(fs.split == 2)
        drawn = np.random.default_rng(1).permutation(test)
        n_query = min(100_000, len(test) // 2)
        query, gallery = np.sort(drawn[:n_query]), np.sort(np.concatenate([drawn[n_query:], split["train"]]))
        t = time.perf_counter()
        valid = strict_valid_counts(labels, query, gallery, levels)
        stage("strict valid counts", t)
        fast_per_query = stages[-1][1] / len(query)

        sub = query[: args.naive_queries]
        t = time.perf_counter()
        naive = naive_valid(labels, sub, gallery)
        naive_s = time.perf_counter() - t
        check = strict_valid_counts(labels, sub, gallery, levels)
        assert list(check.values()) == naive, (check, naive)

    print(f"  baseline RSS            {base / GIB:7.3f} GiB (interpreter and imports)")
    for name, secs, peak in stages:
        print(f"  {name:23s} {secs:7.2f} s   peak RSS {peak / GIB:6.3f} GiB")
    total = sum(s for _, s, _ in stages)
    peak = max(p for _, _, p in stages)
    print(
        f"  total                   {total:7.2f} s   peak RSS {peak / GIB:6.3f} GiB (bound 2 GiB: "
        f"{'within' if peak <= 2 * GIB else 'EXCEEDED'})"
    )
    print(f"  last split parts        {', '.join(f'{k} {v:,}' for k, v in sizes_of.items())}")
    print(f"  valid queries           {', '.join(f'{k} {v:,}' for k, v in valid.items())} of {len(query):,}")
    naive_all = naive_s / len(sub) * len(query)
    print(
        f"  naive per-query loop    {naive_s:7.2f} s for {len(sub)} queries -> {naive_all:,.0f} s for "
        f"{len(query):,} (scaled); group sizes {fast_per_query * len(query):.3f} s: "
        f"{naive_all / (fast_per_query * len(query)):,.0f}x faster, same counts on the subsample"
    )
    return 0 if peak <= 2 * GIB else 1


if __name__ == "__main__":
    sys.exit(main())
