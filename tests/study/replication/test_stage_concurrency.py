"""The replication loop with stages at once: a stage that does not open the store runs beside one that
does, two that open it never overlap, the loop opens the store only while none of them runs (records
written meanwhile are held, then written), a failure stops the rest and propagates, and a derived stage
(the tables) runs again when its key changes instead of being kept as stale."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from hierconsole.study.db.storage import Store
from hierconsole.study.replication.graph import Decision, Stage, StageState, plan, runnable
from hierconsole.study.replication.runner import load_records, run_replication

# extract (no store) and import -> study (the store's lane), then tables (derived) over both.
EXTRACT_A = Stage("extract-a", (), ("x",), store=False)
EXTRACT_B = Stage("extract-b", (), ("x",), store=False)
IMPORT_A = Stage("import-a", ("extract-a",), ())
STUDY_A = Stage("study-a", ("import-a",), ())
IMPORT_B = Stage("import-b", ("extract-b",), ())
TABLES = Stage("tables", ("study-a", "import-b"), ("t",), derived=True)
GRAPH = [EXTRACT_A, EXTRACT_B, IMPORT_A, STUDY_A, IMPORT_B, TABLES]
EXT = {"x": "hx", "t": "ht"}
WAIT = 60.0
"""Seconds an action waits for another to reach a point; only reached when the loop is wrong."""


class Probe:
    """What the actions and the store opener saw: which stages were active at once, and whether the loop
    opened the store while a store stage was active."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.guard = threading.Lock()
        self.active: set[str] = set()
        self.overlaps: set[frozenset[str]] = set()
        self.opened_while_busy: list[set[str]] = []
        self.order: list[str] = []

    @contextmanager
    def open_store(self):  # noqa: ANN201
        with self.guard:
            busy = {n for n in self.active if n.startswith(("import", "study", "tables"))}
            if busy:
                self.opened_while_busy.append(busy)
        yield self.store

    def action(self, name: str, before=None):  # noqa: ANN001, ANN201
        def act(upstream):  # noqa: ANN001, ANN202
            with self.guard:
                for other in self.active:
                    self.overlaps.add(frozenset({name, other}))
                self.active.add(name)
                self.order.append(name)
            try:
                if before is not None:
                    before()
                return {name: "|".join(sorted(f"{k}={v}" for u in upstream.values() for k, v in u.items())) or "-"}
            finally:
                with self.guard:
                    self.active.discard(name)

        return act


def test_an_extraction_runs_beside_the_store_stages_which_never_overlap(tmp_path):
    with Store(tmp_path / "home") as store:
        probe = Probe(store)
        import_a_running = threading.Event()
        extract_b_may_end = threading.Event()

        def extract_b() -> None:
            # Ends only once import-a has started: possible only if extract-b runs beside it.
            assert import_a_running.wait(WAIT), "import-a never started while extract-b ran"
            extract_b_may_end.set()

        def import_a() -> None:
            import_a_running.set()
            assert extract_b_may_end.wait(WAIT)

        actions = {s.name: probe.action(s.name) for s in GRAPH}
        actions["extract-b"] = probe.action("extract-b", extract_b)
        actions["import-a"] = probe.action("import-a", import_a)
        outcome = run_replication(probe.open_store, "r", GRAPH, EXT, actions, at_once=2)
        assert set(outcome.ran) == {s.name for s in GRAPH}
        assert frozenset({"extract-b", "import-a"}) in probe.overlaps
        store_stages = {"import-a", "study-a", "import-b", "tables"}
        assert not [pair for pair in probe.overlaps if pair <= store_stages], probe.overlaps
        assert probe.opened_while_busy == []
        # Every record reached the store, the held ones included.
        records = load_records(store, "r")
        assert {n: r.state for n, r in records.items()} == {s.name: StageState.DONE for s in GRAPH}
        assert all(r.seconds is not None for r in records.values())


def test_one_at_a_time_runs_in_dependency_order_with_the_store_lane_first(tmp_path):
    with Store(tmp_path / "home") as store:
        probe = Probe(store)
        run_replication(probe.open_store, "r", GRAPH, EXT, {s.name: probe.action(s.name) for s in GRAPH})
        assert probe.overlaps == set()
        # The store's lane goes first: CUB's studies do not wait for NABirds' extraction.
        assert probe.order == ["extract-a", "import-a", "study-a", "extract-b", "import-b", "tables"]
    ready = runnable(plan(GRAPH, EXT, {}))
    assert [p.stage.name for p in ready] == ["extract-a", "extract-b"]


def test_a_failed_stage_stops_the_others_and_its_error_propagates(tmp_path):
    with Store(tmp_path / "home") as store:
        probe = Probe(store)
        stop = threading.Event()
        b_started = threading.Event()

        def extract_a() -> None:
            assert b_started.wait(WAIT)
            raise RuntimeError("extract-a broke")

        def extract_b() -> None:
            b_started.set()
            assert stop.wait(WAIT), "on_failure was never called"
            raise KeyboardInterrupt  # what a stopped command's stage raises

        actions = {s.name: probe.action(s.name) for s in GRAPH}
        actions["extract-a"] = probe.action("extract-a", extract_a)
        actions["extract-b"] = probe.action("extract-b", extract_b)
        with pytest.raises(RuntimeError, match="extract-a broke"):
            run_replication(probe.open_store, "r", GRAPH, EXT, actions, at_once=2, on_failure=stop.set)
        records = load_records(store, "r")
        assert records["extract-a"].state == records["extract-b"].state == StageState.FAILED
        assert set(records) == {"extract-a", "extract-b"}  # nothing started after the failure


def test_a_derived_stage_runs_again_when_its_key_changes_and_a_costly_one_is_kept(tmp_path):
    with Store(tmp_path / "home") as store:
        probe = Probe(store)
        actions = {s.name: probe.action(s.name) for s in GRAPH}
        run_replication(probe.open_store, "r", GRAPH, EXT, actions)
        changed = {**EXT, "t": "new", "x": "new"}
        decisions = {p.stage.name: p.decision for p in plan(GRAPH, changed, load_records(store, "r"))}
        assert decisions["tables"] == Decision.RUN
        assert decisions["extract-a"] == decisions["extract-b"] == Decision.STALE
        again = run_replication(probe.open_store, "r", GRAPH, changed, actions)
        assert again.ran == ("tables",) and set(again.stale) == {"extract-a", "extract-b"}


def test_at_once_must_be_positive(tmp_path):
    with Store(tmp_path / "home") as store, pytest.raises(ValueError, match="at least 1"):
        run_replication(Probe(store).open_store, "r", GRAPH, EXT, {}, at_once=0)
