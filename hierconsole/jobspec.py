"""What a worker process is asked to do: a JSON file the orchestrator writes and the worker reads.

Kept free of torch so the orchestrator (and the TUI) can build specs without loading it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ARMS: tuple[str, str, str, str] = ("E_R", "H_R", "E_S", "H_S")
ARM_GEOMETRY = {"E": "euclidean", "H": "poincare"}
ARM_LOSS = {"R": "regression", "S": "supcon"}


def arm_parts(arm: str) -> tuple[str, str]:
    """(geometry, loss) of an arm name such as "H_S"."""
    g, loss = arm.split("_")
    return ARM_GEOMETRY[g], ARM_LOSS[loss]


@dataclass(frozen=True)
class CellSpec:
    arm: str
    geometry: str  # euclidean | poincare
    loss: str  # regression | supcon
    tau: float | None = None  # SupCon temperature

    @property
    def key(self) -> str:
        """The cell's name within its job: a job holds each arm at most once (tuning jobs hold one tau)."""
        return self.arm


@dataclass(frozen=True)
class Hyper:
    lr: float = 5e-5
    weight_decay: float = 1e-4
    batch_size: int = 128
    drop_last: bool = True
    grad_clip: float = 1.0
    dropout: float = 0.1
    epochs: int = 100
    hidden: int = 256
    out_dim: int = 32
    targets: tuple[float, float, float, float] = (0.2, 0.5, 0.8, 1.0)
    level_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    c: float = 1.0
    r: float = 0.4


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    study_id: str
    kind: str  # tune | final | evaluate
    seed: int
    dataset_dir: str
    out_dir: str
    cells: tuple[CellSpec, ...] = ()
    hyper: Hyper = field(default_factory=Hyper)
    device: str = "cpu"
    threads: int = 1
    aggregation: str = "micro"
    # Index files (npz) this job may read, by role: "train" (fit indices), "val" (query/gallery for the
    # auxiliary validation record or tuning score), "qg:<seed>" (official test perturbations, evaluate
    # jobs only: the test seal is enforced by never handing them to a training job).
    splits: dict[str, str] = field(default_factory=dict)
    val_every: int = 10
    checkpoint_every: int = 1
    # Evaluate jobs: the final-run folders to evaluate, by job id.
    sources: dict[str, str] = field(default_factory=dict)
    # Rescore jobs: the evaluate job's folder of stored test embeddings.
    embeddings_dir: str | None = None
    taxonomy_shuffle_seed: int | None = None
    batched: bool = True

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSpec:
        d = dict(d)
        d["cells"] = tuple(CellSpec(**c) for c in d.get("cells", ()))
        h = dict(d.get("hyper", {}))
        for k in ("targets", "level_weights"):
            if k in h:
                h[k] = tuple(h[k])
        d["hyper"] = Hyper(**h)
        return cls(**d)

    @classmethod
    def read(cls, path: Path) -> JobSpec:
        return cls.from_dict(json.loads(Path(path).read_text()))
