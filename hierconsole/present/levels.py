"""The levels a table, figure or report section shows, found from what its inputs carry, and the words
that name the hier score's levels ("mean of middle and high" for three levels, as always)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hierconsole.levels import MAX_LEVELS, MIN_LEVELS, PAPER_CODES, Levels, default_hier

if TYPE_CHECKING:
    from hierconsole.study.read import DatasetInfo

PAPER = Levels.of(("Leaf", "Middle", "High"))
"""Three levels: the codes leaf/middle/high every three-level table shows (names never differ there)."""


def levels_from(obj: Any) -> Levels:
    """The levels of a study's inputs, view or result: its `levels` when it carries them, else the
    levels of its `level_names`, else the three paper levels (inputs written before levels were general)."""
    levels = getattr(obj, "levels", None)
    if isinstance(levels, Levels):
        return levels
    names = tuple(getattr(obj, "level_names", ()) or ())
    if MIN_LEVELS <= len(names) <= MAX_LEVELS:
        return Levels.of(names)
    return PAPER


def codes_in(keys: Iterable[str]) -> Levels:
    """Levels named by their codes alone (a result keyed by level code): the paper's for leaf/middle/high."""
    codes = tuple(keys)
    if codes == PAPER_CODES or not MIN_LEVELS <= len(codes) <= MAX_LEVELS:
        return PAPER
    return Levels(codes, codes)


def hier_of(obj: Any, levels: Levels) -> tuple[str, ...]:
    """The hier score's levels: the ones the inputs declare, else every non-leaf level."""
    hier = getattr(obj, "hier", None) or getattr(obj, "hier_levels", None)
    if isinstance(hier, tuple) and hier and all(isinstance(h, str) for h in hier):
        return hier
    return default_hier(levels)


def and_list(words: Sequence[str]) -> str:
    """`middle and high`, `genus, family and order`: the levels the hier score averages, in prose."""
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def dataset_level_counts(info: DatasetInfo) -> tuple[int, ...]:
    """A dataset's group count per level, leaf first."""
    return tuple(int(c) for c in info.level_counts)


def span(words: Sequence[str]) -> str:
    """`leaf→top` of a list longer than three (what a narrow column shows of a deep tree), else all of it
    joined by `/`."""
    words = list(words)
    return "/".join(words) if len(words) <= 3 else f"{words[0]}→{words[-1]}"


def level_label(obj: Any, code: str) -> str:
    """`Genus (middle)`: a level of a study's (or family's) inputs by its dataset's name with its code
    beside it (once, where the two are the same word); the bare code where the inputs name no levels."""
    levels = levels_from(obj)
    named = isinstance(getattr(obj, "levels", None), Levels) or len(getattr(obj, "level_names", ()) or ()) == levels.k
    if code not in levels.codes or not named:
        return code
    name = levels.names[levels.codes.index(code)]
    return name if name.lower() == code else f"{name} ({code})"


def hier_words(obj: Any, sep: str = " and ") -> str:
    """The hier score's levels in prose (`middle and high` for three levels; `middle, high` with
    `sep=", "`): what every "mean of …" caption says."""
    hier = hier_of(obj, levels_from(obj))
    return and_list(hier) if sep == " and " else sep.join(hier)


def levels_in_columns(columns: Iterable[str], measure: str = "mAP") -> Levels:
    """The levels a per-seed table's `{code}_{measure}` columns name, in their order (leaf first), the
    hier score's column left out; the paper's three when they name fewer than two, or only paper codes
    (a three-level study whose tables leave out a level without valid queries is still three-level)."""
    suffix = f"_{measure}"
    codes = [c.removesuffix(suffix) for c in columns if c.endswith(suffix) and c != f"hier{suffix}"]
    return PAPER if set(codes) <= set(PAPER_CODES) else codes_in(codes)


def level_choices(levels: Levels, hier: Sequence[str] | None = None) -> tuple[str, ...]:
    """What the console's level picker cycles: the hier score first, then the levels it averages, then
    the levels it leaves out, the leaf last (three levels: hier, middle, high, leaf)."""
    averaged = tuple(hier) if hier is not None else default_hier(levels)
    others = tuple(c for c in levels.codes[1:] if c not in averaged)
    return ("hier", *averaged, *others, levels.leaf)
