"""The replication's stage graph: keys from input hashes, done/stale/run decisions, --redo closure, and
the store-backed loop (a finished stage never redone, an interrupted one restarted)."""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext

import pytest

from hierconsole.study.db.storage import Store
from hierconsole.study.replication.graph import (
    Decision,
    Stage,
    StageRecord,
    StageState,
    dependents,
    ordered,
    plan,
    stage_key,
)
from hierconsole.study.replication.runner import load_records, run_replication
from hierconsole.study.replication.stages import paper_stages

A = Stage("a", (), ("x",))
B = Stage("b", ("a",), ("y",))
C = Stage("c", ("b",), ())
GRAPH = [C, A, B]  # given out of order on purpose
EXT = {"x": "hx", "y": "hy"}


def _reference_key(name, inputs, upstream):
    payload = {"stage": name, "inputs": inputs, "upstream": upstream}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def test_key_is_sha256_of_the_inputs_and_upstream_outputs():
    assert stage_key(B, EXT, {"a": {"f": "1"}}) == _reference_key("b", {"y": "hy"}, {"a": {"f": "1"}})
    assert stage_key(B, EXT, {"a": {"f": "1"}}) != stage_key(B, EXT, {"a": {"f": "2"}})
    assert stage_key(B, {**EXT, "x": "changed"}, {"a": {"f": "1"}}) == stage_key(B, EXT, {"a": {"f": "1"}})
    with pytest.raises(KeyError, match="'y'"):
        stage_key(B, {"x": "hx"}, {"a": {}})


def test_order_and_cycles():
    assert [s.name for s in ordered(GRAPH)] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="cycle"):
        ordered([Stage("p", ("q",)), Stage("q", ("p",))])
    with pytest.raises(ValueError, match="'missing'"):
        ordered([Stage("p", ("missing",))])
    assert dependents(GRAPH, ["b"]) == {"b", "c"}
    assert dependents(GRAPH, ["a"]) == {"a", "b", "c"}


def _done_records():
    ka = stage_key(A, EXT, {})
    kb = stage_key(B, EXT, {"a": {"o": "1"}})
    kc = stage_key(C, EXT, {"b": {"o": "2"}})
    return {
        "a": StageRecord(StageState.DONE, ka, {"o": "1"}, 1.0),
        "b": StageRecord(StageState.DONE, kb, {"o": "2"}, 2.0),
        "c": StageRecord(StageState.DONE, kc, {"o": "3"}, 4.0),
    }


def test_plan_decisions():
    empty = plan(GRAPH, EXT, {})
    assert [(p.stage.name, p.decision) for p in empty] == [
        ("a", Decision.RUN),
        ("b", Decision.WAITING),
        ("c", Decision.WAITING),
    ]
    records = _done_records()
    assert {p.decision for p in plan(GRAPH, EXT, records)} == {Decision.DONE}
    # An external input of b changed: b is stale (named, kept), c is judged on b's stored outputs.
    changed = plan(GRAPH, {**EXT, "y": "new"}, records)
    assert [p.decision for p in changed] == [Decision.DONE, Decision.STALE, Decision.DONE]
    # An interrupted stage (still marked running) or a failed one runs again.
    running = {**records, "b": StageRecord(StageState.RUNNING, records["b"].input_key, {}, None)}
    assert [p.decision for p in plan(GRAPH, EXT, running)] == [Decision.DONE, Decision.RUN, Decision.WAITING]
    # --redo b forces b and c.
    assert [p.decision for p in plan(GRAPH, EXT, records, {"b", "c"})] == [
        Decision.DONE,
        Decision.RUN,
        Decision.WAITING,
    ]


def test_paper_stages_for_either_dataset():
    both = {s.name for s in paper_stages(frozenset({"cub", "nabirds"}))}
    assert {"extract-cub", "extract-nabirds", "taxonomy-cub", "factorial-cub", "factorial-nabirds", "tables", "report"} <= both
    cub_only = ordered(paper_stages(frozenset({"cub"})))
    assert "extract-nabirds" not in {s.name for s in cub_only}
    assert cub_only[-1].name == "report"
    with pytest.raises(ValueError):
        paper_stages(frozenset())


def _actions(folder, calls):
    """Each stage writes a file from its inputs and returns that file's hash, like a real stage."""

    def make(name):
        def act(upstream):
            calls.append(name)
            text = json.dumps(
                {"stage": name, "upstream": upstream, "src": (folder / "src.txt").read_text()}, sort_keys=True
            )
            (folder / f"{name}.out").write_text(text)
            return {name: hashlib.sha256(text.encode()).hexdigest()}

        return act

    return {n: make(n) for n in ("a", "b", "c")}


def test_store_loop_resumes_skips_and_redoes(tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    (work / "src.txt").write_text("one")
    calls: list[str] = []
    with Store(home) as store:
        first = run_replication(lambda: nullcontext(store), "r1", GRAPH, EXT, _actions(work, calls))
        assert first.ran == ("a", "b", "c") and calls == ["a", "b", "c"]
        outputs = (work / "c.out").read_text()
        again = run_replication(lambda: nullcontext(store), "r1", GRAPH, EXT, _actions(work, calls))
        assert again.ran == () and calls == ["a", "b", "c"]  # a second run does no work

        # A stage interrupted mid-way: the next run starts it (and what follows) again, same result.
        def killed(upstream):
            raise KeyboardInterrupt

        store.execute("UPDATE replication_stages SET state = 'running' WHERE stage = 'b'")
        with pytest.raises(KeyboardInterrupt):
            run_replication(lambda: nullcontext(store), "r1", GRAPH, EXT, {**_actions(work, calls), "b": killed})
        assert load_records(store, "r1")["b"].state == StageState.FAILED
        # Its last finished run's time is kept: the estimate's measure of it while it runs again.
        assert load_records(store, "r1")["b"].seconds is not None
        calls.clear()
        resumed = run_replication(lambda: nullcontext(store), "r1", GRAPH, EXT, _actions(work, calls))
        assert resumed.ran == ("b",) and (work / "c.out").read_text() == outputs

        # A changed input is named, not re-run, until --redo names it; then its dependents follow.
        changed = {**EXT, "y": "changed"}
        kept = run_replication(lambda: nullcontext(store), "r1", GRAPH, changed, _actions(work, calls))
        assert kept.ran == () and kept.stale == ("b",)
        (work / "src.txt").write_text("two")
        redone = run_replication(lambda: nullcontext(store), "r1", GRAPH, changed, _actions(work, calls), redo=["b"])
        assert redone.ran == ("b", "c") and redone.stale == ()
        assert (work / "c.out").read_text() != outputs
        with pytest.raises(ValueError, match="'nope'"):
            run_replication(lambda: nullcontext(store), "r1", GRAPH, changed, {}, redo=["nope"])
        assert store.value("SELECT count(*) FROM replication_stages WHERE replication_id = 'r1'") == 3


def test_each_datasets_registered_aggregation_is_its_factorial_presets():
    from hierconsole.config.files import load_preset
    from hierconsole.study.analysis.paper_datasets import DATASETS, REGISTERED
    from hierconsole.study.replication.stages import STAGE_RUNS

    for dataset in DATASETS:
        (run,) = STAGE_RUNS[f"factorial-{dataset}"]
        assert load_preset(run.preset).evaluation.aggregation == REGISTERED[dataset], dataset


def test_a_replications_id_names_its_model_scale_and_seed_and_gives_back_the_scale():
    from hierconsole.study.replication.stages import replication_name, replication_scale

    assert replication_name("tiny-dinov2", "smoke", 3) == "tiny-dinov2-smoke-seed3"
    assert replication_scale(replication_name("tiny-dinov2", "smoke", 3)) == "smoke"
    assert replication_scale(replication_name("vitb14", "paper", 0)) == "paper"
    assert replication_scale("cub+nabirds") is None and replication_scale("a-huge-seed0") is None


def test_a_stage_that_did_no_work_keeps_its_measured_time(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "src.txt").write_text("one")
    with Store(tmp_path / "home") as store:
        run_replication(lambda: nullcontext(store), "r1", GRAPH, EXT, _actions(work, []))
        measured = {name: r.seconds for name, r in load_records(store, "r1").items()}
        assert all(s is not None for s in measured.values())
        # b is redone but finds its outputs made (timed says so); c did its work again.
        run_replication(
            lambda: nullcontext(store), "r1", GRAPH, EXT, _actions(work, []), redo=["b"], timed=lambda s: s != "b"
        )
        again = load_records(store, "r1")
        assert again["b"].seconds == measured["b"] and again["b"].state == StageState.DONE
        assert again["c"].seconds != measured["c"]  # measured anew (perf_counter never repeats)


def test_carried_datasets_and_the_derived_outputs_that_are_gone(tmp_path):
    from hierconsole.study.commands.replicate import carried_outputs, outputs_gone
    from hierconsole.study.replication.stages import STUDY_STAGES

    done = {s: StageRecord(StageState.DONE, "k", {"id": f"{s}-study"}, 1.0) for s in STUDY_STAGES["cub"]}
    assert carried_outputs(done, frozenset({"nabirds"})) == {s: {"id": f"{s}-study"} for s in STUDY_STAGES["cub"]}
    assert carried_outputs(done, frozenset({"cub"})) == {}  # given: planned, not carried
    partial = {**done, "rescore-cub": StageRecord(StageState.FAILED, "k", {}, None)}
    assert carried_outputs(partial, frozenset({"nabirds"})) == {}  # unfinished: not carried

    (tmp_path / "a.csv").write_text("a")
    digest = hashlib.sha256(b"a").hexdigest()
    tables = {"tables": StageRecord(StageState.DONE, "k", {"a.csv": digest}, 1.0)}
    assert outputs_gone(tables, tmp_path) == {}
    assert outputs_gone(tables, tmp_path / "elsewhere") == {"tables": "a.csv"}
    (tmp_path / "a.csv").write_text("edited")
    assert outputs_gone(tables, tmp_path) == {"tables": "a.csv"}
