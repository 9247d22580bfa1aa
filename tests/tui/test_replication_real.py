"""The Replication view over a store a real `hierconsole replicate --scale smoke` wrote (generated CUB-layout
folder, a tiny random-weight backbone, a generated checklist): every stage done with what it made, and each
table's rows the very values the `tables` stage wrote to its CSV files."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest

from hierconsole.study.db.storage import Store
from hierconsole.study.read.replications import READY, replications
from hierconsole.tui.screens.replication import ReplicationScreen, comparable, replication_graph, time_left
from hierconsole.vocabulary import StageStatus
from tests.homes import copy_home
from tests.replicated import GROUP, RID, Replicated
from tests.tui.conftest import SIZE, make_app, settle, shown

pytest.importorskip("transformers", reason="the 'extract' extra is not installed")
pytest.importorskip("matplotlib", reason="the 'plot' extra is not installed (the report stage needs it)")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(GROUP)]  # the session's replication


@pytest.fixture(scope="module")
def home(replicated_cub: Replicated, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's replication (the console opens its store for writing)."""
    return copy_home(replicated_cub.home, tmp_path_factory.mktemp("replication-view") / "home")


def test_every_stage_and_table_of_a_real_replication(home: Path):
    with Store(home, read_only=True) as store:
        (view,) = replications(store, replication_graph, time_left, comparable, time.time())
    assert view.replication_id == RID and view.done == view.total == 9
    assert all(s.status == StageStatus.DONE and s.seconds is not None for s in view.stages)
    stages = {s.name: s for s in view.stages}
    assert stages["factorial-cub"].made[0].startswith(f"{RID}.cub-factorial-")
    assert stages["import-cub"].needs == ("extract-cub", "taxonomy-cub")
    tables = home / "replications" / RID / "tables"
    ready = [t.table_id for t in view.tables if t.status == READY]
    assert {"main-1", "sec-5.2", "S3", "S11", "sec-5.5-cub"} <= set(ready)
    for table_id in ready:
        written = pl.read_csv(tables / f"{table_id}.csv")
        shown_frame = view.measured[table_id].frame
        assert written.height == shown_frame.height, table_id
        assert written["row"].to_list() == shown_frame["row"].to_list(), table_id
        for column in ("measured", "published"):
            gap = (written[column].cast(pl.Float64) - shown_frame[column]).abs().max()
            assert gap is None or gap < 1e-12, (table_id, column)


async def test_the_console_shows_the_finished_replication(home: Path, monkeypatch):
    monkeypatch.setattr(ReplicationScreen, "REFRESH_SECONDS", 60.0)
    with Store(home) as store:
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("8")
            await settle(pilot, app)
            text = shown(app)
    assert RID in text and "9/9 stages done" in text and "left" not in text.split("9/9 stages done")[1][:40]
