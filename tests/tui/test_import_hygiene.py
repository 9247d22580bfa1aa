"""Only `hierconsole.tui` imports Textual, and it never imports torch (checked in fresh interpreters)."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys

import pytest

import hierconsole
from hierconsole.cli import COMMAND_MODULES

pytestmark = pytest.mark.slow  # interpreters in subprocesses

HEADLESS = sorted(
    m.name
    for m in pkgutil.walk_packages(hierconsole.__path__, "hierconsole.")
    if not m.name.startswith("hierconsole.tui") and m.name != "hierconsole.__main__"
)


def _modules_after_import(modules: list[str]) -> set[str]:
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += "print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(out.stdout.split())


def test_the_headless_modules_are_found():
    assert {
        "hierconsole.study.db.storage",
        "hierconsole.study.read",
        "hierconsole.cli",
        "hierconsole.study.run.orchestrator",
    } <= set(HEADLESS)


def _textual(loaded: set[str]) -> bool:
    return any(m == "textual" or m.startswith("textual.") for m in loaded)


def test_no_headless_module_imports_textual():
    if _textual(_modules_after_import(HEADLESS)):
        culprits = [m for m in HEADLESS if _textual(_modules_after_import([m]))]
        raise AssertionError(f"these domain modules import Textual: {culprits}")


def test_the_console_imports_no_torch():
    tui = sorted(
        m.name
        for m in pkgutil.walk_packages(hierconsole.__path__, "hierconsole.")
        if m.name.startswith("hierconsole.tui")
    )
    assert "hierconsole.tui.app" in tui
    loaded = _modules_after_import(tui)
    assert "textual" in loaded
    assert "torch" not in loaded


CONSOLE_START = """
import json, sys
import hierconsole.tui as tui
seen = []

def run_app(home=None, gpus=None):  # the console's entry, called once the command line is parsed
    seen.extend(sys.modules)
    return 0

tui.run_app = run_app
from hierconsole.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": seen}))
"""


@pytest.mark.parametrize("argv", [[], ["--home", "HOME"], ["--home=HOME", "--wide"]])
def test_opening_the_console_imports_no_command_and_no_store(tmp_path, argv):
    # `hierconsole --home H` built the parser of every command before the console started, importing
    # the store, polars and the orchestrator: 0.54 s to the first frame in a pty, against 0.18 s without.
    argv = [w.replace("HOME", str(tmp_path / "home")) for w in argv]
    out = subprocess.run(
        [sys.executable, "-c", CONSOLE_START, *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "HIERCONSOLE_HOME": str(tmp_path / "default-home")},
    )
    started = json.loads(out.stdout)
    assert started["code"] == 0 and started["modules"], out.stderr
    loaded = set(started["modules"])
    # completion is imported by every start (it answers the shell's completion requests)
    commands = {f"hierconsole.cli.{m}" for m in COMMAND_MODULES if m != "completion"}
    assert sorted(loaded & commands) == []
    assert not loaded & {"duckdb", "polars", "numpy", "torch", "hierconsole.study.db.storage"}
    assert not (tmp_path / "home").exists() and not (tmp_path / "default-home").exists()
