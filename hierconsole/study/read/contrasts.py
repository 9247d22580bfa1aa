"""Contrasts of two studies in the store: the refusals (unlocked, other dataset, other Q/G protocol or
aggregation), then A - B paired by training seed (`study.analysis.contrasts`)."""

from __future__ import annotations

from collections.abc import Sequence

from hierconsole.errors import HierconsoleError
from hierconsole.study.analysis.contrasts import (
    DEFAULT_METRIC,
    as_one_family,
    contrast_tables,
    metric_columns,
    parse_arm_pair,
)
from hierconsole.study.analysis.contrasts import StudyContrast as StudyContrast
from hierconsole.study.db import split_files
from hierconsole.study.db.catalog import study_levels
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.read.results import empty_levels, per_seed

__all__ = [
    "DEFAULT_METRIC",
    "StudyContrast",
    "compare_studies",
    "comparable",
    "contrast_family",
    "metric_columns",
    "parse_arm_pair",
]
"""What a front end reads of a contrast: the result type, and the metric and --arms checks it makes before
it opens the store (the ones `compare_studies` makes again)."""


def _qg_protocol(store: Store, study_id: str) -> dict[str, str]:
    return dict(
        store.rows(f"SELECT role, sha256 FROM splits WHERE study_id = ? AND {split_files.QG_ROLES_SQL}", [study_id])
    )


def comparable(store: Store, a: str, b: str) -> None:
    """Refuse (HierconsoleError naming which study and why) unless A and B can be contrasted: both locked
    and evaluated, on the same dataset, scored on the same query/gallery splits and aggregation, with the
    same hier-score levels."""
    studies = {sid: get_study(store, sid) for sid in (a, b)}
    for sid, study in studies.items():
        if study.locked_at is None:
            raise HierconsoleError(
                f"study {sid} is not locked (phase {study.phase}): a contrast reads official-test metrics, "
                "which exist only once every final run has finished and the study is locked"
            )
    sa, sb = studies[a], studies[b]
    if sa.dataset_id != sb.dataset_id:
        raise HierconsoleError(
            f"studies {a} and {b} are on different datasets ({sa.dataset_id} vs {sb.dataset_id}); a "
            "paired contrast needs the same samples and taxonomy"
        )
    agg_a, agg_b = sa.preset.evaluation.aggregation, sb.preset.evaluation.aggregation
    if agg_a != agg_b:
        raise HierconsoleError(
            f"studies {a} and {b} register different aggregations ({agg_a} vs {agg_b}); their metrics "
            "are different estimands"
        )
    ha, hb = study_levels(store, a).hier, study_levels(store, b).hier
    if ha != hb:
        raise HierconsoleError(
            f"studies {a} and {b} average different levels in their hier score ({', '.join(ha)} vs "
            f"{', '.join(hb)}; preset evaluation.hier_levels): their hier_mAP are different estimands"
        )
    qa, qb = _qg_protocol(store, a), _qg_protocol(store, b)
    if qa != qb:
        only = sorted(set(qa) ^ set(qb))
        differ = sorted(role for role in set(qa) & set(qb) if qa[role] != qb[role])
        why = []
        if only:
            why.append(f"perturbation(s) {', '.join(only)} in one study only")
        if differ:
            why.append(f"{', '.join(differ)} hold different query/gallery indices")
        raise HierconsoleError(
            f"studies {a} and {b} use different Q/G protocols ({'; '.join(why)}): their test metrics are "
            "not measured on the same queries and galleries (check split protocol, split seed, "
            "evaluation.n_query and evaluation.qg_seeds)"
        )


def compare_studies(
    store: Store,
    a: str,
    b: str,
    *,
    metric: str = DEFAULT_METRIC,
    arms: Sequence[tuple[str, str]] | None = None,
    labels: tuple[str, str] | None = None,
    name: str | None = None,
) -> StudyContrast:
    """A - B of two studies in the store (ids), after the refusals of `comparable`."""
    metric_columns(metric)  # a bad metric is reported before any query
    comparable(store, a, b)
    label_a, label_b = labels or (a, b)
    excluded = sorted({*empty_levels(store, a), *empty_levels(store, b)})
    return contrast_tables(
        per_seed(store, a), per_seed(store, b), a=label_a, b=label_b, metric=metric, arms=arms, name=name,
        excluded=excluded, levels=study_levels(store, a).levels,  # one dataset, so one set of levels
    )  # fmt: skip


def contrast_family(
    store: Store,
    a: str,
    b: str,
    *,
    metric: str = DEFAULT_METRIC,
    arms: Sequence[tuple[str, str]] | None = None,
    sesoi: float | None = None,
) -> StudyContrast:
    """`contrast A B`: :func:`compare_studies`, its rows tested as one family (`contrast A − B`), each with
    its TOST and verdict given a `sesoi`."""
    result = compare_studies(store, a, b, metric=metric, arms=arms)
    return as_one_family([result], f"contrast {result.a} − {result.b}", sesoi=sesoi)[0]

