"""Analysis tables read from the store: what `effects`, `export` and the TUI show for a study."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hierconsole.effects import per_seed_from_long
from hierconsole.errors import HierconsoleError, NotFoundError
from hierconsole.export import ANALYSIS_TABLES, analysis_frame
from hierconsole.storage import Store
from hierconsole.studies import get_study, resolve_study


def registered_aggregation(store: Store, study_id: str) -> str:
    return get_study(store, study_id).preset.evaluation.aggregation


def aggregations(store: Store, study_id: str) -> list[str]:
    """Aggregations with stored test metrics: the registered one first, re-scored ones after."""
    found = [
        r[0] for r in store.rows("SELECT DISTINCT aggregation FROM metrics WHERE study_id = ?", [study_id])
    ]
    reg = registered_aggregation(store, study_id)
    return sorted(found, key=lambda a: (a != reg, a))


def metrics_long(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame:
    agg = aggregation or registered_aggregation(store, study_id)
    return store.frame(
        "SELECT seed, arm, perturbation, level, metric, value FROM metrics "
        "WHERE study_id = ? AND aggregation = ? AND metric IN ('mAP', 'R@1', 'R@5', 'R@10', 'R@20') "
        "ORDER BY seed, arm, perturbation, level, metric",
        [study_id, agg],
    )


def per_seed(store: Store, study_id: str, aggregation: str | None = None) -> pl.DataFrame:
    """The per-seed wide table (arm, seed, metric columns), Q/G perturbations averaged within seed."""
    long = metrics_long(store, study_id, aggregation)
    if long.is_empty():
        phase = get_study(store, study_id).phase
        raise HierconsoleError(
            f"study {study_id} has no official-test metrics yet (phase: {phase}); they appear once every "
            "final run has finished and the locked study has been evaluated"
        )
    return per_seed_from_long(long, source=f"study {study_id}")


def per_seed_for_study(home: Path, study: str) -> pl.DataFrame:
    with Store(home) as store:
        return per_seed(store, resolve_study(store, study))


RAW_TABLES = {
    "runs": "SELECT r.run_id, r.study_id, r.kind, r.seed, r.arm, r.geometry, r.loss, r.tau, j.state, "
    "r.trainable_params, r.updates, r.init_sha256, r.final_sha256, r.reload_max_diff, r.best_epoch, "
    "r.best_score, r.max_norm FROM runs r JOIN jobs j USING (job_id) WHERE r.study_id = ? ORDER BY r.run_id",
    "metrics": "SELECT study_id, run_id, seed, arm, perturbation, aggregation, level, metric, value, posthoc "
    "FROM metrics WHERE study_id = ? ORDER BY run_id, perturbation, aggregation, level, metric",
    "audits": "SELECT study_id, check_name, ok, evidence, checked_at FROM audits WHERE study_id = ? "
    "ORDER BY check_name",
    "tuning": "SELECT study_id, geometry, tau, middle_mAP, high_mAP, score, status FROM tuning "
    "WHERE study_id = ? ORDER BY geometry, tau",
}


def frame(store: Store, table: str, study_id: str) -> pl.DataFrame:
    if table in ANALYSIS_TABLES:
        return analysis_frame(table, per_seed(store, study_id), source=f"study {study_id}")
    if table in RAW_TABLES:
        return store.frame(RAW_TABLES[table], [study_id])
    raise NotFoundError(f"unknown table {table!r}")


def table_frame(home: Path, table: str, study: str | None) -> pl.DataFrame:
    with Store(home) as store:
        return frame(store, table, resolve_study(store, study))
