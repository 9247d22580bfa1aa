"""The runs view as a researcher watches it: losses under their own arm, live values never cut short,
destructive and launching keys that act on what is highlighted and ask first, naming it."""

from __future__ import annotations

import dataclasses

from textual.widgets import DataTable

from hierconsole.present import numbers as fmt
from hierconsole.study.db.storage import Store
from hierconsole.study.read import job_rows, list_studies
from hierconsole.tui.messages import QueueChanged, StudyLaunched
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.vocabulary import ARMS, JobState, Phase
from tests.stores.fixed import COMPLETE, LIVE
from tests.tui.conftest import SIZE, make_app, screen_text, settle, shown


async def test_each_loss_sits_under_its_arm(open_store):
    job = next(j for j in job_rows(open_store, LIVE) if j.job_id == f"{LIVE}/final-s2024")
    app = make_app(open_store, study=LIVE)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(pilot, app)
        lines = screen_text(app).splitlines()
        header = next(line for line in lines if " E_R " in line and " H_S" in line)
        row = next(line for line in lines if "final-s2024" in line)
        for arm in ARMS:
            start = header.index(f" {arm}") + 1
            # Values are right-aligned in a column as wide as "0.000": read the column under the header.
            assert row[start : start + 5].strip() == f"{job.losses[arm]:.3f}", arm


async def test_live_values_grow_their_columns_instead_of_being_cut(open_store):
    app = make_app(open_store, study=LIVE)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, app)
        # What a later tick of a long study reports: three-digit epochs, a long state, an ETA in hours.
        jobs = [
            dataclasses.replace(j, done=110, total=400, state=JobState.CANCELLED, epoch_seconds=80.0)
            if j.job_id == f"{LIVE}/final-s42"
            else dataclasses.replace(j, done=39, total=400, epoch_seconds=33.0)
            if j.job_id == f"{LIVE}/final-s2024"
            else j
            for j in app.jobs
        ]
        studies = [
            dataclasses.replace(s, phase=Phase.EVALUATING) if s.study_id == LIVE else s for s in app.studies
        ]
        app.post_message(QueueChanged(studies, jobs, app.failed_audits))
        await settle(pilot, app)
        text = shown(app)
        assert "110/400" in text and "cancelled" in text
        eta = next(j for j in jobs if j.job_id == f"{LIVE}/final-s2024").eta_seconds
        assert "39/400" in text and f" {fmt.duration(eta)} " in text  # 361 epochs x 33 s: hours
        assert "evaluating" in text
        table = app.screen.query_one("#jobs", DataTable)
        assert table.columns["state"].content_width >= len("cancelled")


async def test_delete_acts_on_the_highlighted_study_and_names_it(fixed_copy):
    with Store(fixed_copy) as store:
        app = make_app(store, study=LIVE)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            studies = app.screen.query_one("#studies", DataTable)
            studies.focus()
            studies.move_cursor(row=0)  # the complete study, while the live one is current
            await settle(pilot, app)
            await pilot.press("x")
            await settle(pilot, app)
            assert isinstance(app.screen, ConfirmDialog)
            assert f"Delete study {COMPLETE}" in shown(app)
            await pilot.press("y")
            await settle(pilot, app)
            await settle(pilot, app)
            assert [s.study_id for s in app.studies] == [LIVE]
            assert any(n.title == "delete" and COMPLETE in n.message for n in app._notifications)
        assert [s.study_id for s in list_studies(store)] == [LIVE]


async def test_delete_refuses_before_asking_and_says_why(open_store):
    app = make_app(open_store, study=LIVE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("x")
        await settle(pilot, app)
        assert not isinstance(app.screen, ConfirmDialog)
        refusal = next(n for n in app._notifications if "cancel" in n.message)
        assert refusal.title == "delete" and LIVE in refusal.message and "running" in refusal.message


async def test_the_demo_key_asks_before_launching(fixed_copy):
    messages = []
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
            await pilot.press("1")
            await settle(pilot, app)
            await pilot.press("d")
            await settle(pilot, app)
            assert isinstance(app.screen, ConfirmDialog)
            text = shown(app)
            assert "Launch" in text and app.demo.preset.name in text and "tiny" in text
            await pilot.press("n")
            await settle(pilot, app)
            assert not any(isinstance(m, StudyLaunched) for m in messages)
            assert len(list_studies(store)) == 2
            await pilot.press("d")
            await settle(pilot, app)
            await pilot.press("y")
            await settle(pilot, app)
            await settle(pilot, app)
        assert len(list_studies(store)) == 3


async def test_views_are_built_in_the_background_after_the_first_frame(open_store):
    """What makes the first switch to a view as quick as a later one: it is already built."""
    app = make_app(open_store, prebuild_views=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        for _ in range(100):
            if all(mode in app._screen_stacks for mode in ("datasets", "effects", "audits", "export")):
                break
            await pilot.pause(0.05)
        assert app.current_mode == "runs"
        built = {mode: stack[0] for mode, stack in app._screen_stacks.items()}
        assert set(built) >= {"datasets", "runs", "effects", "audits", "redistribution", "export"}
        await pilot.press("3")
        await settle(pilot, app)
        assert app.screen is built["effects"] and "metric hier_mAP" in shown(app)
