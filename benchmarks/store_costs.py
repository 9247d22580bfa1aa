"""What the store's bookkeeping costs as a store grows: the queue's read, ingestion and the audits.

    .venv/bin/python benchmarks/store_costs.py            # about a minute

Stores of 2 and 16 fabricated studies (3 seeds x 4 cells x --epochs epochs each; the even ones
evaluated and audited), built through the real ingest and phase logic as in the console benchmark.
For each store, medians of --repeats:

- ``job_rows(store, study)``: the read `hierconsole run` / `runs --watch` repeats every 0.2 s;
- ``job_rows(store)``: every job, what the console's runs view reads;
- ingestion of one job's final events (4 cells' ``final``) and of an evaluate job's 12 ``norms`` and
  36 ``metrics`` events, into a copy of the store (rolled back);
- ``run_audits(store, study)`` of one complete study.

A cost that grows with the store while the study it concerns stays the same is O(events x jobs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(home: Path, n_studies: int, epochs: int) -> None:
    import pytest

    from hierconsole.datasets import make_synthetic
    from hierconsole.study.db.catalog import register_dataset
    from hierconsole.study.db.storage import Store
    from hierconsole.study.run.lifecycle import advance, create_study
    from tests.stores import fixed as fx
    from tests.tiny import TINY, tiny_preset

    with Store(home) as store, pytest.MonkeyPatch.context() as mp:
        register_dataset(store, make_synthetic(TINY))
        pinned = {
            "evaluation.qg_seeds": list(fx.SEEDS),
            "evaluation.aggregation": "micro",
            "temperature.euclidean": 0.2,
            "temperature.poincare": 0.2,
            "training.drop_last": True,
        }
        preset = tiny_preset(epochs=epochs, seeds=fx.SEEDS, **pinned)
        for i in range(n_studies):
            sid = f"bench-{i:03d}"
            mp.setattr("hierconsole.study.run.lifecycle.new_study_id", lambda preset, sid=sid: sid)
            create_study(store, preset, "tiny")
            complete = i % 2 == 0
            for seed in fx.SEEDS:
                job = f"{sid}/final-s{seed}"
                fx._apply(store, job, sid, "final", seed, fx.training_events(seed, epochs, finish=complete))
                fx._set_job(store, job, "finished" if complete else "running")
            if complete:
                advance(store, sid)
                store.execute(
                    "UPDATE studies SET locked_at = now(), test_first_read_at = now() WHERE study_id = ?", [sid]
                )
                fx._apply(store, f"{sid}/evaluate", sid, "evaluate", 0, fx.evaluation_events(sid))
                fx._set_job(store, f"{sid}/evaluate", "finished")
                advance(store, sid)


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


class _Rollback(Exception):
    pass


def measure(home: Path, repeats: int, epochs: int) -> dict[str, float]:
    from hierconsole.contract.events import from_record
    from hierconsole.study import read
    from hierconsole.study.db.storage import Store
    from hierconsole.study.run.ingest import JobRef, apply_events
    from tests.stores import fixed as fx

    sid = "bench-000"
    finals = [e for e in fx.training_events(42, epochs) if e["kind"] == "final"]
    scoring = fx.evaluation_events(sid)

    with Store(home) as store:
        n_events = store.one("SELECT count(*) FROM events")[0]

        def ingest(job: JobRef, batch: list) -> None:
            def write(con) -> None:
                apply_events(con, job, [from_record(e) for e in batch])
                raise _Rollback  # the store's writer rolls the transaction back: every round sees the same store

            with contextlib.suppress(_Rollback):
                store.write(write)

        out = {
            "events in the store": float(n_events),
            "job_rows(store, study)": median_ms(lambda: read.job_rows(store, sid), repeats),
            "job_rows(store)": median_ms(lambda: read.job_rows(store), repeats),
            "ingest 4 final events": median_ms(
                lambda: ingest(JobRef(f"{sid}/final-s42", sid, "final", 42), finals), repeats
            ),
            "ingest 12 norms + 36 metrics events": median_ms(
                lambda: ingest(JobRef(f"{sid}/evaluate", sid, "evaluate", 0), scoring), repeats
            ),
            "run_audits(store, study)": median_ms(lambda: read.run_audits(store, sid), repeats),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--studies", default="2,16")
    args = ap.parse_args(argv)
    print(
        f"# store costs  {time.strftime('%Y-%m-%d %H:%M')}  {os.cpu_count()} CPUs, "
        f"load avg {os.getloadavg()[0]:.2f}, {args.epochs} epochs per job, medians of {args.repeats}"
    )
    sizes = [int(x) for x in args.studies.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            home = Path(tmp) / f"s{n}"
            build(home, n, args.epochs)
            results[n] = measure(home, args.repeats, args.epochs)
    names = list(results[sizes[0]])
    print("\n| | " + " | ".join(f"{n} studies" for n in sizes) + " | growth |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    for name in names:
        vals = [results[n][name] for n in sizes]
        cells = " | ".join(f"{v:,.0f}" if name.startswith("events") else f"{v:.1f} ms" for v in vals)
        print(f"| {name} | {cells} | x{vals[-1] / vals[0]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
