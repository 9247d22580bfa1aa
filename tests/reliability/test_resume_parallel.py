"""`resume` without --parallel runs as many jobs at once as the resumed studies' presets asked for, as `run`
did: a killed three-worker study used to come back one job at a time."""

from __future__ import annotations

import json
import os

import pytest

from hierconsole.engine.trainer import FAULT_ENV
from tests.reliability.conftest import TINY_RUN, cli

pytestmark = pytest.mark.slow  # worker processes

# Two seeds, each crashing in its third epoch; resumed, each trains long enough (~3 s on this class of
# machine) that two jobs launched in one tick are certain to overlap.
ARGS = [*TINY_RUN, "--epochs", "120", "--seeds", "42,2024", "--set", "compute.max_parallel_jobs=2"]


def _last_attempt(events_file) -> tuple[float, float]:
    """(start, done) timestamps of a job's last attempt, as its worker wrote them."""
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    start = [e["ts"] for e in events if e["kind"] == "start"][-1]
    done = [e["ts"] for e in events if e["kind"] == "done"][-1]
    return start, done


def test_resume_runs_the_jobs_at_once_as_the_preset_asked(tiny_home):
    crashed = cli(tiny_home, *ARGS, env={**os.environ, FAULT_ENV: "3:1"})
    assert crashed.returncode == 1 and "crashed" in crashed.stdout, crashed.stdout + crashed.stderr

    resumed = cli(tiny_home, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    (first, second) = [_last_attempt(f) for f in sorted(tiny_home.glob("studies/*/jobs/final-s*/events.jsonl"))]
    # Run one at a time, the later job would start only after the earlier one was done.
    assert max(first[0], second[0]) < min(first[1], second[1]), (first, second)
