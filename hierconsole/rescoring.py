"""Post-hoc re-scoring of a locked study's stored test embeddings under another aggregation.

The registered endpoint is never replaced: re-scored metrics are stored with posthoc = true, and a
re-score under the registered aggregation is only compared with the stored metrics (reconciliation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hierconsole.storage import Store
from hierconsole.studies import _insert_jobs, evaluate_job, get_study

RECONCILE_TOLERANCE = 1e-5


def queue_rescore(store: Store, study_id: str, aggregation: str) -> list[str]:
    """Queue the re-score under `aggregation` and the reconciliation under the registered one."""
    registered = get_study(store, study_id).preset.evaluation.aggregation
    wanted = [registered] if aggregation == registered else [aggregation, registered]
    specs = [evaluate_job(store, study_id, aggregation=agg, rescore=True) for agg in wanted]

    def go(con) -> None:
        for spec in specs:
            con.execute("DELETE FROM jobs WHERE job_id = ?", [spec.job_id])
            con.execute("DELETE FROM events WHERE job_id = ?", [spec.job_id])
        _insert_jobs(con, specs)

    store.write(go)
    return [s.job_id for s in specs]


@dataclass(frozen=True)
class Reconciliation:
    ok: bool
    max_abs_diff: float | None
    compared: int
    message: str


def reconcile(store: Store, study_id: str) -> Reconciliation:
    registered = get_study(store, study_id).preset.evaluation.aggregation
    stored = {
        (run, pert, level, metric): value
        for run, pert, level, metric, value in store.rows(
            "SELECT run_id, perturbation, level, metric, value FROM metrics "
            "WHERE study_id = ? AND aggregation = ? AND NOT posthoc",
            [study_id, registered],
        )
    }
    payloads = [
        json.loads(p)
        for (p,) in store.rows(
            "SELECT payload FROM events WHERE job_id = ? AND kind = 'reconcile'",
            [f"{study_id}/rescore-{registered}"],
        )
    ]
    worst, n = 0.0, 0
    missing = 0
    for ev in payloads:
        for level, metrics in ev["metrics"].items():
            for metric, value in metrics.items():
                key = (ev["run_id"], ev["perturbation"], level, metric)
                if key not in stored:
                    missing += 1
                    continue
                if value is None or stored[key] is None:
                    continue
                worst = max(worst, abs(float(value) - float(stored[key])))
                n += 1
    ok = n > 0 and missing == 0 and worst <= RECONCILE_TOLERANCE
    msg = (
        f"reconciliation under the registered {registered} aggregation: {n} values compared, max |diff| "
        f"{worst:.2e} (tolerance {RECONCILE_TOLERANCE:g}), {missing} missing: {'pass' if ok else 'FAIL'}"
    )
    store.execute(
        "INSERT OR REPLACE INTO audits (study_id, check_name, ok, evidence) VALUES (?, 'rescore_reconciles', ?, ?)",
        [study_id, ok, msg],
    )
    return Reconciliation(ok, worst if n else None, n, msg)
