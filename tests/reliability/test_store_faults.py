"""A store that cannot be written (a full disk, an I/O error) stops the run at once; resume finishes it.

The fault is real: the orchestrator's file-size limit (RLIMIT_FSIZE) is lowered while it runs, so its
next commit fails in DuckDB exactly as on a full disk ("Could not write file ... .wal"), while the
workers started before keep their own limit. Python ignores SIGXFSZ, so the write fails with EFBIG.
"""

from __future__ import annotations

import resource
import subprocess

import pytest

from hierconsole.study import read
from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli, cli_argv, final_metrics, final_models, wait_for
from tests.stores.real import registered_home

pytestmark = pytest.mark.slow  # worker processes and the CLI in a subprocess

EPOCHS = ["--epochs", "30", "--seeds", "42"]


def _epochs_logged(home) -> int:
    logs = list(home.glob("studies/*/jobs/final-s42/events.jsonl"))
    return logs[0].read_text().count('"kind":"epoch"') if logs else 0


def test_a_failed_commit_stops_the_run_and_resume_finishes_it_bit_identical(tmp_path, tiny_home, tiny_fs):
    home = tiny_home
    run = subprocess.Popen(cli_argv(home, *TINY_RUN, *EPOCHS), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _epochs_logged(home) >= 8, what="the first epochs")  # 4 cells x 2 epochs
        # No file of the orchestrator may grow past 4 KiB: the store's WAL and main file are beyond it
        # (as on a full disk), a small note still fits.
        resource.prlimit(run.pid, resource.RLIMIT_FSIZE, (4096, 4096))
        out, err = run.communicate(timeout=90)  # it used to wait here forever
    finally:
        run.kill()
    assert run.returncode == 2, (out, err)
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "could not save changes" in error and "File too large" in error and "hierconsole resume" in error
    assert "Traceback" not in err
    assert "stopped 1 running job (final-s42; their checkpoints are kept)" in " ".join(out.split())

    # Nothing holds the store now, and the worker was stopped: the job is shown stopped (not orphaned, as
    # it once was: nothing runs), with the reason its orchestrator gave.
    runs = cli(home, "runs")
    assert runs.returncode == 0, runs.stderr
    line = next(line for line in runs.stdout.splitlines() if "final-s42" in line)
    assert "stopped" in line and "orphaned" not in line
    with Store(home, read_only=True) as store:
        (job,) = [j for j in read.job_rows(store) if j.kind == "final"]
    assert job.stopped and job.shown_state == "stopped"
    assert job.error is not None and job.error.startswith("stopped: ") and "File too large" in job.error

    resumed = cli(home, "resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with_fault = (final_metrics(home), final_models(home))

    clean_home = registered_home(tmp_path / "clean", tiny_fs)
    clean = cli(clean_home, *TINY_RUN, *EPOCHS)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert with_fault == (final_metrics(clean_home), final_models(clean_home))
    assert len(with_fault[1]) == 5 and with_fault[0]  # the 4 cells and the demo's HIER-style baseline
