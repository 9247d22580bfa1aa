"""The replication view's read layer: each stage's status from its record, the time left, and the paper
tables' readiness with rows from the same function the `tables` stage writes its files with."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest

from hierconsole.study.db.replications import all_stage_rows, put_stage
from hierconsole.study.db.storage import Store
from hierconsole.study.read import list_datasets
from hierconsole.study.read.paper_tables import replication_tables
from hierconsole.study.read.replications import (
    OMITTED,
    PARTIAL,
    READY,
    WAITING,
    made,
    replications,
    stage_rows,
)
from hierconsole.study.replication.graph import Stage
from hierconsole.study.replication.stages import paper_stages
from hierconsole.vocabulary import StageStatus
from tests.stores.fixed import COMPLETE

HASH = "ab" * 32
BOTH = paper_stages(frozenset({"cub", "nabirds"}))


def both(replication_id: str, records: object) -> list[Stage]:
    return BOTH


def no_estimate(stages: object) -> None:
    return None


def paper_scale(replication_id: str) -> bool:
    return True
T0 = 1_800_000_000.0


def rec(state: str, at: float, seconds: float | None = None, outputs: dict | None = None) -> dict:
    return {"state": state, "input_key": "k", "outputs": outputs or {}, "seconds": seconds, "updated_at": at}


def record(store: Store, rid: str, stage: str, state: str, outputs: dict, seconds: float | None, at: str) -> None:
    """A stage record through the real API, its time set (the store stamps the current time)."""
    put_stage(store, rid, stage, state, "k", outputs, seconds)
    store.execute(
        "UPDATE replication_stages SET updated_at = CAST(? AS TIMESTAMP) WHERE replication_id = ? AND stage = ?",
        [at, rid, stage],
    )


def test_each_stage_reads_its_status_time_and_what_it_made():
    graph = [Stage("a"), Stage("b", ("a",)), Stage("c", ("b",)), Stage("d", ("a",)), Stage("e", ("d",))]
    records = {
        "a": rec("done", T0 + 100, 12.5, {"features": HASH}),  # ran again after b finished
        "b": rec("done", T0 + 50, 3.0, {"x": "study-1"}),
        "c": rec("done", T0 + 60, 4.0),
        "d": rec("running", T0 + 110),
        "e": rec("failed", T0 + 20),
    }
    rows = {r.name: r for r in stage_rows(graph, records, now=T0 + 140)}
    assert rows["a"].status == StageStatus.DONE and rows["a"].seconds == 12.5 and rows["a"].made == ("features",)
    assert rows["b"].status == StageStatus.STALE  # its input ran again since it finished
    assert rows["c"].status == StageStatus.STALE  # downstream of a stale stage
    assert rows["d"].status == StageStatus.RUNNING and rows["d"].seconds == pytest.approx(30.0)
    assert rows["e"].status == StageStatus.FAILED and rows["e"].seconds is None
    assert stage_rows([Stage("z")], {}, now=T0)[0].status == StageStatus.PENDING


def test_what_a_stage_made_names_ids_and_files():
    assert made({"factorial": "rid.cub-factorial-1", "features": HASH}) == ("rid.cub-factorial-1", "features")
    assert made({f"t{i}.csv": HASH for i in range(5)}) == ("5 files",)


def test_updated_at_reads_as_unix_seconds(tmp_path: Path):
    with Store(tmp_path) as store:
        put_stage(store, "r", "a", "running", "k", {}, None)
        at = all_stage_rows(store)["r"]["a"]["updated_at"]
    assert abs(at - time.time()) < 300  # hours off would be the session's time zone read as UTC


def test_tables_fill_in_as_their_stages_finish(fixed_copy: Path):
    rid = "vitb14-paper-seed0"
    with Store(fixed_copy) as store:
        (dataset,) = [d.dataset_id for d in list_datasets(store)]
        record(store, rid, "extract-cub", "done", {"features": HASH}, 20.0, "2027-01-01 10:00:00")
        record(store, rid, "taxonomy-cub", "done", {"taxonomy": HASH}, 2.0, "2027-01-01 10:00:02")
        record(store, rid, "import-cub", "done", {"dataset": dataset}, 3.0, "2027-01-01 10:00:05")
        record(store, rid, "factorial-cub", "done", {"factorial": COMPLETE}, 25.0, "2027-01-01 10:00:30")
        record(store, rid, "families-cub", "running", {}, None, "2027-01-01 10:00:31")
        (view,) = replications(store, both, no_estimate, paper_scale, time.time())
        tables = {t.table_id: t for t in view.tables}
        assert tables["main-1"].status == PARTIAL and tables["main-1"].waits_on == ("factorial-nabirds",)
        assert tables["S3"].status == READY and tables["S3"].rows == 3 * 4 * 4  # seeds x arms x metrics
        assert tables["S2"].status == WAITING and tables["S2"].waits_on == ("factorial-nabirds",)
        assert tables["S1"].status == OMITTED  # the fixed study tuned no temperature
        assert tables["sec-5.5-cub"].waits_on == ("families-cub",)
        # The rows are the `tables` stage's, computed by the same function from the same outputs.
        outputs = {s.name: s.outputs for s in view.stages if s.status == StageStatus.DONE}
        written = {t.table_id: t.frame for t in replication_tables(store, outputs, comparable=True)[0]}
        assert set(view.measured) == set(written)
        for table_id, frame in written.items():
            assert view.measured[table_id].frame.equals(frame), table_id
        assert view.measured["main-1"].frame["comparable"].any()  # the paper's scale: compared
        assert view.done == 4 and view.total == len(BOTH)
        # A refresh with nothing finished since keeps the tables it read (the same objects).
        (again,) = replications(store, both, no_estimate, paper_scale, time.time(), [view])
        assert again.measured is view.measured
        record(store, rid, "families-cub", "failed", {}, None, "2027-01-01 10:01:00")
        (failed,) = replications(store, both, no_estimate, paper_scale, time.time(), [again])
        assert {s.name: s.status for s in failed.stages}["families-cub"] == StageStatus.FAILED
    assert isinstance(view.measured["main-1"].frame, pl.DataFrame)
