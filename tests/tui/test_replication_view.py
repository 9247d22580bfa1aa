"""The console's Replication view (8): a replication's stages, progress and time left, and the paper tables
filling in, read from stage records made through the real `study.db.replications` API over the fixed
store's studies; refreshed while shown; the empty state; a fixed 80x24 snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from hierconsole.study.db.replications import all_stage_rows, put_stage
from hierconsole.study.db.storage import Store
from hierconsole.study.read import list_datasets
from hierconsole.study.read.replications import stage_rows
from hierconsole.study.replication.graph import Stage
from hierconsole.study.replication.stages import paper_stages
from hierconsole.tui.screens.replication import ReplicationScreen, comparable, replication_graph, time_left
from tests.stores.fixed import COMPLETE
from tests.tui.conftest import SIZE, make_app, screen_text, settle, shown

RID = "cub-vitb14-smoke-seed0"
HASH = "ab" * 32
T0 = 1_800_000_000.0


def rec(state: str, at: float, seconds: float | None = None) -> dict:
    return {"state": state, "input_key": "k", "outputs": {}, "seconds": seconds, "updated_at": at}


def record(store: Store, stage: str, state: str, outputs: dict, seconds: float | None, at: str) -> None:
    """A stage record through the real API, its time fixed (the store stamps the current time)."""
    put_stage(store, RID, stage, state, "k", outputs, seconds)
    store.execute(
        "UPDATE replication_stages SET updated_at = CAST(? AS TIMESTAMP) WHERE replication_id = ? AND stage = ?",
        [at, RID, stage],
    )


def half_done(store: Store) -> float:
    """A CUB replication with its factorial done over the fixed complete study and its families running;
    returns a clock 75 s after the families started."""
    (dataset,) = [d.dataset_id for d in list_datasets(store)]
    record(store, "extract-cub", "done", {"features": HASH}, 20.0, "2026-01-01 10:00:00")
    record(store, "taxonomy-cub", "done", {"taxonomy": HASH}, 2.0, "2026-01-01 10:00:02")
    record(store, "import-cub", "done", {"dataset": dataset}, 3.0, "2026-01-01 10:00:05")
    record(store, "factorial-cub", "done", {"factorial": COMPLETE}, 25.0, "2026-01-01 10:00:30")
    record(store, "families-cub", "running", {}, None, "2026-01-01 10:00:31")
    return all_stage_rows(store)[RID]["families-cub"]["updated_at"] + 75


def fixed_clock(monkeypatch: pytest.MonkeyPatch, now: float) -> None:
    monkeypatch.setattr(ReplicationScreen, "clock", staticmethod(lambda: now))


def test_time_left_counts_unrecorded_stages_at_the_recorded_pace():
    graph = [Stage("a"), Stage("b", ("a",)), Stage("c", ("b",)), Stage("d", ("c",))]
    records = {"a": rec("done", T0, 10.0), "b": rec("done", T0 + 1, 30.0), "c": rec("running", T0 + 5)}
    stages = stage_rows(graph, records, now=T0 + 12)
    # pace (10 + 30) / 2 = 20 s for c and d; c has run 7 s of its 20
    assert time_left(stages) == pytest.approx(20 - 7 + 20)
    assert time_left(stage_rows(graph, {}, now=T0)) is None
    assert time_left(stage_rows(graph, {k: rec("done", T0, 1.0) for k in "abcd"}, now=T0)) == 0.0


def test_the_graph_comes_from_the_records_and_the_scale_from_the_id():
    both = {"extract-cub": {}, "extract-nabirds": {}}
    names = [s.name for s in replication_graph("vitb14-smoke-seed0", both)]
    assert names == [s.name for s in paper_stages(frozenset({"cub", "nabirds"}))]
    cub = [s.name for s in replication_graph("tiny-dinov2-smoke-seed0", {"extract-cub": {}})]
    assert "extract-cub" in cub and "extract-nabirds" not in cub
    assert not comparable("vitb14-smoke-seed0") and comparable("tiny-dinov2-paper-seed0")
    assert not comparable("paper") and not comparable("vitb14-paper-7")


async def test_without_a_replication_the_view_says_how_to_start_one(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("8")
        await settle(pilot, app)
        text = shown(app)
    assert "No replication in this home yet" in text and "hierconsole replicate --cub" in text


async def test_the_view_shows_stages_progress_and_a_tables_rows(fixed_copy: Path, monkeypatch):
    with Store(fixed_copy) as store:
        fixed_clock(monkeypatch, half_done(store))
        app = make_app(store)
        async with app.run_test(size=(120, 60)) as pilot:
            await settle(pilot, app)
            await pilot.press("8")
            await settle(pilot, app)
            text = shown(app)
            # 50 s over 4 stages: 12.5 s for each of the 5 left, less the running one's (already past it)
            assert "4/9 stages done · 50s recorded · about 50s left" in text
            assert "families-cub cub import-cub running 1m15s" in text
            assert "factorial-cub cub import-cub done 25s demo-complete" in text
            assert "S11 waiting rescore-cub" in text and "S2 omitted needs factorial-nabirds" in text
            # The first table with rows is selected, with the paper's value beside each measured one.
            assert "sec-S1: Dataset and taxonomy counts" in text
            assert "cub images value 420 — — 11788 -11368 no" in text  # counts as counts; smoke: not compared
            await pilot.press("t")
            await settle(pilot, app)
            assert "main-1: Controlled Geometry x Loss factorial" in shown(app) and "cub E_R leaf_mAP" in shown(app)
            await pilot.press("T", "T")
            await settle(pilot, app)
            assert "sec-5.5-nabirds-factorial: " in shown(app) and "waits on" not in shown(app).split("sec-5.5-nabirds-factorial: ")[1][:5]


async def test_the_view_follows_a_stage_record_that_changes_underneath(fixed_copy: Path, monkeypatch):
    monkeypatch.setattr(ReplicationScreen, "REFRESH_SECONDS", 0.1)
    with Store(fixed_copy) as store:
        fixed_clock(monkeypatch, half_done(store))
        app = make_app(store)
        async with app.run_test(size=(120, 60)) as pilot:
            await settle(pilot, app)
            await pilot.press("8")
            await settle(pilot, app)
            assert "families-cub cub import-cub running" in shown(app)
            # Written by another writer of the store (as `replicate` records a stage): no key pressed.
            put_stage(store, RID, "families-cub", "done", "k", {"outer-arms": COMPLETE}, 40.0)
            for _ in range(100):  # a loaded machine reads slower; the first look usually has it
                await pilot.pause(0.1)
                if "5/9 stages done" in shown(app):
                    break
            await settle(pilot, app)
            text = shown(app)
    assert "5/9 stages done" in text and "families-cub cub import-cub done 40s" in text
    # Its one stage done, the table no longer waits (the fabricated output names no family: said so).
    assert "sec-5.5-cub omitted no family 'demo-complete'" in text


@pytest.mark.snapshot
def test_the_view_at_80x24(fixed_copy: Path, monkeypatch, snap_compare):
    with Store(fixed_copy) as store:
        fixed_clock(monkeypatch, half_done(store))

        async def run_before(pilot) -> None:
            await settle(pilot, pilot.app)
            await pilot.press("8")
            await settle(pilot, pilot.app)

        assert snap_compare(make_app(store), terminal_size=SIZE, run_before=run_before)


async def test_every_number_of_a_tables_rows_is_whole_at_80_columns(fixed_copy: Path, monkeypatch):
    with Store(fixed_copy) as store:
        fixed_clock(monkeypatch, half_done(store))
        app = make_app(store)
        async with app.run_test(size=(80, 200)) as pilot:
            await settle(pilot, app)
            await pilot.press("8")
            await settle(pilot, app)
            await pilot.press("t")  # main-1
            await settle(pilot, app)
            text = screen_text(app)
            screen = app.screen
            assert isinstance(screen, ReplicationScreen)
            frame = screen.views[0].measured["main-1"].frame
    for measured, published in frame.select("measured", "published").iter_rows():
        assert f"{measured:.4f}" in text and f"{published:.4f}" in text
    assert "…" not in text
