"""The paper's tables as a replication measured them, each value beside the paper's published one (written
to files by `present.report.replication_tables`).

Every table is one long frame with the same columns — which table, dataset, row and column of the paper's
table it fills, the measured value, its seed SD and count, the published value, the difference and whether
the two are comparable (not at smoke scale: the budgets differ) — so CSV, Markdown and LaTeX are written by
the one table writer and a reader can join any two tables. Values are read from the studies and families
the replication's stages recorded; nothing here runs or writes anything.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from hierconsole.errors import HierconsoleError
from hierconsole.levels import PAPER_CODES
from hierconsole.study.analysis.paper_datasets import CUB, DATASETS, REGISTERED
from hierconsole.study.analysis.paper_tables import PAPER_TABLES, paper_long
from hierconsole.study.analysis.statistics import mean_sd
from hierconsole.study.db.catalog import get_dataset, study_levels
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read.effects import study_effects
from hierconsole.study.read.families import family_outer_arms, get_family, is_family
from hierconsole.study.read.results import per_seed, table_frame
from hierconsole.vocabulary import ARMS, HIER_METRIC, MAP, RECALL_KS

SCHEMA = {
    "table": pl.Utf8,
    "dataset": pl.Utf8,
    "row": pl.Utf8,
    "column": pl.Utf8,
    "measured": pl.Float64,
    "seed_sd": pl.Float64,
    "n": pl.Int64,
    "published": pl.Float64,
    "difference": pl.Float64,
    "comparable": pl.Boolean,
}
"""The columns of every measured table."""
# The paper's tables are three-level (`require_three_levels` refuses any other study).
LEVEL_METRICS = (*(f"{level}_{MAP}" for level in PAPER_CODES), HIER_METRIC)
RECALL_METRICS = tuple(f"{level}_R@{k}" for level in PAPER_CODES for k in RECALL_KS)


@dataclass(frozen=True)
class Row:
    dataset: str
    row: str
    column: str
    measured: float | None
    seed_sd: float | None = None
    n: int | None = None


Published = Callable[[str, str, str, str], float | None]
"""(table, dataset, row, column) -> the paper's value, or None where the paper has none."""


_REGISTERED_ONLY = ("main-1", "sec-5.2", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8")

_MEMBER_TABLES = ("main-2", "S9", "S10")
"""Tables whose rows are `<member> <arm>`: the paper names the member only (each trains one cell)."""


def _paper_key(table: str, rec: dict) -> tuple[str, str, str] | None:
    """A published value's (dataset, row, column) in this module's naming, or None if no table row has it."""
    dataset, column = rec["dataset"], rec["column"]
    if table in _REGISTERED_ONLY and rec.get("aggregation") not in (None, REGISTERED[dataset]):
        return None  # e.g. the text's post-hoc CUB group-macro effects: those are S11's
    if table in ("main-1", "S3", "S5", "sec-5.1", "sec-5.5"):
        row = rec["arm"] if "seed" not in rec else f"{rec['arm']} seed {rec['seed']}"
        return dataset, row, column
    if table in ("sec-5.2", "S11"):
        return (dataset, rec["effect"], rec["metric"]) if column == "mean" else None
    if table in ("S4", "S6"):
        if column.startswith("seed_"):
            return dataset, f"{rec['effect']} seed {column[len('seed_'):]}", rec["metric"]
        return (dataset, f"{rec['effect']} mean", rec["metric"]) if column == "mean" else None
    if table in ("S1", "S2"):
        return dataset, f"{rec['geometry']} tau={rec['tau']:g}", column
    if table in ("S7", "S8"):
        return dataset, rec["arm"], f"{rec['level']}_{column}"
    if table in _MEMBER_TABLES:
        return dataset, rec["member"], column
    if table == "sec-5.5-gains":
        return (dataset, rec["contrast"], rec["metric"]) if column == "mean" else None
    if table == "sec-S1":
        return dataset, rec["quantity"], column
    return None


@functools.cache
def _published(table: str) -> dict[tuple[str, str, str], float]:
    found: dict[tuple[str, str, str], float] = {}
    for rec in paper_long(table).to_dicts():
        key = _paper_key(table, rec)
        if key is not None and isinstance(rec["value"], int | float) and key not in found:
            found[key] = float(rec["value"])
    return found


_SOURCE_TABLE = {
    "sec-5.5-cub": "sec-5.5",
    "sec-5.5-nabirds": "sec-5.5",
}
"""This module's table -> the paper's table it stands beside, where the two ids differ."""


def published_value(table: str, dataset: str, row: str, column: str) -> float | None:
    """The paper's value at one cell of one of its tables (`study.analysis.paper_tables`), or None."""
    source = _SOURCE_TABLE.get(table, table)
    if source not in PAPER_TABLES:
        return None
    if table in _MEMBER_TABLES:
        member, _, arm = row.partition(" ")
        row = member if arm in ARMS else row
    if source == "sec-5.5" and row.count(" - ") == 1:
        source = "sec-5.5-gains"
    return _published(source).get((dataset, row, column))


@dataclass(frozen=True)
class TableSpec:
    table_id: str
    title: str
    build: Callable[[Store, Mapping[str, Mapping[str, str]]], Iterator[Row]]
    needs: tuple[str, ...]
    """The stages whose outputs it reads; a table is omitted (and named) when one is absent."""
    reads: tuple[str, ...] = ()
    """Every stage it reads rows from, needed or not (a table over each dataset's stage reads those that
    ran): what a table still waits on while a replication runs."""


def _arm_rows(
    store: Store, dataset: str, study_id: str, aggregation: str | None = None, metrics: Sequence[str] = LEVEL_METRICS
) -> Iterator[Row]:
    # A level without a valid query in this split has no column: it is left out, the others reported.
    view = study_effects(store, study_id, effect_metrics=[HIER_METRIC], aggregation=aggregation)
    arms = view.arms.filter(pl.col("metric").is_in(list(metrics)))
    for arm, metric, mean, sd, n in arms.select("arm", "metric", "mean", "sd", "n").iter_rows():
        yield Row(dataset, arm, metric, mean, sd, n)  # the baselines (frozen, pca, hier) are arms here too


def _effect_rows(store: Store, dataset: str, study_id: str, aggregation: str | None = None) -> Iterator[Row]:
    view = study_effects(store, study_id, effect_metrics=[HIER_METRIC], aggregation=aggregation)
    for name, effect in view.effects.get(HIER_METRIC, {}).items():
        yield Row(dataset, name, HIER_METRIC, effect.mean, effect.sd, effect.n)


def _recall_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    yield from _arm_rows(store, dataset, study_id, metrics=RECALL_METRICS)


def _seed_effect_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    view = study_effects(store, study_id, effect_metrics=[HIER_METRIC])
    for name, effect in view.effects.get(HIER_METRIC, {}).items():
        for seed, value in sorted(effect.per_unit.items()):
            yield Row(dataset, f"{name} seed {seed}", HIER_METRIC, value, None, 1)
        yield Row(dataset, f"{name} mean", HIER_METRIC, effect.mean, effect.sd, effect.n)


def _tuning_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    for rec in table_frame(store, "tuning", study_id).to_dicts():
        for column in ("middle_mAP", "high_mAP", "score"):
            yield Row(dataset, f"{rec['geometry']} tau={rec['tau']:g}", column, rec[column], None, None)


def _audit_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    for rec in table_frame(store, "audits", study_id).to_dicts():
        yield Row(dataset, rec["check_name"], "passed", 1.0 if rec["ok"] else 0.0, None, None)


def _per_seed_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    frame = per_seed(store, study_id)
    for rec in frame.sort("arm", "seed").to_dicts():
        for metric in LEVEL_METRICS:
            if metric in rec:
                yield Row(dataset, f"{rec['arm']} seed {rec['seed']}", metric, rec[metric], None, 1)


def _member_rows(store: Store, dataset: str, family_id: str) -> Iterator[Row]:
    for member in get_family(store, family_id).members:
        for row in _arm_rows(store, dataset, member.study_id):
            yield Row(dataset, f"{member.member} {row.row}", row.column, row.measured, row.seed_sd, row.n)


def _across_splits(store: Store, dataset: str, family_id: str) -> Iterator[Row]:
    """Each arm's mean over the outer splits (the split is the unit), with the SD over splits."""
    values: dict[tuple[str, str], list[float]] = {}
    for member in get_family(store, family_id).members:
        for row in _arm_rows(store, dataset, member.study_id):
            if row.measured is not None:
                values.setdefault((row.row, row.column), []).append(row.measured)
    for (arm, metric), xs in sorted(values.items()):
        mean, sd = mean_sd(xs)
        yield Row(dataset, arm, metric, mean, sd, len(xs))


def _outer_arm_rows(store: Store, dataset: str, family_id: str) -> Iterator[Row]:
    """The paper's outer-split arms (frozen, matched Euclidean and Hyperbolic, Taxonomy-SupCon): each arm's
    mean and SD over splits, then the paired gains (split by split, mean and SD over splits)."""
    _, view = family_outer_arms(store, family_id)
    for arm in view.arms:
        if arm.metric in LEVEL_METRICS:
            yield Row(dataset, _PAPER_ARM.get(arm.name, arm.name), arm.metric, arm.mean, arm.sd, arm.n)
    for gain in view.gains:
        if gain.metric in LEVEL_METRICS:
            name = f"{_PAPER_ARM.get(gain.a, gain.a)} - {_PAPER_ARM.get(gain.b, gain.b)}"
            yield Row(dataset, name, gain.metric, gain.mean, gain.sd, gain.n)


_PAPER_ARM = {
    "matched-euclidean": "matched_euclidean",
    "matched-hyperbolic": "matched_hyperbolic",
    "taxonomy-supcon": "supcon",
    "E_R": "euclidean_regression",  # Sec. 5.1's 32-D Euclidean regression projector
    "E_S": "supcon",  # Sec. 5.1's Taxonomy-SupCon projector (NABirds seen-class)
}
"""The shipped outer-arms families' and baseline studies' arm names -> the paper's names in its tables."""


def _baseline_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    for row in _arm_rows(store, dataset, study_id):
        yield Row(dataset, _PAPER_ARM.get(row.row, row.row), row.column, row.measured, row.seed_sd, row.n)


def _taxonomy_rows(store: Store, dataset: str, study_id: str) -> Iterator[Row]:
    info = get_dataset(store, get_study(store, study_id).dataset_id)
    counts = {
        "images": info.n_samples,
        "leaf_classes": info.n_leaf,
        "middle_groups": info.level_counts[1],
        "high_groups": info.level_counts[2],
    }
    for name, value in counts.items():
        yield Row(dataset, name, "value", float(value), None, None)

Rows = Callable[[Store, str, str], Iterator[Row]]
"""(store, dataset, the id a stage recorded) -> a table's rows."""


def require_three_levels(store: Store, ref: str) -> None:
    """Refuse a study (or a family's member studies) whose taxonomy is not three-level: the paper's tables
    have a row or column per level of a three-level tree (Class/Genus/Family, Leaf/Parent/Supergroup)."""
    study_id = ref.rpartition(":")[0] if ":" in ref else ref  # a re-score is recorded as study:aggregation
    if store.one("SELECT 1 FROM studies WHERE study_id = ?", [study_id]) is not None:
        studies = [study_id]
    elif is_family(store, ref):
        studies = [m.study_id for m in get_family(store, ref).members]
    else:
        return
    for sid in studies:
        levels = study_levels(store, sid).levels
        if levels.k != 3:
            raise HierconsoleError(
                f"study {sid} has {levels.k} levels ({levels.describe()}): the paper's tables are three-level"
            )


def _single(table_id: str, title: str, stage: str, run: str, rows: Rows) -> TableSpec:
    """A table of one dataset's stage (`factorial-cub`, ...), omitted when that stage is absent."""
    dataset = stage.partition("-")[2]

    def build(store: Store, outputs: Mapping[str, Mapping[str, str]]) -> Iterator[Row]:
        if run in outputs[stage]:  # a stage recorded by an earlier version may lack a later run
            require_three_levels(store, outputs[stage][run])
            yield from rows(store, dataset, outputs[stage][run])

    return TableSpec(table_id, title, build, (stage,), (stage,))


def _each(table_id: str, title: str, kind: str, run: str, rows: Rows) -> TableSpec:
    """A table over every dataset's `<kind>-<dataset>` stage that ran."""

    stages = tuple(f"{kind}-{dataset}" for dataset in DATASETS)

    def build(store: Store, outputs: Mapping[str, Mapping[str, str]]) -> Iterator[Row]:
        for dataset, stage in zip(DATASETS, stages, strict=True):
            if stage in outputs:
                require_three_levels(store, outputs[stage][run])
                yield from rows(store, dataset, outputs[stage][run])

    return TableSpec(table_id, title, build, (), stages)


def _rescored(store: Store, outputs: Mapping[str, Mapping[str, str]]) -> Iterator[Row]:
    study_id, _, aggregation = outputs["rescore-cub"]["rescored"].rpartition(":")
    require_three_levels(store, study_id)
    yield from _effect_rows(store, CUB, study_id, aggregation)


_FACTORIAL = ("factorial", "factorial")
_CUB = ("factorial-cub", "factorial")
_NABIRDS = ("factorial-nabirds", "factorial")

TABLES: tuple[TableSpec, ...] = (
    _each("sec-S1", "Dataset and taxonomy counts (S1)", *_FACTORIAL, _taxonomy_rows),
    _each(
        "main-1",
        "Controlled Geometry x Loss factorial: mAP per level, mean and SD over training seeds",
        *_FACTORIAL,
        _arm_rows,
    ),
    _each("sec-5.2", "Simple effects on the hier score, paired within training seed", *_FACTORIAL, _effect_rows),
    _single("S1", "CUB temperature selection (validation only)", *_CUB, _tuning_rows),
    _single("S2", "NABirds Parent-disjoint temperature selection (validation only)", *_NABIRDS, _tuning_rows),
    _single("S3", "CUB per-seed arm mAP", *_CUB, _per_seed_rows),
    _single("S4", "CUB simple effects by training seed", *_CUB, _seed_effect_rows),
    _single("S5", "NABirds Parent-disjoint per-seed arm mAP", *_NABIRDS, _per_seed_rows),
    _single("S6", "NABirds simple effects by training seed", *_NABIRDS, _seed_effect_rows),
    _single("S7", "CUB factorial Recall@K", *_CUB, _recall_rows),
    _single("S8", "NABirds Parent-disjoint factorial Recall@K", *_NABIRDS, _recall_rows),
    _single(
        "main-2",
        "Semantic-supervision control on NABirds Parent-disjoint",
        "families-nabirds",
        "semantic-control",
        _member_rows,
    ),
    _single(
        "S9",
        "NABirds semantic-alignment control, mean and SD over seeds",
        "families-nabirds",
        "semantic-control",
        _member_rows,
    ),
    _single("S10", "NABirds curvature / radius control", "families-nabirds", "curvature-control", _member_rows),
    TableSpec(
        "S11",
        "CUB group-macro effects on the hier score (post hoc re-score)",
        _rescored,
        ("rescore-cub",),
        ("rescore-cub",),
    ),
    _each("S12", "Final factorial fairness and leakage checks", *_FACTORIAL, _audit_rows),
    _each(
        "sec-5.1",
        "Baseline context: frozen features, the HIER-style arm and matched projectors",
        "baselines",
        "baselines",
        _baseline_rows,
    ),
    _single(
        "sec-5.5-cub",
        "CUB Genus-disjoint outer splits: the paper's arms (mean and SD over splits) and paired gains",
        "families-cub",
        "outer-arms",
        _outer_arm_rows,
    ),
    _single(
        "sec-5.5-nabirds",
        "NABirds Parent-disjoint outer splits: the paper's arms (mean and SD over splits) and paired gains",
        "families-nabirds",
        "outer-arms",
        _outer_arm_rows,
    ),
    _single(
        "sec-5.5-cub-factorial",
        "CUB Genus-disjoint outer splits, the 2x2 factorial per split: arm means and SD over splits",
        "families-cub",
        "genus-disjoint",
        _across_splits,
    ),
    _single(
        "sec-5.5-nabirds-factorial",
        "NABirds Parent-disjoint outer splits, the 2x2 factorial per split: arm means and SD over splits",
        "families-nabirds",
        "outer-splits",
        _across_splits,
    ),
)


def _fix(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def measured_frame(spec: TableSpec, rows: Sequence[Row], *, comparable: bool, published: Published) -> pl.DataFrame:
    records = []
    for r in rows:
        paper = published(spec.table_id, r.dataset, r.row, r.column)
        measured = _fix(r.measured)
        records.append(
            (
                spec.table_id,
                r.dataset,
                r.row,
                r.column,
                measured,
                _fix(r.seed_sd),
                r.n,
                paper,
                None if paper is None or measured is None else measured - paper,
                comparable and paper is not None,
            )
        )
    return pl.DataFrame(records, schema=SCHEMA, orient="row")


@dataclass(frozen=True)
class MeasuredTable:
    table_id: str
    title: str
    frame: pl.DataFrame


def replication_tables(
    store: Store,
    outputs: Mapping[str, Mapping[str, str]],
    *,
    comparable: bool,
    published: Published = published_value,
    absent: Mapping[str, str] | None = None,
) -> tuple[list[MeasuredTable], dict[str, str]]:
    """Every table whose stages ran, and table id -> why for the ones omitted (a dataset left out).
    ``absent``: stage -> why it is not in ``outputs`` (e.g. its dataset's folder was not given), said after
    the stages a table needs."""
    tables: list[MeasuredTable] = []
    omitted: dict[str, str] = {}
    for spec in TABLES:
        table = measured_table(store, spec, outputs, comparable=comparable, published=published, absent=absent)
        if isinstance(table, str):
            omitted[spec.table_id] = table
        else:
            tables.append(table)
    return tables, omitted


def measured_table(
    store: Store,
    spec: TableSpec,
    outputs: Mapping[str, Mapping[str, str]],
    *,
    comparable: bool,
    published: Published = published_value,
    absent: Mapping[str, str] | None = None,
) -> MeasuredTable | str:
    """One table from the stages' outputs so far, or why it has no rows (the stage it needs is absent, and
    why where ``absent`` says, or none of the stages it reads has run)."""
    missing = [stage for stage in spec.needs if stage not in outputs]
    rows = [] if missing else list(spec.build(store, outputs))
    if missing:
        causes = sorted({absent[stage] for stage in missing if absent and stage in absent})
        return f"needs {', '.join(missing)}" + (f": {'; '.join(causes)}" if causes else "")
    if not rows:
        return "no stage of it ran"
    return MeasuredTable(spec.table_id, spec.title, measured_frame(spec, rows, comparable=comparable, published=published))
