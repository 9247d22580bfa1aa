"""The CLI prints what the console shows: both read the store through `hierconsole.study.read`."""

from __future__ import annotations

from dataclasses import replace

from hierconsole.cli import main
from hierconsole.study import read
from hierconsole.study.db.catalog import register_dataset
from hierconsole.study.db.storage import Store
from tests.stores.fixed import COMPLETE, LIVE


def _run(home, capsys, *argv: str) -> tuple[int, str]:
    code = main(["--home", str(home), *argv])
    out, err = capsys.readouterr()
    return code, out + err


def test_runs_shows_the_console_job_rows(fixed_copy, capsys):
    # Read-only, as `runs` reads it: nobody orchestrates this store, so its running job is orphaned.
    with Store(fixed_copy, read_only=True) as store:
        jobs = read.job_rows(store)
    assert any(job.orphaned for job in jobs)
    code, out = _run(fixed_copy, capsys, "--wide", "runs")
    assert code == 0
    lines = out.splitlines()
    for job in jobs:
        # A job's error may follow the table as "<job> error: ..." (a spill line): the row is the other one.
        (line,) = [line for line in lines if f" {job.job_id} " in f" {line} " and " error: " not in line]
        # The same progress as the console's runs view: epochs for training, units scored for scoring.
        assert f" {job.done}/{job.total} " in line and f" {job.shown_state} " in line
        assert job.cells_text in line
    # In 80 columns: a table per study, each job by its short id (which names its kind and seed), the
    # same figures.
    code, out = _run(fixed_copy, capsys, "runs")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80
    tables = out.split("runs of ")[1:]
    assert [t.split(maxsplit=1)[0] for t in tables] == [COMPLETE, LIVE]
    for job in jobs:
        table = tables[[COMPLETE, LIVE].index(job.study_id)]
        (line,) = [
            line for line in table.splitlines() if line.startswith(f"{job.short_id} ") and " error: " not in line
        ]
        assert f" {job.done}/{job.total} " in line and f" {job.shown_state} " in line
        assert not job.cells_text or job.cells_text.split()[0] in line  # the cells may wrap, whole each
    evaluation = next(j for j in jobs if j.job_id == f"{COMPLETE}/evaluate")
    assert (evaluation.done, evaluation.total) == (36, 36)


def test_studies_shows_the_console_study_rows(fixed_copy, capsys):
    with Store(fixed_copy) as store:
        studies = read.list_studies(store)
    code, out = _run(fixed_copy, capsys, "studies")
    assert code == 0 and [s.study_id for s in studies] == [COMPLETE, LIVE]
    for s in studies:
        (line,) = [line for line in out.splitlines() if s.study_id in line]
        assert f"{s.jobs_finished}/{s.jobs}" in line and s.phase in line


def test_a_dataset_in_use_is_not_deleted_and_an_unused_one_is(fixed_copy, capsys, tiny_fs):
    code, out = _run(fixed_copy, capsys, "datasets", "delete", "tiny", "--yes")
    assert code == 2
    assert f"cannot delete dataset 'tiny': 2 studies use it ({COMPLETE}, {LIVE})" in " ".join(out.split())
    with Store(fixed_copy) as store:
        assert [d.dataset_id for d in read.list_datasets(store)] == ["tiny"]
        spare = register_dataset(store, replace(tiny_fs, name="spare"))
    assert spare.artifact_dir.is_dir()
    code, out = _run(fixed_copy, capsys, "datasets", "delete", "spare", "--yes")
    assert code == 0 and "deleted dataset spare" in out
    assert not spare.artifact_dir.exists()
    code, out = _run(fixed_copy, capsys, "datasets")
    assert code == 0 and "spare" not in out and "tiny" in out
