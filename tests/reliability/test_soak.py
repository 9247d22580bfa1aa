"""A light run of the soak benchmark (benchmarks/soak.py, 200 jobs there): many tiny studies through one
orchestrator on one open store finish every job, and the orchestrator's open descriptors do not grow
from wave to wave (no worker log, pipe or snapshot left open per job). Memory and the store's growth per
event are printed by the benchmark, not asserted: they are measurements, not pass/fail facts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # some twenty worker processes

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"
WAVE = re.compile(r"^\s*(?P<jobs>\d+) jobs\s+(?P<events>\d+) events\s+RSS\s+\S+ MiB\s+fds\s+(?P<fds>\d+)", re.M)


def test_many_short_jobs_leave_the_orchestrators_descriptors_flat():
    done = subprocess.run(
        [sys.executable, str(SOAK), "--jobs", "16", "--wave", "2"],
        capture_output=True, text=True, timeout=600, cwd=SOAK.parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    waves = [(int(m["jobs"]), int(m["events"]), int(m["fds"])) for m in WAVE.finditer(done.stdout)]
    assert len(waves) >= 3, done.stdout
    jobs, events, fds = zip(*waves, strict=True)
    assert list(jobs) == sorted(set(jobs)) and list(events) == sorted(set(events))  # each wave adds both
    # The first wave opened what the process keeps (the store, its WAL, the live snapshot's folder).
    assert max(fds[1:]) <= fds[0], done.stdout
