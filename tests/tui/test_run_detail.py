"""The event log of a running job: it keeps following new events however many are stored, and its kind
column never runs into the message."""

from __future__ import annotations

from textual.widgets import RichLog

from hierconsole.contract.events import Checkpoint, EventKind
from hierconsole.study.db.storage import Store
from hierconsole.study.read import job_events
from hierconsole.tui.messages import JobEvents
from hierconsole.tui.screens.run_detail import LOG_LINES, RunDetailScreen
from tests.stores.fixed import LIVE, T0, _apply
from tests.tui.conftest import SIZE, make_app, settle

JOB = f"{LIVE}/final-s2024"


def checkpoints(first: int, last: int) -> list[dict]:
    return [
        {"kind": "checkpoint", "epoch": e, "sha256": f"ck-{e}", "ts": T0 + 3000 + e} for e in range(first, last + 1)
    ]


def log_lines(app) -> list[str]:
    return [strip.text for strip in app.screen.query_one(RichLog).lines]


async def test_the_log_follows_new_events_past_its_length(fixed_copy):
    with Store(fixed_copy) as store:
        _apply(store, JOB, LIVE, "final", 2024, checkpoints(100, 100 + LOG_LINES))
        assert len(job_events(store, JOB)) == LOG_LINES  # more are stored than the log keeps
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            app.push_screen(RunDetailScreen(JOB))
            await settle(pilot, app)
            assert log_lines(app)[-1].rstrip().endswith(f"checkpoint after epoch {100 + LOG_LINES}")
            for epoch in (1000, 1001):
                _apply(store, JOB, LIVE, "final", 2024, checkpoints(epoch, epoch))
                app.post_message(JobEvents(JOB, LIVE, [Checkpoint(epoch=epoch, sha256="x")]))
                await settle(pilot, app)
                lines = log_lines(app)
                assert lines[-1].rstrip().endswith(f"checkpoint after epoch {epoch}")
                assert len(lines) == LOG_LINES and sum(f"epoch {epoch}" in line for line in lines) == 1


async def test_the_kind_column_is_wider_than_every_kind(fixed_copy):
    with Store(fixed_copy) as store:
        # "checkpoint", the longest kind, is the one that ran into its message.
        assert max(len(kind) for kind in EventKind) == len(EventKind.CHECKPOINT)
        _apply(store, JOB, LIVE, "final", 2024, checkpoints(3, 3))
        app = make_app(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app)
            app.push_screen(RunDetailScreen(JOB))
            await settle(pilot, app)
            lines = log_lines(app)
            assert any(" checkpoint checkpoint after epoch 3" in line for line in lines)
            for line in lines:
                time, kind, body = line.split(maxsplit=2)
                assert kind in set(EventKind), line
                assert time.endswith("s") and body.strip()
