"""A study spread over two Ray nodes, and one of them lost mid-run.

The head and a second node are separate `ray start` processes on this machine, one CPU each, each with
its own temporary and scratch folders (tests/reliability/ray_nodes.py): the jobs' inputs reach the second
node and their checkpoints come home through Ray alone. Killing the second node (its raylet and every
process below it) crashes the jobs it ran; they are resumable, and `resume` ends with exported metrics
equal, value for value, to the same study on local workers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from hierconsole.contract import layout
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, wait_for
from tests.stores.real import registered_home

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # two Ray nodes and worker processes; Ray tests one at a time

pytest.importorskip(
    "ray", reason="Ray is not installed (pip install 'hierconsole[ray]'); the two-node tests need it"
)

from tests.reliability.ray_nodes import TwoNodes, two_nodes  # noqa: E402 - needs ray's `ray` command

STUDY = ("--epochs", "150", "--seeds", "42,2024", "--parallel", "2")
"""150 epochs (a few seconds of training a job): at 20, a job could end before the other node's worker had
started under a loaded suite, so the two never ran at once and the test waited out its 300 s."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[TwoNodes]:
    with two_nodes() as c:
        yield c


def exported_metrics(home: Path, out: Path) -> pl.DataFrame:
    """`export metrics` of the home's one study, without the study id (which differs between homes, and
    leads each run id)."""
    done = cli(home, "export", "metrics", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    frame = pl.read_csv(out)
    frame = frame.drop("study_id").with_columns(pl.col("run_id").str.splitn("/", 2).struct.field("field_1").alias("run_id"))
    return frame.sort(frame.columns)


def test_a_lost_node_crashes_its_jobs_and_resume_ends_as_local_workers_do(cluster, tmp_path, tiny_fs):
    reference = registered_home(tmp_path / "reference", tiny_fs)
    assert cli(reference, *TINY_RUN, *STUDY, timeout=600).returncode == 0

    home = registered_home(tmp_path / "home", tiny_fs)
    ray = ("--executor", "ray", "--ray-address", cluster.address)
    run = subprocess.Popen(cli_argv(home, *TINY_RUN, *STUDY, *ray), env=cluster.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert cluster.second is not None and cluster.head is not None
    try:
        # Both nodes work at once, and a job of the second has a checkpoint home: lose that node now.
        def spread() -> bool:
            if run.poll() is not None:  # ended before the moment this test needs: say how, at once
                raise AssertionError(f"the run ended first ({run.returncode}):\n{run.communicate()}")
            on_second = cluster.workers_on(cluster.second)
            return bool(on_second) and bool(cluster.workers_on(cluster.head)) and any(
                home.glob("studies/*/jobs/*/checkpoints/ckpt-*.pt"))
        try:
            wait_for(spread, timeout=300, what="a job on each node, and a checkpoint home")
        except AssertionError as exc:  # what the cluster looked like when the wait gave up
            seen = (cluster.workers_on(cluster.head), cluster.workers_on(cluster.second),
                    sorted(p.name for p in home.glob("studies/*/jobs/*/checkpoints/ckpt-*.pt")))  # fmt: skip
            raise AssertionError(f"{exc}; workers on head, on second, checkpoints home: {seen}") from None
        lost_pids = cluster.workers_on(cluster.second)
        cluster.second.kill()
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 1, out + err
    assert "Traceback" not in err, err
    infos = {p.parent.name: json.loads(p.read_text()) for p in home.glob(f"studies/*/jobs/*/{layout.EXECUTOR}")}
    with Store(home, read_only=True) as store:
        crashed = store.rows("SELECT job_id, error FROM jobs WHERE state = 'crashed'")
        states = {s for (s,) in store.rows("SELECT state FROM jobs")}
    assert crashed and states <= {"crashed", "finished", "queued", "cancelled"}, (states, crashed)
    assert all("Ray worker" in error for _, error in crashed), crashed
    # The crashed ones are the jobs that ran on the lost node (their worker was one of its processes).
    lost = {name for name, info in infos.items() if info.get("worker_pid") in lost_pids}
    assert lost and lost <= {job_id.split("/")[-1] for job_id, _ in crashed}, (lost, crashed)

    resumed = subprocess.run(cli_argv(home, "resume", *ray), env=cluster.env, capture_output=True, text=True,
                             timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "FAIL" not in resumed.stdout and "phase: complete" in " ".join(resumed.stdout.split())
    ours = exported_metrics(home, tmp_path / "ours.csv")
    theirs = exported_metrics(reference, tmp_path / "theirs.csv")
    assert ours.height > 0 and ours.equals(theirs)
