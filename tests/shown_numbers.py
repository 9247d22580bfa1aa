"""What "a number is never cut" means in a test: every number of a command's `--json` form, formatted as
the text form formats it, appears in that text as a whole token, and no ellipsis stands for a cut."""

from __future__ import annotations

import re
from collections.abc import Iterable

ELLIPSIS = "…"
_EDGES = "[](),;:·│|"


def tokens(text: str) -> set[str]:
    """Whitespace-separated words, with brackets, commas and rules stripped from their ends."""
    return {word.strip(_EDGES) for word in re.split(r"\s+", text) if word.strip(_EDGES)}


def signed(value: float, digits: int) -> str:
    return f"{value:+.{digits}f}"


def plain(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def missing(text: str, expected: Iterable[str]) -> list[str]:
    """The expected words that `text` does not hold whole (an empty list when every one is there)."""
    have = tokens(text)
    return [word for word in expected if word.strip(_EDGES) and word.strip(_EDGES) not in have]


def assert_whole(text: str, expected: Iterable[str], where: str) -> None:
    expected = list(expected)
    assert expected, f"{where}: nothing to look for"
    assert ELLIPSIS not in text, f"{where}: a value was cut:\n{text}"
    lost = missing(text, expected)
    assert not lost, f"{where}: {len(lost)} of {len(expected)} values not shown whole, e.g. {lost[:5]}\n{text}"


def effect_words(doc: dict, digits: int) -> list[str]:
    """Every number of an effects-like JSON row (`effects --json` effects, `contrast --json` rows)."""
    words = [signed(v, digits) for v in doc["per_seed"].values()]
    words.append(signed(doc["mean"], digits))
    if doc["sd"] is not None:
        words.append(plain(doc["sd"], digits))
    for key in ("ci95_t_lo", "ci95_t_hi", "ci95_boot_lo", "ci95_boot_hi"):
        if doc.get(key) is not None:
            words.append(signed(doc[key], digits))
    if doc.get("p_signflip") is not None:
        words.append(f"{doc['p_signflip']:.4g}")
    if doc.get("seeds_to_resolve") is not None:
        words.append(str(doc["seeds_to_resolve"]))
    for key in ("p_holm", "p_tost"):  # the adjusted p where the row is in a family; the TOST's with a SESOI
        if doc.get(key) is not None:
            words.append(f"{doc[key]:.4g}")
    return words
