"""A smoke replication, run once per test session (tests/conftest.py's `replicate_data` and `replicated_cub`):
generated CUB- and NABirds-layout folders (images made here, a tiny random-weight backbone, a generated
checklist), and a home in which `hierconsole replicate --cub ... --scale smoke` ran every CUB stage.

Modules that read it (tests/cli/test_replicate_run.py, tests/tui/test_replication_real.py) are one xdist group
(`xdist_group(GROUP)`), so they share the one replication. Copy the home (`tests.homes.copy_home`) before
changing it; the data folders are restored by the tests that change them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.stores.layouts import make_cub, make_nabirds, tiny_model

GROUP = "replicated"
RID = "tiny-dinov2-smoke-seed0"
"""The id of the smoke replication of the tiny backbone (its folder under `replications/`)."""


def make_data(base: Path) -> Path:
    """CUB- and NABirds-layout folders, the checklist and the tiny backbone's config, under `base`."""
    make_cub(base)
    make_nabirds(base, supergroups=3, parents=6, leaves=2, per_class=6)
    tiny_model(base)
    return base


def replicate_argv(home: Path, base: Path, *datasets: str, extra: tuple[str, ...] = ()) -> list[str]:
    argv = [sys.executable, "-m", "hierconsole", "--home", str(home), "replicate"]
    if "cub" in datasets:
        argv += ["--cub", str(base / "CUB_200_2011"), "--checklist", str(base / "checklist.csv")]
    if "nabirds" in datasets:
        argv += ["--nabirds", str(base / "nabirds")]
    return [*argv, "--weights", "none", "--model", str(base / "tiny-dinov2.json"), "--scale", "smoke", *extra]


def replicate(
    home: Path, base: Path, *datasets: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    argv = replicate_argv(home, base, *datasets, extra=extra)
    return subprocess.run(argv, capture_output=True, text=True, timeout=1200, env=env)


_POPEN_LOG_HOOK = """
import json, os, sys
_log = os.environ.get("POPEN_LOG")
if _log:
    def _hook(event, args):
        if event == "subprocess.Popen":
            with open(_log, "a", encoding="utf-8") as sink:
                sink.write(json.dumps([os.getpid(), [str(a) for a in args[1]]]) + "\\n")
    sys.addaudithook(_hook)
"""
"""A sitecustomize that records every child process any Python process of the run starts (the interpreter's
own `subprocess.Popen` audit event), into the file $POPEN_LOG names."""


def recording_children(folder: Path) -> tuple[dict[str, str], Path]:
    """An environment whose Python processes log every child they start (`_POPEN_LOG_HOOK`), and the log."""
    hook = folder / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_POPEN_LOG_HOOK)
    log = folder / "popen.jsonl"
    env = {**os.environ, "POPEN_LOG": str(log), "PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])}
    return env, log


def child_commands(log: Path) -> list[str]:
    """The hierconsole commands the run started as child processes (a bare `--version` as itself)."""
    started = [json.loads(line)[1] for line in log.read_text().splitlines()]
    assert any("hierconsole.engine.worker" in argv for argv in started)  # the hook saw the studies' workers
    commands = [argv[argv.index("hierconsole") + 1 :] for argv in started if argv[1:3] == ["-m", "hierconsole"]]
    # `--home HOME COMMAND ...` (or a bare `--version`)
    return [c[2] if c[:1] == ["--home"] else " ".join(c) for c in commands]


@dataclass(frozen=True)
class Replicated:
    home: Path
    children: list[str]
    """The hierconsole commands the replication started as child processes (`child_commands`)."""


def replicate_cub(folder: Path, data: Path) -> Replicated:
    """A new home (`folder`/home) in which a CUB smoke replication of `data` ran to the end."""
    env, log = recording_children(folder)
    home = folder / "home"
    done = replicate(home, data, "cub", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return Replicated(home, child_commands(log))
