"""Warm workers (study.executors.standby): every launch of a run is forked by one standby and ends exactly as
one launched cold, a forked worker is the orchestrator's child (its exit status is the orchestrator's to
read), no standby outlives its orchestrator's need of it, and a standby that is gone or was started in
another environment is never handed a job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hierconsole.contract import layout
from hierconsole.contract.liveness import pid_alive
from hierconsole.contract.standby import READY, STANDBY_FLAG
from hierconsole.engine.worker import EXIT_UNUSED
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.records import get_study
from hierconsole.study.db.storage import Store
from hierconsole.study.executors.standby import Standbys
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import WORKER_MODULE, Orchestrator
from tests.reliability.processes import standbys_of
from tests.tiny import tiny_preset

pytestmark = pytest.mark.slow  # worker processes

RESULT_SQL = """
SELECT r.seed, r.arm, r.final_sha256, m.perturbation, m.level, m.metric, m.value
FROM runs r JOIN metrics m USING (run_id) WHERE r.study_id = ? ORDER BY ALL
"""


def _run(home: Path, tiny_fs, *, warm: bool) -> tuple[list[tuple], int]:
    with Store(home) as store:
        register_dataset(store, tiny_fs)
        # Two seeds on two slots, then the evaluate job: three launches.
        study_id = create_study(store, tiny_preset(seeds=(42, 2024)), "tiny")
        orch = Orchestrator(store, max_parallel=2, warm=warm)
        orch.run_until_idle()
        assert get_study(store, study_id).phase == "complete"
        handed = 0 if orch.local.standbys is None else orch.local.standbys.handed
        return store.rows(RESULT_SQL, [study_id]), handed


def test_warm_launches_end_exactly_as_cold_ones_and_leave_no_standby(tmp_path, tiny_fs):
    warm, handed = _run(tmp_path / "warm", tiny_fs, warm=True)
    cold, _ = _run(tmp_path / "cold", tiny_fs, warm=False)
    assert handed == 3  # each launch waited for the standby's imports rather than importing them again
    assert warm == cold and len(warm) > 0
    assert standbys_of(tmp_path / "warm") == []
    # A warm worker's output goes to its own job's log, as a cold worker's does.
    logs = sorted(p.parent.name for p in (tmp_path / "warm").rglob("worker.log"))
    assert logs == ["evaluate", "final-s2024", "final-s42"]


def test_a_forked_worker_is_the_orchestrators_child_and_its_exit_status_is_read(tmp_path):
    """The standby's worker for a spec that cannot be read fails as a cold one does (exit 1, the error in its
    folder); one killed reads as killed. Both are reaped by this process, whose child the fork became."""
    pool = Standbys(sys.executable, WORKER_MODULE, tmp_path)
    env = dict(os.environ)
    try:
        pool.prepare(env)
        deadline = time.monotonic() + 120
        while pool.importing(env):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        failing = tmp_path / "broken" / "spec.json"
        failing.parent.mkdir()
        failing.write_text("{not json")
        worker = pool.take(env, failing)
        assert worker is not None
        assert worker.wait(timeout=120) == 1  # its own status, reaped here: only a parent can
        assert "cannot read the job spec" in (failing.parent / layout.ERROR).read_text()
        stalled = tmp_path / "stalled" / "spec.json"
        stalled.parent.mkdir()
        stalled.write_text("{}")
        second = pool.take({**env}, stalled)
        assert second is not None and pool.handed == 2  # one standby forks every launch
        os.kill(second.pid, signal.SIGKILL)
        assert second.wait(timeout=60) in (1, -signal.SIGKILL)  # killed, unless it failed on its spec first
        with pytest.raises(ChildProcessError):
            os.waitpid(second.pid, os.WNOHANG)  # reaped: no zombie is left
    finally:
        pool.close()


def test_a_standby_with_no_job_ends_on_its_own_when_its_input_closes(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE, "--home", str(tmp_path), STANDBY_FLAG],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.close()  # what the kernel does for it when the orchestrator dies
    assert proc.wait(timeout=60) == EXIT_UNUSED
    assert proc.stdout.read() == READY + b"\n"
    assert proc.stderr.read() == b""
    assert list(tmp_path.iterdir()) == []  # it wrote nothing


def test_a_dead_standby_or_one_from_another_environment_is_never_handed_a_job(tmp_path):
    spec = tmp_path / "job" / "spec.json"
    env = dict(os.environ)
    pool = Standbys(sys.executable, WORKER_MODULE, tmp_path)

    pool.prepare(env)
    pid = pool.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pool.pid is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert pool.take(env, spec) is None and pool.handed == 0

    pool.prepare(env)
    first = pool.pid
    assert pool.take({**env, "HIERCONSOLE_SOMETHING": "1"}, spec) is None
    assert first is not None and not pid_alive(first, None)  # ended, not left behind
    assert pool.pid is None and pool.handed == 0

    pool.prepare(env)
    waiting = pool.pid
    pool.close()
    assert waiting is not None and not pid_alive(waiting, None)
    assert not spec.parent.exists()
