"""The metrics' names, as `evaluate` takes them and its results spell them, and their parsing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hierconsole.vocabulary import MAP, RECALL_KS

HAP, ASI, CPCC = "H-AP", "ASI", "CPCC"
RECALL, NDCG, SEVERITY = "R", "NDCG", "mistake_severity"
"""The metric names (``R@k``, ``NDCG@k``, ``mistake_severity@k`` take a rank k)."""
METRIC_NAMES = (MAP, f"{RECALL}@k", HAP, ASI, f"{NDCG}@k", f"{SEVERITY}@k", CPCC)
DEFAULT_METRICS: tuple[str, ...] = (
    MAP, *(f"{RECALL}@{k}" for k in RECALL_KS), HAP, ASI, f"{NDCG}@10", f"{SEVERITY}@1", f"{SEVERITY}@5",
)
GAINS = ("exp", "linear")
"""NDCG's gain of a depth s: 2^s - 1 (``exp``, as HAPPIER's NDCG) or s (``linear``)."""
_RANKED = re.compile(rf"^({RECALL}|{NDCG}|{SEVERITY})@([1-9][0-9]*)$")


def whole_tree_metric(name: str) -> bool:
    """Whether ``name`` is a metric of the whole tree (H-AP, ASI, NDCG@k, mistake_severity@k, CPCC)."""
    return name in (HAP, ASI, CPCC) or bool(_RANKED.match(name)) and not name.startswith(f"{RECALL}@")


@dataclass(frozen=True)
class MetricSet:
    """The parsed metric names of one call."""

    names: tuple[str, ...]
    map: bool
    recall_ks: tuple[int, ...]
    ndcg_ks: tuple[int, ...]
    severity_ks: tuple[int, ...]
    hap: bool
    asi: bool
    cpcc: bool

    @classmethod
    def parse(cls, names: Sequence[str]) -> MetricSet:
        if isinstance(names, str):
            names = (names,)
        names = tuple(names)
        if not names:
            raise ValueError(f"metrics is empty: name at least one of {', '.join(METRIC_NAMES)}")
        ranked: dict[str, list[int]] = {RECALL: [], NDCG: [], SEVERITY: []}
        for name in names:
            match = _RANKED.match(name)
            if match:
                ranked[match[1]].append(int(match[2]))
            elif name not in (MAP, HAP, ASI, CPCC):
                raise ValueError(f"unknown metric {name!r}: use {', '.join(METRIC_NAMES)} (k a positive integer)")
        if len(set(names)) != len(names):
            raise ValueError(f"{sorted({n for n in names if names.count(n) > 1})[0]!r} is named twice")
        return cls(
            names=names,
            map=MAP in names,
            recall_ks=tuple(ranked[RECALL]),
            ndcg_ks=tuple(ranked[NDCG]),
            severity_ks=tuple(ranked[SEVERITY]),
            hap=HAP in names,
            asi=ASI in names,
            cpcc=CPCC in names,
        )

    @staticmethod
    def per_level(name: str) -> bool:
        """Whether a metric is reported per level (mAP, R@k), not over the whole tree."""
        return name == MAP or name.startswith(f"{RECALL}@")

    @property
    def head_ks(self) -> tuple[int, ...]:
        """The ranks NDCG and mistake severity read, each once."""
        return tuple(sorted(set(self.ndcg_ks) | set(self.severity_ks)))
