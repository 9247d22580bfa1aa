"""CSV files with any line ends import alike: LF, CR LF, and the bare CR of old Mac files (the csv module
reads all three; the bounded reader once split on LF only, so a CR-only file was 'new-line character seen
in unquoted field')."""

from __future__ import annotations

from pathlib import Path

import pytest

from hierconsole.cli import main
from hierconsole.study.db.storage import Store
from tests.generic_files import write_generic


@pytest.mark.parametrize("end", [b"\r\n", b"\r"])
def test_a_generic_import_reads_every_kind_of_line_end(tmp_path: Path, end: bytes, capsys) -> None:
    files = write_generic(tmp_path / "files")
    for path in (files.labels, files.taxonomy):
        path.write_bytes(path.read_bytes().replace(b"\n", end))
    unix = write_generic(tmp_path / "unix")
    assert main(["--home", str(tmp_path / "home"), *files.import_args("ends")]) == 0, capsys.readouterr()
    assert main(["--home", str(tmp_path / "home"), *unix.import_args("unix")]) == 0, capsys.readouterr()
    with Store(tmp_path / "home", read_only=True) as store:
        shas = dict(store.rows("SELECT dataset_id, sha256 FROM datasets"))
        counts = store.rows("SELECT dataset_id, n_samples, list(n_groups ORDER BY position) FROM datasets JOIN dataset_levels USING (dataset_id) GROUP BY ALL ORDER BY ALL")
    assert counts[0][1:] == counts[1][1:] and counts[0][1] > 0
    assert shas["ends"] == shas["unix"]  # the same features, labels and taxonomy, read alike
