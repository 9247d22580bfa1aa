"""Path completion and the signed bars, without an app."""

from __future__ import annotations

import os

from hierconsole.present import numbers as fmt
from hierconsole.tui.widgets.path_input import complete_path


def test_path_completion(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "features.npy").write_bytes(b"")
    (tmp_path / "features.parquet").write_bytes(b"")
    (tmp_path / ".hidden").write_text("")
    base = f"{tmp_path}{os.sep}"
    assert complete_path(base + "da") == base + "data" + os.sep
    assert complete_path(base + "data") == base + "data" + os.sep
    assert complete_path(base + "fe") == base + "features.npy"  # the first in name order
    assert complete_path(base + "features.p") == base + "features.parquet"
    assert complete_path(base + "zz") is None
    assert complete_path(base) == base + "data" + os.sep  # hidden entries only when asked for
    assert complete_path(base + ".h") == base + ".hidden"
    assert complete_path("") is None
    monkeypatch.setenv("HOME", str(tmp_path))
    assert complete_path("~/da") == "~/data" + os.sep  # what was typed is kept


def test_zero_bar_grows_on_the_side_of_the_sign():
    half = 5
    assert str(fmt.zero_bar(-1.0, 2.0, half)) == "   ██" + "│" + " " * 5
    assert str(fmt.zero_bar(2.0, 2.0, half)) == " " * 5 + "│" + "█" * 5
    assert str(fmt.zero_bar(1e-9, 2.0, half)) == " " * 5 + "│" + "█" + " " * 4  # never invisible
    assert str(fmt.zero_bar(0.0, 2.0, half)) == " " * 5 + "│" + " " * 5
    assert [s.style for s in fmt.zero_bar(-1.0, 2.0).spans] == ["red", "dim"]
    assert [s.style for s in fmt.zero_bar(1.0, 2.0).spans] == ["dim", "green"]


def test_seed_direction_colours():
    assert fmt.count(3, 3).style == "green"
    assert fmt.count(0, 3).style == "red"
    assert fmt.count(1, 3).style == "yellow"
    assert str(fmt.mean_sd(0.01234, None, sign=True)) == "+0.0123 (n=1)"
    assert fmt.duration(3725) == "1h02m" and fmt.duration(65) == "1m05s" and fmt.duration(None) == ""
