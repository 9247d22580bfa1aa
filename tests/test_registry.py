"""The component registry: built-ins by name and arm code, one's own as module:Name, checked against the
protocol in one line each; no torch to read names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hierconsole.registry import (
    ENTRY_POINT_GROUP,
    GEOMETRIES,
    OBJECTIVES,
    ComponentError,
    component,
    entry_points,
    load,
    protocol_problem,
)


def test_built_ins_and_their_codes():
    assert {n: c.code for n, c in GEOMETRIES.items()} == {"euclidean": "E", "poincare": "H", "lorentz": "L", "product": "M"}
    assert {n: c.code for n, c in OBJECTIVES.items()} == {"regression": "R", "supcon": "S", "soft_ce": "C", "flat_supcon": "F"}
    assert [n for n, c in OBJECTIVES.items() if c.takes_tau] == ["supcon", "soft_ce", "flat_supcon"]
    for c in (*GEOMETRIES.values(), *OBJECTIVES.values()):
        assert c.builtin and protocol_problem(c) is None, c.name


def test_names_that_are_no_component_are_refused_in_one_line():
    with pytest.raises(ComponentError, match="unknown geometry 'hyperbolic': expected one of euclidean"):
        component("geometry", "hyperbolic")
    with pytest.raises(ComponentError, match="arm code 'XY'"):
        component("objective", "mine:XY")
    with pytest.raises(ComponentError, match="unknown objective 'mine:'"):
        component("objective", "mine:")
    own = component("objective", "my.pkg:Soft_CE")
    assert (own.code, own.target, own.builtin) == ("SoftCE", "my.pkg:Soft_CE", False)


def test_protocol_problems_name_what_is_missing(tmp_path, monkeypatch):
    (tmp_path / "parts.py").write_text(
        "class Good:\n    uses_tau = False\n    def loss(self, dist, labels, *, tau, training):\n        return dist.sum((-2, -1))\n"
        "class NoLoss:\n    uses_tau = True\n"
        "def NotAClass():\n    pass\n"
        "class Flat:\n    def embed(self, t):\n        return t\n"
        "class NoCurvature:\n    def __init__(self, width):\n        pass\n    def embed(self, t):\n        return t\n"
        "    def pairwise(self, x, y=None, *, clip_max):\n        return x\n"
        "class NeedsArgs:\n    uses_tau = False\n    def __init__(self, margin):\n        pass\n"
        "    def loss(self, dist, labels, *, tau, training):\n        return dist\n"
    )
    (tmp_path / "fails.py").write_text("raise RuntimeError('bad module')\n")
    monkeypatch.chdir(tmp_path)  # one's own modules are found in the folder one launches from
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert protocol_problem(component("objective", "parts:Good")) is None
    assert load(component("objective", "parts:Good")).uses_tau is False
    assert protocol_problem(component("objective", "parts:NoLoss")) == (
        "objective 'parts:NoLoss' lacks loss (a objective provides loss, uses_tau)"
    )
    assert protocol_problem(component("objective", "parts:NotAClass")) == "objective 'parts:NotAClass' is not a class"
    assert "lacks pairwise" in (protocol_problem(component("geometry", "parts:Flat")) or "")
    assert protocol_problem(component("geometry", "parts:NoCurvature")) == (
        "geometry 'parts:NoCurvature' cannot be built with c=… and r=… (the study's curvature and tangent scale)"
    )
    assert protocol_problem(component("objective", "parts:NeedsArgs")) == "objective 'parts:NeedsArgs' cannot be built with no argument"
    assert "has no 'Missing'" in (protocol_problem(component("objective", "parts:Missing")) or "")
    assert "cannot import module 'fails' (RuntimeError: bad module)" in (protocol_problem(component("objective", "fails:Any")) or "")


@pytest.mark.slow
def test_reading_names_and_arms_imports_no_torch():
    code = (
        "import sys\n"
        "from hierconsole.factorial import Factorial\n"
        "from hierconsole.config import load_preset\n"
        "p = load_preset('demo').with_overrides(values={'factorial.geometries': ['euclidean', 'lorentz', 'product'], 'temperature.others': 0.3})\n"
        "assert p.cells == ('E_R', 'L_R', 'M_R', 'E_S', 'L_S', 'M_S'), p.cells\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def installed_components(site, entries: dict[str, str], module: str = "", source: str = "") -> None:
    """A distribution installed into ``site`` (a folder on the path) that declares ``entries`` in the
    group hierconsole.components, as `pip install` of a package with that entry point leaves it."""
    info = site / "hc_test_components-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hc-test-components\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    if module:
        (site / f"{module}.py").write_text(source)


def test_an_installed_entry_point_names_a_component(tmp_path, monkeypatch):
    installed_components(
        tmp_path, {"leaf_margin": "hc_margin:Leaf_Margin", "odd": "not a target"}, "hc_margin",
        "class Leaf_Margin:\n    uses_tau = False\n    def loss(self, dist, labels, *, tau, training):\n        return dist.mean((-2, -1))\n",
    )  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_points.cache_clear()
    try:
        c = component("objective", "leaf_margin")
        assert (c.name, c.code, c.target, c.builtin) == ("leaf_margin", "LeafMargin", "hc_margin:Leaf_Margin", False)
        assert protocol_problem(c) is None
        with pytest.raises(ComponentError, match="'odd': its entry point in hierconsole.components names 'not a target'"):
            component("objective", "odd")
        with pytest.raises(ComponentError, match="or the name of an installed entry point in hierconsole.components"):
            component("objective", "nowhere")
    finally:
        entry_points.cache_clear()
