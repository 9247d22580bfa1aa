"""A user's own dataset as the generic importer reads it: a features file, a labels CSV with a train/test
split column and a taxonomy CSV, written into a folder (small, seeded, with class structure)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class GenericFiles:
    features: Path
    labels: Path
    taxonomy: Path

    def import_args(self, name: str) -> list[str]:
        """The arguments of `hierconsole import generic` for these files."""
        return ["import", "generic", str(self.features), str(self.labels), str(self.taxonomy), "--name", name]


def write_generic(
    folder: Path,
    *,
    highs: int = 3,
    middles_per_high: int = 4,
    leaves_per_middle: int = 2,
    train_per_leaf: int = 8,
    test_per_leaf: int = 5,
    dim: int = 48,
    seed: int = 0,
) -> GenericFiles:
    """Leaves `h{i}m{j}l{k}` under middles `h{i}m{j}` under highs `h{i}`; each sample is its leaf's centre
    (itself near its middle's and high's) plus noise, so a projector has something to learn."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tax = ["leaf,middle,high"]
    rows = ["id,leaf,split"]
    x = []
    for h in range(highs):
        c_high = rng.normal(size=dim) * 3
        for m in range(middles_per_high):
            c_middle = c_high + rng.normal(size=dim) * 1.5
            for k in range(leaves_per_middle):
                leaf = f"h{h}m{m}l{k}"
                tax.append(f"{leaf},h{h}m{m},h{h}")
                c_leaf = c_middle + rng.normal(size=dim)
                for i in range(train_per_leaf + test_per_leaf):
                    rows.append(f"{leaf}-{i},{leaf},{'train' if i < train_per_leaf else 'test'}")
                    x.append(c_leaf + rng.normal(size=dim) * 0.7)
    (folder / "taxonomy.csv").write_text("\n".join(tax) + "\n")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    ids = np.array([r.split(",")[0] for r in rows[1:]])
    np.savez(folder / "features.npz", features=np.asarray(x, dtype=np.float32), ids=ids)
    return GenericFiles(folder / "features.npz", folder / "labels.csv", folder / "taxonomy.csv")
