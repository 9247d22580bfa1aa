"""The console's main flow with real worker processes, driven headlessly by the Pilot.

Empty store -> demo in one key -> live progress while keys still work -> effects and audits fill in ->
export a table. Then cancel, resume and the quit question against the real orchestrator.
"""

from __future__ import annotations

import time

import polars as pl
import pytest

from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.db.storage import Store
from hierconsole.study.read import per_seed, table_frame
from hierconsole.study.read.audits import CHECKS
from hierconsole.tui.messages import JobEvents, OrchestratorStopped, QueueChanged, StudyLaunched
from hierconsole.tui.screens.dialogs import QuitDialog
from hierconsole.tui.screens.export import ExportScreen
from tests.stores.fixed import LIVE
from tests.tui.conftest import SIZE, make_app, settle, shown, tiny_demo

pytestmark = pytest.mark.slow  # worker processes

TIMEOUT = 120.0


async def wait_for(pilot, condition, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


async def test_empty_store_to_exported_effects(tmp_path, tiny_fs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    messages = []
    demo = tiny_demo(tiny_fs, epochs=8, seeds=(42,))
    with Store(tmp_path / "home") as store:
        app = make_app(store, orchestrate=True, tick_interval=0.2, demo=demo, on_quit="ask")
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await settle(pilot, app)
            assert app.current_mode == "datasets"
            assert "This store is empty" in shown(app)

            await pilot.press("d", "y")  # the demo asks first
            await wait_for(pilot, lambda: any(isinstance(m, StudyLaunched) for m in messages), "the launch")
            study_id = next(m.study_id for m in messages if isinstance(m, StudyLaunched))
            assert app.current_mode == "runs" and app.study_id == study_id

            # Progress arrives from the worker process while the UI keeps answering keys.
            await wait_for(
                pilot,
                lambda: any(isinstance(m, JobEvents) and "epoch" in m.kinds for m in messages),
                "a training epoch",
            )
            await pilot.press("3")
            assert app.current_mode == "effects"
            await settle(pilot, app)
            assert "sealed until every final run has finished" in shown(app)
            await pilot.press("2")
            assert app.current_mode == "runs"
            answered = len(messages)
            # The study went on after the keys were answered (its evaluation is always still to come).
            await wait_for(
                pilot,
                lambda: any(isinstance(m, JobEvents) for m in messages[answered:]),
                "events after the keys",
            )
            progress = [
                j
                for m in messages
                if isinstance(m, QueueChanged)
                for j in m.jobs
                if j.kind == "final" and j.done
            ]
            assert progress and all(j.losses for j in progress)

            await wait_for(pilot, lambda: getattr(app.current_study(), "phase", None) == "complete", "the study")
            await pilot.press("3")
            await settle(pilot, app)
            table = per_seed(store, study_id)
            effect = simple_effects(table, ["hier_mAP"])["hier_mAP"]["geom_S"]
            text = shown(app)
            # One seed: its value, the mean with no SD, the seed count (the digits of styles.EFFECT_DIGITS).
            assert f"{effect.mean:+.6f} (n=1)" in text and f"{effect.positive}/1" in text
            assert f"{effect.per_unit[42]:+.6f}" in text

            await pilot.press("4")
            await settle(pilot, app)
            assert f"all {len(CHECKS)} checks pass" in shown(app)

            await pilot.press("6")
            await settle(pilot, app)
            await pilot.press("w")
            await wait_for(
                pilot, lambda: any(isinstance(m, ExportScreen.Written) for m in messages), "the export"
            )
            written = next(m for m in messages if isinstance(m, ExportScreen.Written))
            assert written.path == tmp_path / f"{study_id}-effects.csv"
            expected = table_frame(store, "effects", study_id)
            assert pl.read_csv(written.path, schema=expected.schema).equals(expected, null_equal=True)
            assert str(written.path) in "".join(shown(app).split())  # a long path wraps anywhere

            await pilot.press("q")  # nothing runs any more: no question, the loop stops and the app exits
            await wait_for(pilot, lambda: any(isinstance(m, OrchestratorStopped) for m in messages), "quit")
        assert app.loop_done.wait(10)


async def test_cancel_resume_and_the_quit_question(fixed_copy):
    """Queue controls through the real orchestrator, kept from launching anything (capacity 0)."""
    crashed, orphan = f"{LIVE}/final-s3407", f"{LIVE}/final-s2024"
    messages = []
    with Store(fixed_copy) as store:
        app = make_app(store, orchestrate=True, tick_interval=0.05, max_parallel=0, on_quit="ask")
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:

            def state(job_id: str) -> str | None:
                return next((j.state for j in app.jobs if j.job_id == job_id), None)

            # Start-up finds the orphaned "running" job's worker gone.
            await wait_for(pilot, lambda: state(orphan) == "crashed", "recovery")
            table = app.screen.query_one("#jobs")
            table.move_cursor(row=[j.job_id for j in app.jobs if j.study_id == LIVE].index(crashed))
            await pilot.press("r")
            await wait_for(pilot, lambda: state(crashed) == "queued", "resume")
            await pilot.press("c")
            await wait_for(pilot, lambda: state(crashed) == "cancelled", "cancel")
            await pilot.press("r")
            await wait_for(pilot, lambda: state(crashed) == "queued", "resume again")

            await pilot.press("q")
            assert isinstance(app.screen, QuitDialog)
            await pilot.press("escape")  # stay
            assert not isinstance(app.screen, QuitDialog) and not app.loop_done.is_set()
            await pilot.press("q", "c")  # cancel the jobs, then quit
            await wait_for(pilot, lambda: any(isinstance(m, OrchestratorStopped) for m in messages), "quit")
        assert app.loop_done.wait(10)
        assert store.one("SELECT state FROM jobs WHERE job_id = ?", [crashed])[0] == "cancelled"
        assert {m.cancelled_jobs for m in messages if isinstance(m, OrchestratorStopped)} == {True}


def test_a_job_resumed_in_a_console_with_no_limit_runs_as_its_studys_preset_asked(fixed_copy):
    """A console opened after a run (no --parallel) ran the jobs it resumed one at a time, whatever the
    study's preset asked; resuming now raises its limit to the preset's (here 2), as launching does."""
    from hierconsole.study.run.orchestrator import Orchestrator
    from hierconsole.tui.screens.runs import resume_job

    crashed = f"{LIVE}/final-s3407"
    with Store(fixed_copy) as store:
        limited = Orchestrator(store, max_parallel=1)  # --parallel 1 given to the console: it stays
        assert "queued" in resume_job(crashed, LIVE, follow_preset=False)(limited)
        assert limited.max_parallel == 1
        limited.cancel(crashed)
        free = Orchestrator(store)
        assert free.max_parallel is None
        assert "queued" in resume_job(crashed, LIVE, follow_preset=True)(free)
        assert free.max_parallel == 2
        free.close_executors()
