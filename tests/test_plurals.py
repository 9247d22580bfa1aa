"""Counts in agreement with their noun ("1 study", never "1 studies"), printed by one rule everywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hierconsole.config import load_preset
from hierconsole.plurals import counted, plural
from hierconsole.tui.screens.launch import launch_question

ROOT = Path(__file__).resolve().parents[1] / "hierconsole"


@pytest.mark.parametrize(
    ("n", "word", "expected"),
    [
        (1, "study", "1 study"),
        (2, "study", "2 studies"),
        (0, "job", "0 jobs"),
        (1, "Genus", "1 genus"),
        (3, "Genus", "3 genera"),
        (2, "class", "2 classes"),
        (1204, "image", "1,204 images"),
        (2, "day", "2 days"),
        (2, "epoch", "2 epochs"),  # `run` printed "2 epoches"
        (2, "batch", "2 batches"),
    ],
)
def test_counted(n, word, expected):
    assert counted(n, word) == expected


def test_plural_of_the_taxonomy_names():
    assert [plural(w) for w in ("Species", "leaf", "taxon", "Family", "box", "order")] == [
        "species",
        "leaves",
        "taxa",
        "families",
        "boxes",
        "orders",
    ]


def test_the_launch_question_says_one_study():
    """The console's launch dialog as a user met it on a store holding one study: "1 studies"."""
    preset = load_preset("demo")
    assert "holds 1 study." in launch_question(preset, "tiny", 1)
    assert "holds 2 studies." in launch_question(preset, "tiny", 2)


# An f-string placeholder followed by a plural noun prints "1 <plural>" for a count of one. A fraction's
# total ("1/3 seeds") is exempt: there the noun agrees with the total.
_COUNT_THEN_PLURAL = re.compile(
    r"(?<!/)\{[^{}]*\}\s+(studies|jobs|rows|seeds|members|images|families|datasets|runs|cells|arms|files|epochs)\b"
)


def test_no_front_end_prints_a_count_before_a_fixed_plural():
    found = [
        f"{path.relative_to(ROOT.parent)}:{i}: {line.strip()}"
        for folder in ("cli", "tui")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if _COUNT_THEN_PLURAL.search(line) and "counted(" not in line
    ]
    assert not found, "print counts with hierconsole.plurals.counted:\n" + "\n".join(found)
