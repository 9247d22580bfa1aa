"""The paper's two datasets, as a replication names them, and each one's registered aggregation (S2):
the facts both the replication's stages (`study.replication`) and its tables (`study.read`) are built on."""

from __future__ import annotations

from types import MappingProxyType

CUB = "cub"
NABIRDS = "nabirds"
DATASETS = (CUB, NABIRDS)
"""In the paper's order: its tables list CUB first."""

REGISTERED = MappingProxyType({CUB: "micro", NABIRDS: "macro"})
"""Each dataset's registered aggregation: the one its factorial's preset evaluates with and its factorial
tables report (tests/study/replication/test_stage_graph.py checks it against the shipped presets)."""
