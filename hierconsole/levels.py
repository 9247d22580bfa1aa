"""The three taxonomy levels and the four pair relations, named once for the whole package."""

from __future__ import annotations

LEVELS: tuple[str, str, str] = ("leaf", "middle", "high")
"""Code and JSON names of the levels, finest first. Display names come from the dataset."""

RELATIONS: tuple[str, str, str, str] = ("c", "m", "h", "o")
"""Pair relations: same leaf, same middle only, same high only, other (paper Eq. 1)."""

REL_C, REL_M, REL_H, REL_O = 0, 1, 2, 3

DEFAULT_LEVEL_NAMES: tuple[str, str, str] = ("Leaf", "Middle", "High")
CUB_LEVEL_NAMES: tuple[str, str, str] = ("Class", "Genus", "Family")
NABIRDS_LEVEL_NAMES: tuple[str, str, str] = ("Leaf", "Parent", "Supergroup")
