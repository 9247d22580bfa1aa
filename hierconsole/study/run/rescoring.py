"""Post-hoc re-scoring of a locked study's stored test embeddings under another aggregation.

The registered endpoint is never replaced: re-scored metrics are stored with posthoc = true, and a
re-score under the registered aggregation is only compared with the stored metrics (reconciliation).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hierconsole.contract import events
from hierconsole.study.analysis.audits.result import Check, cell_name
from hierconsole.study.db.ids import rescore_job_id
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import insert_jobs, record_audits, seal_for_scoring
from hierconsole.vocabulary import Aggregation

if TYPE_CHECKING:
    import duckdb  # write callbacks are handed a connection by Store.write; only study.db opens one

RECONCILE_TOLERANCE = 1e-5
CHECK_NAME = "rescore_reconciles"


def queue_rescore(store: Store, study_id: str, aggregation: Aggregation) -> list[str]:
    """Queue the re-score under `aggregation` and the reconciliation under the registered one."""
    registered = get_study(store, study_id).preset.evaluation.aggregation
    wanted = [registered] if aggregation == registered else [aggregation, registered]
    specs = [seal_for_scoring(store, study_id, rescore=agg) for agg in wanted]

    def go(con: duckdb.DuckDBPyConnection) -> None:
        for spec in specs:
            con.execute("DELETE FROM jobs WHERE job_id = ?", [spec.job_id])
            con.execute("DELETE FROM events WHERE job_id = ?", [spec.job_id])
        insert_jobs(con, store.home, specs)

    store.write(go)
    return [s.job_id for s in specs]


@dataclass(frozen=True)
class Reconciliation:
    ok: bool
    max_abs_diff: float | None
    compared: int
    message: str


def reconcile(store: Store, study_id: str) -> Reconciliation:
    """Compare the re-score under the registered aggregation with the stored endpoint; record the result."""
    registered = get_study(store, study_id).preset.evaluation.aggregation
    stored = {
        (run, pert, level, metric): value
        for run, pert, level, metric, value in store.rows(
            "SELECT run_id, perturbation, level, metric, value FROM metrics "
            "WHERE study_id = ? AND aggregation = ? AND NOT posthoc",
            [study_id, registered],
        )
    }
    rescored = [
        events.from_payload(kind, json.loads(p))
        for kind, p in store.rows(
            "SELECT kind, payload FROM events WHERE job_id = ? AND kind = ? ORDER BY key",
            [rescore_job_id(study_id, registered), events.EventKind.RECONCILE],
        )
    ]
    worst, worst_at, n = 0.0, "", 0
    missing: list[str] = []
    for ev in rescored:
        assert isinstance(ev, events.Reconcile)
        for level, metrics in ev.metrics.items():
            for metric, value in metrics.items():
                key = (ev.run_id, ev.perturbation, level, metric)
                where = f"{cell_name(ev.run_id)} Q/G {ev.perturbation} {level} {metric}"
                if key not in stored:
                    missing.append(where)
                    continue
                if math.isnan(value) or stored[key] is None:
                    continue
                diff = abs(value - float(stored[key]))
                if diff > worst or not worst_at:
                    worst, worst_at = diff, f"{where}: re-scored {value:.6g}, stored {float(stored[key]):.6g}"
                n += 1
    ok = n > 0 and not missing and worst <= RECONCILE_TOLERANCE
    msg = (
        f"reconciliation under the registered {registered} aggregation: {n} values compared, max |diff| "
        f"{worst:.2e} (tolerance {RECONCILE_TOLERANCE:g}) at {worst_at or 'none'}, {len(missing)} missing"
        + (f" ({'; '.join(missing[:5])})" if missing else "")
        + f": {'pass' if ok else 'FAIL'}"
    )
    record_audits(store, study_id, [Check(CHECK_NAME, ok, msg)])
    return Reconciliation(ok, worst if n else None, n, msg)
