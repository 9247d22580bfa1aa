"""The CUB Class -> Genus -> Family taxonomy built from a bird checklist (eBird/Clements), reportably.

CUB names classes by common name (`001.Black_footed_Albatross`); a checklist gives each species its
scientific name and family. Each class is matched to one checklist species, in this order:

1. exact: the normalised names are equal (lowercase; punctuation, whitespace, hyphens, underscores gone);
2. alias: the user's aliases file names the species (an explicit decision beats a guess, so an alias
   also overrides what fuzzy matching would have chosen);
3. fuzzy: the closest normalised checklist name, if its similarity (difflib's ratio, 0..1) reaches the
   threshold and no other name ties it; the score is recorded;
4. otherwise unmatched, with the nearest name and its score as a hint.

Genus is the first token of the matched scientific name; a family string loses a trailing
parenthetical gloss ("Parulidae (New World Warblers)" -> "Parulidae"), which merges spellings of one
family. Conflicts (a genus under two families, two classes on one species) are refused.
"""

from __future__ import annotations

import csv
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hierconsole.csv_input import read_csv_records
from hierconsole.datasets.cub import read_pair_file
from hierconsole.errors import InputError
from hierconsole.json_input import read_json
from hierconsole.taxonomy import Taxonomy
from hierconsole.vocabulary import CUB_LEVEL_NAMES

EXACT, ALIAS, FUZZY, UNMATCHED = "exact", "alias", "fuzzy", "unmatched"
METHODS = (EXACT, FUZZY, ALIAS, UNMATCHED)  # the order the report counts them in
DEFAULT_THRESHOLD = 0.9
SPECIES = "species"

# Header names of the published checklists: Clements (eBird/Clements v2024 CSV) and the eBird taxonomy.
COLUMN_CANDIDATES: dict[str, tuple[str, ...]] = {
    "common": ("English name", "PRIMARY_COM_NAME", "common name", "common_name"),
    "scientific": ("scientific name", "SCI_NAME", "scientific_name"),
    "family": ("family", "FAMILY"),
    "category": ("category", "CATEGORY"),
}
_SHOWN = 20


def normalised(name: str) -> str:
    """Lowercase, with everything but letters and digits removed."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def common_name(cub_class: str) -> str:
    """`001.Black_footed_Albatross` -> `Black footed Albatross`."""
    return re.sub(r"^\d+\.", "", cub_class.strip()).replace("_", " ").strip()


def canonical_family(family: str) -> str:
    """Drop a trailing parenthetical common-name gloss."""
    return re.sub(r"\s*\([^()]*\)\s*$", "", family).strip()


def genus_of(scientific: str) -> str:
    return scientific.split()[0] if scientific.split() else ""


@dataclass(frozen=True)
class Species:
    common: str
    scientific: str
    family: str  # as written in the checklist
    line: int


@dataclass(frozen=True)
class Match:
    class_id: str
    cub_class: str
    method: str
    species: Species | None
    score: float | None  # similarity of the fuzzy match; 1.0 for exact; None for alias/unmatched
    note: str = ""

    @property
    def genus(self) -> str:
        return genus_of(self.species.scientific) if self.species else ""

    @property
    def family(self) -> str:
        return canonical_family(self.species.family) if self.species else ""


@dataclass
class Construction:
    matches: list[Match]
    conflicts: list[str]
    merged_families: dict[str, list[str]]  # canonical -> the spellings merged into it
    unused_aliases: list[str]

    def counts(self) -> dict[str, int]:
        return {m: sum(1 for x in self.matches if x.method == m) for m in METHODS}

    def rows(self) -> list[tuple[str, str, str]]:
        return [(m.cub_class, m.genus, m.family) for m in self.matches if m.species is not None]


def read_checklist(
    path: str | Path, columns: dict[str, str | None] | None = None, categories: Sequence[str] = (SPECIES,)
) -> list[Species]:
    """Species rows of a checklist CSV. `columns` maps common/scientific/family/category to header names
    (None: found among COLUMN_CANDIDATES); rows whose category is not in `categories` are skipped (no
    category column: every row is kept)."""
    path = Path(path)
    columns = columns or {}
    header, records = read_csv_records(path, "the checklist")
    if header is None:
        raise InputError(path, "the file is empty", hint="a checklist CSV starts with its header line")
    lowered = [h.strip().lower() for h in header]
    where: dict[str, int | None] = {}
    problems = []
    for role, candidates in COLUMN_CANDIDATES.items():
        given = columns.get(role)
        names = (given,) if given else candidates
        found = next((lowered.index(n.lower()) for n in names if n.lower() in lowered), None)
        if found is None and (role != "category" or given):
            flag = f"--{role}-column"
            problems.append(
                f"line 1: no {role} column (looked for {', '.join(repr(n) for n in names)}; pass {flag} NAME)"
            )
        where[role] = found
    if problems:
        raise InputError(path, problems + [f"the header is {','.join(header)!r}"])
    wanted = {c.lower() for c in categories}
    out = []
    for line, rec in records:

        def cell(role: str, rec: list[str] = rec) -> str:
            at = where[role]
            return rec[at].strip() if at is not None and at < len(rec) else ""

        if where["category"] is not None and cell("category").lower() not in wanted:
            continue
        if not cell("common") or not cell("scientific"):
            continue  # checklists hold rows without names (higher taxa, section headings)
        out.append(Species(cell("common"), cell("scientific"), cell("family"), line))
    if not out:
        raise InputError(
            path, f"no rows with a common and a scientific name in categories {', '.join(categories)}"
        )
    return out


def read_aliases(path: str | Path) -> dict[str, str]:
    """A JSON object: CUB class name (full, without prefix, or normalised) -> checklist common or
    scientific name."""
    path = Path(path)
    raw = read_json(path, "the aliases", hint="save the aliases as UTF-8 JSON", kind="an aliases JSON file")
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise InputError(
            path,
            "expected a JSON object of strings",
            hint='e.g. {"Geococcyx": "Greater Roadrunner", "110.Geococcyx": "Geococcyx californianus"}',
        )
    return raw


def build_cub_taxonomy(
    classes: Sequence[tuple[str, str]],
    checklist: Sequence[Species],
    aliases: dict[str, str] | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    checklist_name: str = "checklist",
    aliases_name: str = "aliases",
) -> Construction:
    """Match (class id, CUB class name) pairs to checklist species; raises InputError for a bad alias."""
    by_name: dict[str, list[Species]] = {}
    for sp in checklist:
        by_name.setdefault(normalised(sp.common), []).append(sp)
    by_scientific: dict[str, list[Species]] = {}
    for sp in checklist:
        by_scientific.setdefault(normalised(sp.scientific), []).append(sp)
    common_keys = sorted({normalised(sp.common) for sp in checklist})
    alias_of, unused = _resolve_aliases(classes, aliases or {}, by_name, by_scientific, aliases_name)
    matches = []
    for class_id, cub_class in classes:
        key = normalised(common_name(cub_class))
        hits = _distinct(by_name.get(key, []))
        if len(hits) == 1:
            matches.append(Match(class_id, cub_class, EXACT, hits[0], 1.0))
            if class_id in alias_of:
                unused.append(f"{cub_class!r}: matches {hits[0].common!r} exactly; its alias is not used")
            continue
        if class_id in alias_of:
            matches.append(Match(class_id, cub_class, ALIAS, alias_of[class_id], None))
            continue
        if len(hits) > 1:
            names = "; ".join(f"{h.common} ({h.scientific}, {checklist_name} line {h.line})" for h in hits)
            matches.append(
                Match(class_id, cub_class, UNMATCHED, None, None, f"ambiguous exact name: {names}")
            )
            continue
        matches.append(_fuzzy(class_id, cub_class, key, common_keys, by_name, threshold))
    conflicts, merged = _consistency(matches, checklist_name)
    return Construction(matches, conflicts, merged, unused)


def _distinct(species: list[Species]) -> list[Species]:
    seen: dict[tuple[str, str], Species] = {}
    for sp in species:
        seen.setdefault((sp.scientific, canonical_family(sp.family)), sp)
    return list(seen.values())


def _fuzzy(
    class_id: str,
    cub_class: str,
    key: str,
    keys: list[str],
    by_name: dict[str, list[Species]],
    threshold: float,
) -> Match:
    # difflib's cheap upper bounds skip most of a checklist of ~11,000 names before the real ratio.
    near = difflib.get_close_matches(key, keys, n=3, cutoff=min(threshold, 0.6))
    scored = sorted(
        ((difflib.SequenceMatcher(None, key, k).ratio(), k) for k in near), key=lambda t: (-t[0], t[1])
    )
    if not scored:
        return Match(class_id, cub_class, UNMATCHED, None, None, "no checklist name is similar")
    best, name = scored[0]
    candidate = _distinct(by_name[name])[0]
    if best < threshold:
        return Match(
            class_id,
            cub_class,
            UNMATCHED,
            None,
            round(best, 4),
            f"nearest: {candidate.common!r} ({candidate.scientific}) at {best:.3f} < threshold {threshold}",
        )
    ties = [k for s, k in scored[1:] if s == best]
    if ties or len(_distinct(by_name[name])) > 1:
        return Match(
            class_id, cub_class, UNMATCHED, None, round(best, 4), f"ambiguous: {name} ties {', '.join(ties)}"
        )
    return Match(class_id, cub_class, FUZZY, candidate, round(best, 4))


def _resolve_aliases(
    classes: Sequence[tuple[str, str]],
    aliases: dict[str, str],
    by_name: dict[str, list[Species]],
    by_scientific: dict[str, list[Species]],
    source: str,
) -> tuple[dict[str, Species], list[str]]:
    lookup: dict[str, str] = {}
    for class_id, cub_class in classes:
        for form in (cub_class.strip(), common_name(cub_class), normalised(common_name(cub_class))):
            lookup.setdefault(form, class_id)
            lookup.setdefault(normalised(form), class_id)
    name_of = dict(classes)
    problems = []
    out: dict[str, Species] = {}
    for key, target in aliases.items():
        cid = lookup.get(key.strip()) or lookup.get(normalised(key))
        if cid is None:
            problems.append(f"alias key {key!r} names no class in classes.txt")
            continue
        found = _distinct(by_name.get(normalised(target), [])) or _distinct(
            by_scientific.get(normalised(target), [])
        )
        if not found:
            problems.append(
                f"alias {key!r} -> {target!r}: no checklist species has that common or scientific name"
            )
        elif len(found) > 1:
            problems.append(
                f"alias {key!r} -> {target!r} names {len(found)} checklist species; use the scientific name"
            )
        elif cid in out and out[cid] != found[0]:
            problems.append(
                f"class {name_of[cid]!r} has two aliases ({out[cid].common!r} and {found[0].common!r})"
            )
        else:
            out[cid] = found[0]
    if problems:
        raise InputError(
            source, problems, hint="keys are CUB class names; values checklist common or scientific names"
        )
    return out, []


def _consistency(matches: list[Match], checklist_name: str) -> tuple[list[str], dict[str, list[str]]]:
    conflicts = []
    on_species: dict[str, Match] = {}
    genus_family: dict[str, dict[str, list[str]]] = {}
    spellings: dict[str, set[str]] = {}
    for m in matches:
        if m.species is None:
            continue
        other = on_species.get(m.species.scientific)
        if other is not None:
            conflicts.append(
                f"classes {other.cub_class!r} ({other.method}) and {m.cub_class!r} ({m.method}) both match "
                f"{m.species.common!r} ({m.species.scientific})"
            )
        on_species.setdefault(m.species.scientific, m)
        genus_family.setdefault(m.genus, {}).setdefault(m.family, []).append(m.cub_class)
        spellings.setdefault(m.family, set()).add(m.species.family)
    for genus, families in genus_family.items():
        if len(families) > 1:
            shown = "; ".join(f"{fam} ({', '.join(cls[:3])})" for fam, cls in sorted(families.items()))
            conflicts.append(f"genus {genus!r} falls under {len(families)} families: {shown}")
        for fam in families:
            if not fam:
                conflicts.append(f"genus {genus!r}: empty family in the {checklist_name}")
    merged = {fam: sorted(s) for fam, s in spellings.items() if len(s) > 1}
    return conflicts, merged


def checked_taxonomy(construction: Construction, source: str) -> Taxonomy:
    """The taxonomy `import cub` will build from these rows (so its checks run before anything is written)."""
    return Taxonomy.from_rows(construction.rows(), level_names=CUB_LEVEL_NAMES, source=source)


def write_taxonomy(path: Path, construction: Construction) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([n.lower() for n in CUB_LEVEL_NAMES])
        w.writerows(construction.rows())


REPORT_COLUMNS = (
    "class_id",
    "class",
    "method",
    "score",
    "common_name",
    "scientific_name",
    "genus",
    "family",
    "family_as_written",
    "checklist_line",
    "note",
)


def write_report(path: Path, construction: Construction) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(REPORT_COLUMNS)
        for m in construction.matches:
            sp = m.species
            w.writerow(
                [
                    m.class_id,
                    m.cub_class,
                    m.method,
                    "" if m.score is None else f"{m.score:.4f}",
                    sp.common if sp else "",
                    sp.scientific if sp else "",
                    m.genus,
                    m.family,
                    sp.family if sp else "",
                    sp.line if sp else "",
                    m.note,
                ]
            )


_SHOWN = 25
"""Refusals named in a build's error (the rest counted)."""


def build_cub_files(
    classes_path: Path,
    checklist_path: Path,
    out: Path,
    report: Path,
    aliases_path: Path | None = None,
    *,
    columns: dict[str, str | None] | None = None,
    categories: Sequence[str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    allow_unmatched: bool = False,
) -> tuple[Construction, Taxonomy]:
    """`taxonomy build-cub`'s work (the command and `replicate`'s taxonomy stage): CUB's classes matched
    against the checklist, refused in one InputError while a class is unmatched or a conflict remains,
    else the taxonomy and its match report written."""
    problems: list[str] = []
    classes = read_pair_file(classes_path, ("class_id", "class_name"), problems)
    if problems or not classes.keys:
        raise InputError(classes_path, problems or ["no classes listed"], hint="give CUB_200_2011/classes.txt")
    checklist = read_checklist(checklist_path, columns, (SPECIES,) if categories is None else categories)
    aliases = read_aliases(aliases_path) if aliases_path else {}
    built = build_cub_taxonomy(
        list(zip(classes.keys, classes.values, strict=True)),
        checklist,
        aliases,
        threshold=threshold,
        checklist_name=checklist_path.name,
        aliases_name=str(aliases_path),
    )
    counts = built.counts()
    refusals = list(built.conflicts)
    if not allow_unmatched:
        refusals += [f"class {m.cub_class!r} is unmatched ({m.note})" for m in built.matches if m.method == UNMATCHED]
    if refusals:
        summary = ", ".join(f"{counts[m]} {m}" for m in METHODS)
        raise InputError(
            checklist_path,
            [f"matched {summary}; nothing written", *refusals[:_SHOWN]]
            + ([f"... and {len(refusals) - _SHOWN} more"] if len(refusals) > _SHOWN else []),
            hint="add aliases (--aliases) for unmatched classes, or pass --allow-unmatched to leave them out",
        )
    taxonomy = checked_taxonomy(built, str(out))
    write_taxonomy(out, built)
    write_report(report, built)
    return built, taxonomy
