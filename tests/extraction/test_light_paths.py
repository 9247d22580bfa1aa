"""`extract` and `taxonomy build-cub` keep the CLI light: help, and input checks that fail, load neither
torch nor transformers (the extractor imports them only once an extraction starts)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # the CLI in subprocesses

HEAVY = ("torch", "transformers", "geoopt")


def _heavy_after(argv: list[str], cwd) -> tuple[int, list[str], str]:
    code = textwrap.dedent(
        f"""
        import sys
        from hierconsole.cli import main
        try:
            status = main(sys.argv[1:])
        except SystemExit as exc:
            status = exc.code
        print("HEAVY=" + ",".join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)
        sys.exit(status or 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    heavy = next(line for line in done.stderr.splitlines() if line.startswith("HEAVY="))[len("HEAVY=") :]
    return done.returncode, [m for m in heavy.split(",") if m], done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["extract", "--help"], 0),
        (["extract", "cub", "--help"], 0),
        (["taxonomy", "build-cub", "--help"], 0),
        (["extract", "cub", "nowhere", "-o", "f.npz", "--weights", "none", "--seed", "0"], 2),
        (["extract", "folder", ".", "-o", "f.npz", "--weights", "missing.pth"], 2),
    ],
    ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else str(v),
)
def test_help_and_early_errors_stay_light(tmp_path, argv, status):
    (tmp_path / "a.png").write_bytes(b"")  # so `extract folder .` finds an image and gets to the weights
    code, heavy, output = _heavy_after(argv, tmp_path)
    assert code == status, output
    assert heavy == [], f"hierconsole {' '.join(argv)} imported {heavy}"
    assert "Traceback" not in output


def test_without_the_extra_extract_says_how_to_install_it(tmp_path):
    (tmp_path / "a.png").write_bytes(b"")
    code = (
        "import sys; sys.modules['transformers'] = None  # as if the extra were not installed\n"
        "from hierconsole.cli import main\n"
        "sys.exit(main(['extract', 'folder', '.', '-o', 'f.npz', '--weights', 'none', '--seed', '0']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'hierconsole[extract]'" in done.stderr and "transformers" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "f.npz").exists()
