"""Only `hierconsole.tui` imports Textual, and it never imports torch (checked in fresh interpreters)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import hierconsole

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
