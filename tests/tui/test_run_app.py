"""`run_app` (what `hierconsole` without a subcommand calls): a busy store is reported, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hierconsole.study.db.storage import Store


@pytest.mark.slow  # the console in a subprocess
def test_a_busy_store_is_reported_and_exits_2(tmp_path):
    with Store(tmp_path):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from hierconsole.tui import run_app; sys.exit(run_app(sys.argv[1]))",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "TERM": "dumb"},
        )
    assert done.returncode == 2
    assert f"PID {os.getpid()}" in done.stderr and "--home" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
