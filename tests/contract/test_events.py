"""The event schema: every kind round-trips, keys are stable, and a bad line is reported and skipped."""

from __future__ import annotations

import json
import math
from dataclasses import fields

import pytest

from hierconsole.contract import events as ev
from hierconsole.engine.worker import EventLog

LEVEL_METRICS = {"leaf": {"mAP": 0.5, "R@1": 0.75, "valid_queries": 40.0}, "middle": {"mAP": 0.25}}
SCORED = {
    "run_id": "s/final-s42/E_R",
    "seed": 42,
    "arm": "E_R",
    "perturbation": 2024,
    "aggregation": "micro",
    "posthoc": False,
    "metrics": LEVEL_METRICS,
}
"""What a test-metrics event and a reconciliation share: the run, the perturbation and the metrics."""

EXAMPLES: list[ev.Event] = [
    ev.Start(pid=123, device="cpu", threads=1, visible_devices=None, ts=10.0),
    ev.Init(
        cell="H_S",
        arm="H_S",
        geometry="poincare",
        loss="supcon",
        tau=0.2,
        trainable_params=205_600,
        init_sha256="ab" * 32,
        ts=11.0,
    ),
    ev.Resume(epoch=3, notes=("skipped ckpt-000004.pt: truncated",), ts=12.0),
    ev.Epoch(
        cell="E_R", epoch=3, epochs=100, train_loss=0.125, updates=138, batch_sha256="cd" * 32, seconds=0.5, ts=13.0
    ),
    ev.Validation(cell="E_S", epoch=10, aggregation="micro", metrics=LEVEL_METRICS, score=0.375, ts=14.0),
    ev.Checkpoint(epoch=3, sha256="ef" * 32, ts=15.0),
    ev.Final(
        cell="H_R",
        final_sha256="01" * 32,
        updates=4600,
        reload_max_diff=0.0,
        best_epoch=None,
        best_score=None,
        ts=16.0,
    ),
    ev.Norms(run_id="s/final-s42/H_R", max_norm=0.36, radius=0.7071, bound=0.3622, ts=17.0),
    ev.BaselineFit(
        run_id="s/evaluate/pca",
        arm="pca",
        fitted_sha256="23" * 32,
        n_fitted=5994,
        test_overlap=0,
        dim_in=768,
        dim_out=32,
        ts=17.5,
    ),
    ev.TestMetrics(**SCORED, ts=18.0),
    ev.Reconcile(**SCORED, ts=19.0),
    ev.Done(ts=20.0),
    ev.Failed(error="Traceback ...\nValueError: boom", ts=21.0),
    ev.Cancelled(message="stopped in epoch 4", ts=22.0),
]


def test_every_kind_has_an_example():
    assert {type(e) for e in EXAMPLES} == set(ev.EVENT_TYPES.values())


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: str(e.KIND))
def test_every_kind_round_trips_through_a_line_and_the_store_payload(event, tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(ev.to_line(event))
    read = ev.read_events(path)
    assert read.events == [event] and not read.problems
    assert read.offset == path.stat().st_size and read.lines == 1
    record = json.loads(ev.to_line(event))
    assert record["v"] == ev.SCHEMA_VERSION and record["kind"] == event.KIND and record["key"] == event.key
    assert ev.from_payload(str(event.KIND), json.loads(ev.payload(event)), ts=event.ts) == event


def test_idempotency_keys_are_those_of_the_stored_rows():
    # Replaying a file written by an earlier version must rewrite, not add: the keys must not drift.
    keys = [e.key for e in EXAMPLES]
    assert keys == [
        "start:123",
        "init:H_S",
        "resume:3",
        "epoch:E_R:3",
        "val:E_S:10",
        "checkpoint:3",
        "final:H_R",
        "norms:s/final-s42/H_R",
        "baseline:s/evaluate/pca",
        "metrics:s/final-s42/E_R:2024:micro",
        "reconcile:s/final-s42/E_R:2024:micro",
        "done",
        "failed",
        "cancelled",
    ]


def test_a_diverged_loss_is_kept_in_the_line_and_null_in_the_payload(tmp_path):
    event = ev.Epoch(cell="E_R", epoch=1, epochs=2, train_loss=math.nan, updates=8, batch_sha256="x", ts=1.0)
    path = tmp_path / "events.jsonl"
    path.write_text(ev.to_line(event))
    (back,) = ev.read_events(path).events
    assert isinstance(back, ev.Epoch) and math.isnan(back.train_loss)
    assert json.loads(ev.payload(event))["train_loss"] is None  # the store's JSON column is standard JSON


def test_lines_written_before_the_schema_was_versioned_still_read(tmp_path):
    # The first release wrote no "v", put the key and the model's path in every line, and -1 for "no
    # validation-best epoch".
    old = {
        "ts": 5.0,
        "kind": "final",
        "key": "final:E_R",
        "cell": "E_R",
        "final_sha256": "aa",
        "updates": 40,
        "reload_max_diff": 0.0,
        "best_epoch": -1,
        "best_score": None,
        "path": "/old/home/studies/s/jobs/final-s42/final-E_R.pt",
    }
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (event,) = ev.read_events(path).events
    assert event == ev.Final(
        cell="E_R", final_sha256="aa", updates=40, reload_max_diff=0.0, best_epoch=None, best_score=None, ts=5.0
    )


def test_bad_lines_are_reported_with_file_and_line_and_skipped(tmp_path):
    good = ev.to_line(ev.Start(pid=1, device="cpu", threads=1, ts=1.0))
    epoch = json.loads(ev.to_line(EXAMPLES[3]))
    lines = [
        good,
        "this is not JSON\n",
        json.dumps({"kind": "teleport", "ts": 1.0}) + "\n",
        json.dumps({k: v for k, v in epoch.items() if k != "updates"}) + "\n",
        json.dumps({**epoch, "epoch": "three"}) + "\n",
        json.dumps({"v": ev.SCHEMA_VERSION + 1, "kind": "done", "ts": 1.0}) + "\n",
        "[1, 2]\n",
        ev.to_line(ev.Done(ts=2.0)),
        '{"kind": "epoch", "cell": "E_',  # a worker killed mid-write: no newline yet
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(lines))
    read = ev.read_events(path)
    assert [type(e) for e in read.events] == [ev.Start, ev.Done]
    assert [p.line for p in read.problems] == [2, 3, 4, 5, 6, 7]
    reasons = [str(p) for p in read.problems]
    assert all(r.startswith(f"{path}:") and r.endswith("the line was skipped") for r in reasons)
    assert "not JSON" in reasons[0]
    assert "unknown event kind 'teleport'" in reasons[1]
    assert "lacks field 'updates'" in reasons[2]
    assert "field 'epoch': expected an integer, got 'three'" in reasons[3]
    assert "newer than this hierconsole reads" in reasons[4]
    assert "expected a JSON object" in reasons[5]
    # The torn last line is left for a later read, which starts where this one stopped.
    assert read.offset == len("".join(lines[:-1]).encode()) and read.lines == len(lines) - 1
    with path.open("a") as fh:
        fh.write('R", "epoch": 9}\n')
    later = ev.read_events(path, read.offset, read.lines)
    assert later.events == [] and [p.line for p in later.problems] == [len(lines)]


def test_a_worker_starts_after_a_torn_line_on_a_line_of_its_own(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(ev.to_line(ev.Done(ts=1.0)) + '{"kind": "epo')  # the predecessor died mid-write
    EventLog(path)(ev.Start(pid=7, device="cpu", threads=1, ts=3.0))
    read = ev.read_events(path)
    assert [type(e) for e in read.events] == [ev.Done, ev.Start]  # our event is intact
    assert [p.line for p in read.problems] == [2]  # the fragment, reported once as a line of its own


def test_the_payload_holds_the_fields_and_nothing_else():
    for event in EXAMPLES:
        names = {f.name for f in fields(event)} - {"ts"}
        assert set(json.loads(ev.payload(event))) == names
