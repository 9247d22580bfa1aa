"""Studies launched from a notebook: created here, driven by a headless `hierconsole resume` in the background.

The study is created in the notebook's process through the front door (`study.commands`, as `hierconsole
run` creates it, so a bad preset, override, device or dataset is the same one line, a `HierconsoleError` in
the cell, before anything runs), then the store is closed again and the CLI's own
orchestrator loop drives it in a child process: `hierconsole --home HOME resume STUDY`, the command that
drives queued work headless, with its Ctrl-C (cancel, resumable) as `RunHandle.cancel`. That child holds
the store while it runs, so the notebook's reads meanwhile go through the live snapshot it publishes, like
a second shell's, and a kernel restart leaves the run going (`hierconsole runs` shows it).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hierconsole.errors import HierconsoleError, StoreBusyError
from hierconsole.study.commands import LaunchRequest
from hierconsole.study.commands import launch as launch_request
from hierconsole.study.db.storage import Store
from hierconsole.vocabulary import Executor

if TYPE_CHECKING:
    import polars as pl

    from hierconsole.notebook.home import Home

T = TypeVar("T")

SHORTCUTS = ("epochs", "seeds", "device")
"""Keyword overrides named as `hierconsole run`'s flags (--epochs, --seeds, --device)."""

BUSY_WAIT_SECONDS = 30.0
"""How long a handle's read waits for the child's first live snapshot (it publishes one a couple of
seconds after it opens the store) before it gives up with the store's own "busy" sentence."""


def preset_values(values: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The dotted preset options of `values` and of `section__option=` keywords; a keyword that is
    neither a shortcut nor `section__option` is refused, naming it."""
    dotted = dict(values or {})
    for key, value in overrides.items():
        if key in SHORTCUTS:
            continue
        if "__" not in key:
            raise HierconsoleError(
                f"run(): unknown keyword {key}={value!r}\n  fix: give a preset option as section__option= "
                f"(e.g. training__lr=1e-4) or values={{'training.lr': 1e-4}}; shortcuts: {', '.join(SHORTCUTS)}"
            )
        dotted[key.replace("__", ".")] = value
    return dotted


def launch(
    home: Home,
    preset_ref: str,
    *,
    dataset: str | None = None,
    parallel: int | None = None,
    gpus: Sequence[str] | None = None,
    values: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> RunHandle:
    """Validate, create the study, start its background driver; see `Home.run`."""
    from hierconsole.config.family import is_family_file

    if is_family_file(preset_ref):
        raise HierconsoleError(
            f"{preset_ref} is a family, and run() launches one study preset\n  fix: run the family with "
            f"`hierconsole --home {home.path} run {preset_ref}`, then read it here with home.family(NAME)"
        )
    # Checked by the front door as `hierconsole run` checks its flags, so a bad value is the same line.
    # Local workers: the background `resume` that drives the study reads the executor options itself.
    request = LaunchRequest.parse(
        preset_ref,
        dataset=dataset,
        epochs=overrides.get("epochs"),
        seeds=overrides.get("seeds"),
        device=overrides.get("device"),
        values=preset_values(values, overrides),
        parallel=parallel,
        gpus=gpus,
        executor=Executor.LOCAL,
    )
    with Store(home.path) as store:
        launched = launch_request(store, request)
    (study_id,) = launched.study_ids
    log = Path(tempfile.mkstemp(prefix=f"hierconsole-{study_id}-", suffix=".log")[1])
    argv = [sys.executable, "-m", "hierconsole", "--home", str(home.path), "resume", study_id]
    gpu_ids = request.workers.gpus
    argv += ["--parallel", str(launched.plan.parallel), *(["--gpus", ",".join(gpu_ids)] if gpu_ids else [])]
    with log.open("w") as out:
        # Its own session: a Ctrl-C meant for the notebook's terminal does not cancel the run.
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return RunHandle(home, study_id, process, log)


class RunHandle:
    """A study running in the background (`Home.run`).

    >>> job = home.run("demo", epochs=2)     # doctest: +SKIP
    >>> job.progress()                       # doctest: +SKIP
    >>> job.wait()                           # doctest: +SKIP
    0
    """

    def __init__(self, home: Home, study_id: str, process: subprocess.Popen[bytes], log: Path):
        self.home = home
        self.study_id = study_id
        """The study it runs: pass it to `home.effects(...)` and the other reads."""
        self.process = process
        self.log = log
        """The driver's output (the progress lines and summary `hierconsole run` prints)."""

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}"
        return f"RunHandle({self.study_id!r}, {state})"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        """None while it runs; then `hierconsole resume`'s status: 0 (complete, every audit passed), 1 (a
        job did not finish, e.g. cancelled, or an audit failed), 2 (an error, said in `output()`)."""
        return self.process.poll()

    def output(self) -> str:
        """What the driver printed so far."""
        return self.log.read_text(errors="replace")

    def _read(self, read: Callable[[], T]) -> T:
        """A read of the home, waiting out the moment between the driver taking the store and its first
        live snapshot."""
        deadline = time.monotonic() + BUSY_WAIT_SECONDS
        while True:
            try:
                return read()
            except StoreBusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def progress(self) -> pl.DataFrame:
        """The study's jobs now, one row per job (`Home.runs`): state, epochs done of total, ETA."""
        return self._read(lambda: self.home.runs(self.study_id))

    def phase(self) -> str:
        """The study's phase now: training, evaluating, complete, ..."""
        studies = self._read(self.home.studies)
        return str(studies.filter(study_id=self.study_id)["phase"].item())

    def wait(self, timeout: float | None = None) -> int:
        """Block until the run ends (at most `timeout` seconds: then `TimeoutError`); its exit status."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"study {self.study_id} still runs after {timeout} s; wait again, or cancel() it"
            ) from None

    def cancel(self, timeout: float | None = 120) -> int:
        """Cancel the run as Ctrl-C cancels `hierconsole run`: the jobs stop at their next checkpoint and
        stay resumable (`hierconsole resume STUDY`). Waits for the driver to leave; its exit status."""
        if self.running:
            self.process.send_signal(signal.SIGINT)
        return self.wait(timeout)
