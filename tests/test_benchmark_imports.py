"""The benchmark scripts import what exists: every `from X import Y` in benchmarks/, at any depth (many
import inside the function that needs them), names a module and names that are there. Two scripts kept
importing a test module that had moved, which only a full run of each found."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
OURS = ("hierconsole", "tests")


def _imports(script: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of each name imported from a module of ours or a sibling script."""
    siblings = {p.stem for p in BENCHMARKS.glob("*.py")}
    found = []
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top in OURS or top in siblings:
                found.extend((node.lineno, node.module, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("script", sorted(BENCHMARKS.glob("*.py")), ids=lambda p: p.name)
def test_every_name_a_benchmark_imports_exists(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    missing = []
    for line, module, name in _imports(script):
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{script.name}:{line}: {module} ({exc})")
            continue
        if not hasattr(loaded, name) and importlib.util.find_spec(f"{module}.{name}") is None:
            missing.append(f"{script.name}:{line}: {name} from {module}")
    assert not missing, missing
