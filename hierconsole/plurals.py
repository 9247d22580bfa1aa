"""Counted nouns ("1 study", "3 studies"): the one rule every front end prints a count by."""

from __future__ import annotations

_IRREGULAR = {
    "genus": "genera",
    "leaf": "leaves",
    "species": "species",
    "taxon": "taxa",
    "class": "classes",
    "phylum": "phyla",
    "epoch": "epochs",  # a hard "ch": the -ches rule below would say "epoches"
}


def plural(word: str) -> str:
    """The lower-case plural of an English noun: the taxonomy's irregular names, then the regular rules."""
    word = word.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def counted(n: int, word: str) -> str:
    """`n` and `word` in agreement, thousands grouped: "1 study", "2 studies", "1,204 images"."""
    return f"{n:,} {word.lower() if n == 1 else plural(word)}"
