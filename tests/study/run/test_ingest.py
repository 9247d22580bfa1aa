"""Ingest through the event schema: a bad line in a job's events file is reported and skipped, never fatal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hierconsole.contract import events as ev
from hierconsole.contract import layout
from hierconsole.locations import job_dir
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.vocabulary import JobState
from tests.tiny import tiny_preset


def _lines(job_id: str) -> str:
    return "".join(
        [
            ev.to_line(ev.Start(pid=999_999, device="cpu", threads=1, ts=1.0)),
            "{this line is not JSON\n",
            ev.to_line(
                ev.Init(
                    cell="E_R",
                    arm="E_R",
                    geometry="euclidean",
                    loss="regression",
                    tau=None,
                    trainable_params=1896,
                    init_sha256="aa",
                    ts=2.0,
                )
            ),
            '{"kind": "epoch", "cell": "E_R", "epoch": 1}\n',
            ev.to_line(
                ev.Epoch(cell="E_R", epoch=1, epochs=1, train_loss=0.3, updates=8, batch_sha256="bb", ts=3.0)
            ),
        ]
    )


def _orphaned_study(home, tiny_fs) -> tuple[str, str]:
    """A study whose final job an earlier orchestrator left "running", with a damaged events file."""
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, tiny_preset(epochs=1, seeds=(42,)), "tiny")
        job_id = f"{study_id}/final-s42"
        (job_dir(store.home, job_id) / layout.EVENTS).write_text(_lines(job_id))
        store.execute("UPDATE jobs SET state = ?, pid = 999999 WHERE job_id = ?", [JobState.RUNNING, job_id])
    return study_id, job_id


def test_a_bad_line_is_reported_with_file_and_line_and_the_rest_ingested(tmp_path, tiny_fs):
    study_id, job_id = _orphaned_study(tmp_path, tiny_fs)
    problems: list[tuple[str, ev.LineProblem]] = []
    with Store(tmp_path) as store:
        Orchestrator(store, on_problem=lambda job, p: problems.append((job, p)))  # recovery replays the file
        path = job_dir(store.home, job_id) / layout.EVENTS
        assert [(job, p.path, p.line) for job, p in problems] == [(job_id, path, 2), (job_id, path, 4)]
        assert "not JSON" in problems[0][1].reason and "lacks field" in problems[1][1].reason
        kinds = [k for (k,) in store.rows("SELECT kind FROM events WHERE job_id = ? ORDER BY ts", [job_id])]
        assert kinds == ["start", "init", "epoch"]
        assert store.one("SELECT count(*) FROM epochs WHERE run_id = ?", [f"{job_id}/E_R"])[0] == 1
        # The worker (PID 999999) is gone and left no terminal event: crashed, ready to resume.
        assert store.one("SELECT state FROM jobs WHERE job_id = ?", [job_id])[0] == JobState.CRASHED


@pytest.mark.slow
def test_the_cli_warns_of_bad_lines_and_resumes_the_job(tmp_path, tiny_fs):
    study_id, job_id = _orphaned_study(tmp_path, tiny_fs)
    done = subprocess.run(
        [sys.executable, "-m", "hierconsole", "--home", str(tmp_path), "resume", study_id],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    output = " ".join((done.stdout + done.stderr).split())
    assert f"{layout.EVENTS}:2: not JSON" in output and f"{layout.EVENTS}:4:" in output
    assert "Traceback" not in output
    with Store(tmp_path) as store:
        assert store.one("SELECT phase FROM studies WHERE study_id = ?", [study_id])[0] == "complete"


def test_final_and_norms_events_set_exactly_their_runs_columns(tmp_path, tiny_fs):
    # Several cells' finals and norms in one batch (one replayed within it, as after a crash), a
    # missing best epoch, a non-finite best score, and a second job whose runs must stay untouched.
    from hierconsole.study.run.ingest import JobRef, apply_events
    from hierconsole.vocabulary import JobKind

    def init(cell: str) -> ev.Init:
        geometry = "poincare" if cell.startswith("H") else "euclidean"
        loss = "supcon" if cell.endswith("S") else "regression"
        return ev.Init(
            cell=cell, arm=cell, geometry=geometry, loss=loss, tau=None, trainable_params=1, init_sha256="i"
        )

    cells = ("E_R", "H_R", "E_S", "H_S")
    with Store(tmp_path / "home") as store:
        register_dataset(store, tiny_fs)
        study_id = create_study(store, tiny_preset(epochs=1, seeds=(42, 2024)), "tiny")
        jobs = [JobRef(f"{study_id}/final-s{s}", study_id, JobKind.FINAL, s) for s in (42, 2024)]
        for job in jobs:
            store.write(lambda con, job=job: apply_events(con, job, [init(c) for c in cells]))
        job = jobs[0]
        finals = [
            ev.Final(
                cell=c,
                final_sha256=f"sha-{c}",
                updates=10 + i,
                reload_max_diff=0.5 * i,
                best_epoch=None if c == "E_S" else i + 1,
                best_score=float("nan") if c == "H_S" else 0.25 * i,
            )
            for i, c in enumerate(cells)
        ]
        stale = ev.Final(
            cell="E_R", final_sha256="old", updates=1, reload_max_diff=9.0, best_epoch=9, best_score=9.0
        )
        norms = [
            ev.Norms(run_id=f"{job.job_id}/{c}", max_norm=0.1 + i, radius=1.0 / 2**0.5, bound=0.3)
            for i, c in enumerate(("H_R", "H_S"))
        ]
        store.write(lambda con: apply_events(con, job, [stale, *finals, *norms]))
        store.write(lambda con: apply_events(con, job, norms))  # a replay changes nothing
        got = {
            r[0]: r[1:]
            for r in store.rows(
                "SELECT run_id, final_sha256, updates, reload_max_diff, best_epoch, best_score, "
                "max_norm, ball_radius, norm_bound FROM runs ORDER BY run_id"
            )
        }
    for i, c in enumerate(cells):
        n = {"H_R": (0.1, 1.0 / 2**0.5, 0.3), "H_S": (1.1, 1.0 / 2**0.5, 0.3)}.get(c, (None, None, None))
        best = None if c == "E_S" else i + 1
        score = None if c == "H_S" else 0.25 * i
        assert got[f"{job.job_id}/{c}"] == (f"sha-{c}", 10 + i, 0.5 * i, best, score, *n)
        assert got[f"{jobs[1].job_id}/{c}"] == (None,) * 8


def _job_events(seed: int, *, epochs: int = 3) -> list[ev.Event]:
    """A training job's whole life as events, every kind the orchestrator ingests during a tick."""
    out: list[ev.Event] = [ev.Start(pid=1, device="cpu", threads=1, ts=1.0)]
    for cell in ("E_R", "H_S"):
        geometry, loss = ("euclidean", "regression") if cell == "E_R" else ("poincare", "supcon")
        out.append(
            ev.Init(
                cell=cell, arm=cell, geometry=geometry, loss=loss, tau=None, trainable_params=3, init_sha256=cell, ts=1.0
            )
        )
    for epoch in range(1, epochs + 1):
        for cell in ("E_R", "H_S"):
            out.append(
                ev.Epoch(
                    cell=cell,
                    epoch=epoch,
                    epochs=epochs,
                    train_loss=1.0 / (epoch + seed),
                    updates=epoch * 8,
                    batch_sha256=f"b{epoch}",
                    ts=1.0 + epoch,
                )
            )
        out.append(
            ev.Validation(
                cell="E_R",
                epoch=epoch,
                aggregation="micro",
                metrics={"leaf": {"mAP": 0.1 * epoch}},
                score=0.1 * epoch,
                ts=1.5 + epoch,
            )
        )
    out.append(
        ev.Final(
            cell="E_R", final_sha256=f"f{seed}", updates=24, reload_max_diff=0.0, best_epoch=2, best_score=0.2, ts=9.0
        )
    )
    return out


def test_one_batch_of_every_jobs_lines_writes_what_one_write_per_job_writes(tmp_path, tiny_fs):
    # The orchestrator writes all running jobs' new lines of a tick in one transaction (apply_batch);
    # interleaved ticks of three jobs must give the same rows as each job's lines written apart.
    from hierconsole.study.run.ingest import JobRef, apply_batch, apply_events
    from hierconsole.vocabulary import JobKind

    tables = ("events", "runs", "epochs", "val_metrics", "jobs")
    seeds = (42, 2024, 7)

    def contents(home) -> dict[str, list[tuple]]:
        with Store(home, read_only=True) as store:
            return {
                t: store.rows(f"SELECT * EXCLUDE (created_at) FROM {t} ORDER BY ALL")
                if t == "jobs"
                else store.rows(f"SELECT * FROM {t} ORDER BY ALL")
                for t in tables
            }

    results = []
    for batched in (False, True):
        home = tmp_path / f"home-{batched}"
        with Store(home) as store:
            register_dataset(store, tiny_fs)
            study_id = create_study(store, tiny_preset(epochs=3, seeds=seeds), "tiny")
            jobs = {s: JobRef(f"{study_id}/final-s{s}", study_id, JobKind.FINAL, s) for s in seeds}
            lives = {s: _job_events(s) for s in seeds}
            if batched:
                for t in range(0, max(len(v) for v in lives.values()), 4):  # four lines of each job a tick
                    ticked = [(jobs[s], lives[s][t : t + 4]) for s in seeds]
                    store.write(lambda con, ticked=ticked: apply_batch(con, ticked))
            else:
                for s in seeds:
                    store.write(lambda con, job=jobs[s], life=lives[s]: apply_events(con, job, life))
        # The two studies differ only in their ids (made from the clock): compare with the id replaced.
        rows = contents(home)
        results.append({t: [tuple(str(x).replace(study_id, "S") for x in r) for r in v] for t, v in rows.items()})
    plain, batched_rows = results
    assert plain == batched_rows
    assert len(plain["epochs"]) == 3 * 2 * 3 and len(plain["events"]) == 3 * len(_job_events(42))
    assert sorted(r[0] for r in plain["jobs"] if r[0].startswith("S/final")) == sorted(f"S/final-s{s}" for s in seeds)
    with Store(tmp_path / "home-True", read_only=True) as store:
        updated = store.rows("SELECT epochs_done, device, threads FROM jobs WHERE kind = 'final'")
    assert updated == [(3, "cpu", 1)] * 3  # each job's own UPDATE, from the one statement of the batch
