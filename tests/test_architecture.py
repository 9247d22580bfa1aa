"""The architecture as contracts: which half imports what, no cycles, and light paths that stay light.

The import contracts themselves live in pyproject.toml ([tool.importlinter]) and run here and in CI.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.stores.fixed import COMPLETE

pytestmark = pytest.mark.slow  # the CLI and the console in subprocesses

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "geoopt", "ray", "matplotlib")
"""Modules the light commands and the console never load: torch and geoopt (the engine's), ray (an
optional extra the Ray executor loads when a Ray launch is asked for), matplotlib (the plot extra, loaded
by `plot` and `report` only)."""


def test_the_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is a test dependency (pip install -e '.[test]')"
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _heavy_modules_after(argv: list[str], home: Path, cwd: Path) -> tuple[int, list[str], str]:
    """Run `hierconsole ARGV` in a fresh interpreter; its exit status, the heavy modules it loaded, its output."""
    code = textwrap.dedent(
        f"""
        import sys
        from hierconsole.cli import main
        try:
            status = main(sys.argv[1:])
        except SystemExit as exc:  # --version and --help exit from argparse
            status = exc.code
        print("HEAVY=" + ",".join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)
        sys.exit(status or 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--home", str(home), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "160"},
    )
    heavy = next(line for line in done.stderr.splitlines() if line.startswith("HEAVY="))[len("HEAVY=") :]
    return done.returncode, [m for m in heavy.split(",") if m], done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["runs"],
        ["studies"],
        ["datasets"],
        ["taxonomy", "tiny"],
        ["effects", COMPLETE],
        ["export", "effects", "--study", COMPLETE, "-o", "effects.csv"],
        ["audit", COMPLETE],
        ["plot", "effects", COMPLETE, "-o", "effects.png"],
        ["report", COMPLETE, "-o", "report.html"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_light_commands_import_neither_torch_nor_geoopt(argv, fixed_copy, tmp_path):
    status, heavy, output = _heavy_modules_after(argv, fixed_copy, tmp_path)
    # `audit` reports the fabricated study's failed check with status 1; everything else succeeds.
    assert status == (1 if argv[0] == "audit" else 0), output
    # Figures need matplotlib, and only they load it.
    expected = ["matplotlib"] if argv[0] in ("plot", "report") else []
    assert heavy == expected, f"hierconsole {' '.join(argv)} imported {heavy}"


def test_the_version_lists_no_torch_in_importtime(tmp_path):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hierconsole", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "hierconsole" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert imported and not imported & set(HEAVY)


def test_the_console_paints_its_first_frame_without_torch(fixed_copy, tmp_path):
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        from hierconsole.study.db.storage import Store
        from hierconsole.tui.app import HierConsole

        async def main():
            with Store({str(fixed_copy)!r}) as store:
                app = HierConsole(store, on_quit="leave")
                async with app.run_test(size=(80, 24)) as pilot:
                    await pilot.pause()
                    painted = app.screen.query("DataTable")
                    print("PAINTED", len(painted))
                    app.orchestrator_loop.stop(cancel_jobs=False)
                    await pilot.pause()
                app.loop_done.wait(30)

        asyncio.run(main())
        print("HEAVY=" + ",".join(m for m in {HEAVY!r} if m in sys.modules))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PAINTED" in done.stdout and "HEAVY=\n" in done.stdout + "\n", done.stdout


def test_a_broken_console_import_is_an_error_not_the_help(tmp_path):
    # The console's dependency cannot be imported, as in a broken installation.
    code = "import sys; sys.modules['textual'] = None; from hierconsole.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "--home", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "the console cannot start" in done.stderr and "textual" in done.stderr
    assert "usage:" not in done.stdout and "Traceback" not in done.stderr


_SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|VIEW))\b")


@pytest.mark.parametrize("front_end", ["cli", "tui"])
def test_no_sql_in_a_front_end(front_end):
    """The front ends read through hierconsole.study.read: a query in cli/ or tui/ would be a second
    definition of what the store means (the resume and cancel queries once lived in cli/runs.py)."""
    found = []
    for path in sorted((ROOT / "hierconsole" / front_end).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL.search(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.strip()[:60]}")
    assert not found, "move these queries into hierconsole/study/read:\n" + "\n".join(found)
