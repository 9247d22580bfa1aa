"""Real processes over a real home: the CLI as a user runs it, and the tiny dataset registered."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hierconsole.datasets import FeatureSet
from hierconsole.engine.trainer import PAUSE_ENV, PAUSED_MARKER
from hierconsole.study.db.storage import Store
from tests.stores.real import registered_home

# The tiny study (tests/tiny.py's values) as CLI flags.
TINY_RUN = [
    "run", "demo", "--dataset", "tiny",
    "--set", "training.hidden=32", "--set", "training.out_dim=8", "--set", "training.batch_size=32",
    "--set", "training.lr=1e-3", "--set", "evaluation.n_query=40", "--set", "compute.device='cpu'",
    # The demo preset leaves the HIER-style cell out for speed; the kill and fault tests keep it in.
    "--set", 'evaluation.baselines=["frozen","pca","hier"]',
]  # fmt: skip


def cli_argv(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hierconsole", "--home", str(home), *args]


def cli(home: Path, *args: str, timeout: float = 180, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(home, *args), capture_output=True, text=True, timeout=timeout, **kw)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error a failed command printed: exit status 2, one `error:` line, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    text = " ".join(done.stderr.split())
    assert text.startswith("error: ") and done.stderr.count("error:") == 1, done.stderr
    return text


def console_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error the console said as it closed: exit status 2, one `error:` line, no traceback. The console
    paints its first frame before it opens the store, so the terminal's output of that frame (Textual
    writes it to stderr) comes before the line."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.stderr.count("error:") == 1, done.stderr
    return " ".join(done.stderr[done.stderr.index("error: ") :].split())


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` by its relative path and content hash (for "nothing changed")."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def wait_for(predicate: Callable[[], bool], *, timeout: float = 60, what: str = "condition") -> None:
    """Poll until `predicate` holds; a hang guard, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def paused_at(*epochs: int) -> dict[str, str]:
    """The environment of a run whose workers pause before each of `epochs` (the trainer's pause hook):
    a short run held mid-training for as long as a test needs, where a run of thousands of epochs was a
    window that a fast machine could finish and a slow one could not reach."""
    return {**os.environ, PAUSE_ENV: ",".join(map(str, epochs))}


def wait_paused(home: Path, job: str = "final-s42", epoch: int | None = None, timeout: float = 300) -> Path:
    """Wait until `job`'s worker pauses (at `epoch`, if given); returns the job's folder."""

    def marker() -> Path | None:
        found = next(iter(home.glob(f"studies/*/jobs/{job}/{PAUSED_MARKER}")), None)
        if found is None or (epoch is not None and found.read_text().strip() != str(epoch)):
            return None
        return found

    wait_for(lambda: marker() is not None, timeout=timeout, what=f"{job} to pause at epoch {epoch or 'N'}")
    path = marker()
    assert path is not None
    return path.parent


def unpause(folder: Path) -> None:
    """Let a paused worker go on (to its next pause or the end)."""
    (folder / PAUSED_MARKER).unlink()


@pytest.fixture
def tiny_home(tmp_path: Path, tiny_fs: FeatureSet) -> Path:
    home = registered_home(tmp_path / "home", tiny_fs)
    return home


def final_metrics(home: Path) -> list[tuple]:
    """A study's registered test metrics, keyed without the study id (which differs between homes)."""
    with Store(home, read_only=True) as store:
        return store.rows(
            "SELECT seed, arm, perturbation, level, metric, value FROM metrics WHERE NOT posthoc "
            "ORDER BY ALL"
        )


def final_models(home: Path) -> list[tuple]:
    """Each final run's weights hash by (seed, arm): equal across homes iff training was bit-identical."""
    with Store(home, read_only=True) as store:
        return store.rows("SELECT seed, arm, final_sha256 FROM runs WHERE kind = 'final' ORDER BY ALL")
