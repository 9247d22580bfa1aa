"""Every figure kind drawn for the fixed demo study and a family, checked through matplotlib's objects
(axes, labels, artists, the data they hold), then written as PNG, PDF and SVG through the CLI."""

from __future__ import annotations

import subprocess
import sys

import matplotlib.image
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.container import ErrorbarContainer

from hierconsole.cli import main
from hierconsole.errors import HierconsoleError
from hierconsole.factorial import EFFECTS
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.present.report.figures import KINDS, draw
from hierconsole.study.read.report_inputs import family_inputs, study_inputs
from hierconsole.styles import ARM_COLOURS
from hierconsole.vocabulary import ARMS, BASELINES
from tests.present.report.conftest import FAMILY, MEMBERS, TUNED
from tests.stores.fixed import COMPLETE, SEEDS


@pytest.fixture(scope="module")
def demo(report_home):
    from hierconsole.study.db.storage import Store

    with Store(report_home, read_only=True) as store:
        return study_inputs(store, COMPLETE), study_inputs(store, TUNED), family_inputs(store, FAMILY)


def _texts(labels) -> list[str]:
    return [t.get_text() for t in labels]


def _colour(artist) -> str:
    from matplotlib.colors import to_hex

    return to_hex(artist.get_color() if hasattr(artist, "get_color") else artist)


def test_effects_forest_draws_every_seed_mean_and_both_intervals(demo):
    inputs = demo[0]
    fig = draw("effects", inputs)
    (ax,) = fig.axes
    effects = inputs.effects["hier_mAP"]
    names = [n for n in effects if n in EFFECTS]
    # Rows top to bottom in EFFECTS order: tick labels read bottom-up.
    assert _texts(ax.get_yticklabels())[::-1] == [f"{n}\n{EFFECTS[n]}" for n in names]
    assert "hier mAP" in ax.get_xlabel() and "paired by seed" in ax.get_xlabel()
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(points) == len(names) and all(len(p.get_offsets()) == len(SEEDS) for p in points)
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bars) == 2 * len(names)  # a t and a bootstrap interval per row
    top = names[0]
    e = effects[top]
    t_bar, boot_bar = bars[0].get_segments()[0], bars[1].get_segments()[0]
    assert tuple(t_bar[:, 0]) == pytest.approx(e.evidence.ci95_t)
    assert tuple(boot_bar[:, 0]) == pytest.approx(e.evidence.ci95_boot)
    assert sorted(points[0].get_offsets()[:, 0]) == pytest.approx(sorted(e.per_unit.values()))
    legend = fig.legends[0]
    assert _texts(legend.get_texts()) == ["per seed", "mean", "95 % t interval", "95 % bootstrap"]
    # geom_R is drawn in the colour of the arm it adds.
    assert _colour(ax.lines[0]) == ARM_COLOURS["H_R"].lower()


def test_effects_forest_of_another_metric_and_its_refusal(demo):
    fig = draw("effects", demo[0], metric="high_mAP")
    assert "High" in fig.axes[0].get_xlabel()
    with pytest.raises(HierconsoleError, match="no metric 'nope'"):
        draw("effects", demo[0], metric="nope")


def test_redistribution_shows_levels_by_name_and_h_minus_e_with_intervals(demo):
    inputs = demo[0]
    fig = draw("redistribution", inputs)
    left, right = fig.axes
    expected_ticks = [name if name.lower() == lv else f"{name} ({lv})" for name, lv in zip(inputs.level_names, LEVELS, strict=True)]
    assert _texts(left.get_xticklabels()) == expected_ticks == _texts(right.get_xticklabels())
    arms = [a for a in (*ARMS, *BASELINES) if a in set(inputs.arms["arm"].to_list())]
    assert _texts(left.get_legend().get_texts()) == arms
    assert left.get_ylabel() == "official-test mAP" and "H − E" in right.get_ylabel()
    bars = [c for c in right.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == len(inputs.redistribution.contrasts)
    geom_s = inputs.redistribution.contrasts["geom_S"]
    line = bars[0].lines[0]
    assert list(line.get_ydata()) == pytest.approx([geom_s[lv].mean for lv in LEVELS])


def test_training_curves_one_line_per_cell_and_seed_in_arm_colours(demo):
    inputs = demo[0]
    fig = draw("training", inputs)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "epoch"
    assert len(ax.lines) == len(ARMS) * len(SEEDS)
    assert {_colour(line) for line in ax.lines} == {ARM_COLOURS[a].lower() for a in ARMS}
    assert _texts(ax.get_legend().get_texts()) == list(ARMS)


def test_recall_curves_per_level_with_every_k(demo):
    inputs = demo[0]
    fig = draw("recall", inputs)
    assert len(fig.axes) == len(LEVELS)
    for ax in fig.axes:
        assert _texts(ax.get_xticklabels()) == ["1", "5", "10", "20"]
        assert len(ax.lines) == len(ARMS)
        assert len(ax.collections) == len(ARMS)  # each trained cell's t band
    assert fig.axes[0].get_ylabel() == "Recall@K (strict)"


def test_temperature_selection_marks_the_winner_and_refuses_an_untuned_study(demo):
    fig = draw("temperature", demo[1])
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and "τ" in ax.get_xlabel()
    assert len(ax.lines) == 4  # a curve and a winner's star per geometry
    stars = [line for line in ax.lines if line.get_marker() == "*"]
    assert [tuple(s.get_xdata()) for s in stars] == [(0.1,), (0.2,)]
    with pytest.raises(HierconsoleError, match="tuned no temperature"):
        draw("temperature", demo[0])


def test_family_contrasts_pooled_effects_and_curvature_grid(demo):
    family = demo[2]
    fig = draw("contrasts", family)
    labels = _texts(fig.axes[0].get_yticklabels())[::-1]
    assert labels[0] == "Base - Near-flat · E_R · Leaf" and labels[-1] == "Strong - Base · H_R · hier"
    assert len(labels) == len(ARMS) * 4 + 4
    fig = draw("effects", family)
    points = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    assert all(len(p.get_offsets()) == len(MEMBERS) for p in points)
    assert "member" in _texts(fig.legends[0].get_texts())[0]
    fig = draw("curvature", family)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "curvature c (log scale)"
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == len(MEMBERS) * 2  # H_R and H_S of every member
    xs = sorted({float(b.lines[0].get_xdata()[0]) for b in bars})
    assert xs == sorted({c for c, _, _ in MEMBERS.values()})
    assert {t for t in _texts(ax.get_legend().get_texts())} == {"r = 0.2", "r = 0.4"}


def test_every_kind_has_a_form_for_a_study_or_a_family_and_refuses_the_other(demo):
    study, tuned, family = demo
    for kind in KINDS.values():
        for target in kind.targets():
            draw(kind.name, (tuned if kind.name == "temperature" else study) if target == "study" else family)
    with pytest.raises(HierconsoleError, match="drawn for a study, not a family"):
        draw("redistribution", family)
    with pytest.raises(HierconsoleError, match="drawn for a family, not a study"):
        draw("curvature", study)


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg"])
def test_plot_command_writes_each_format(report_home, tmp_path, capsys, fmt):
    out = tmp_path / f"effects.{fmt}"
    assert main(["--home", str(report_home), "plot", "effects", COMPLETE, "-o", str(out)]) == 0
    assert f"wrote figure effects of study {COMPLETE}" in capsys.readouterr().out
    data = out.read_bytes()
    if fmt == "png":
        image = matplotlib.image.imread(out)
        assert image.shape[0] > 100 and image.shape[1] > 100
    elif fmt == "pdf":
        assert data.startswith(b"%PDF") and b"CreationDate" not in data
    else:
        assert b"<svg" in data and b"geom_R" in data  # svg.fonttype none: labels stay text
    # The same figure again gives the same bytes (no dates, fixed SVG ids).
    again = tmp_path / f"again.{fmt}"
    assert main(["--home", str(report_home), "plot", "effects", COMPLETE, "-o", str(again)]) == 0
    assert again.read_bytes() == data


@pytest.mark.slow
def test_plot_refusals_exit_2_and_write_nothing(report_home, tmp_path):
    def plot(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "hierconsole", "--home", str(report_home), "plot", *args],
            capture_output=True, text=True, timeout=120,
        )

    cases = {
        ("bogus", COMPLETE, "-o", str(tmp_path / "a.png")): "unknown figure kind 'bogus'",
        ("effects", COMPLETE, "-o", str(tmp_path / "a.jpg")): "from its suffix",
        ("curvature", COMPLETE, "-o", str(tmp_path / "a.png")): "drawn for a family, not a study",
        ("temperature", COMPLETE, "-o", str(tmp_path / "a.png")): "tuned no temperature",
        ("effects", "no-such-study", "-o", str(tmp_path / "a.png")): "no study 'no-such-study'",
    }
    for args, message in cases.items():
        out = plot(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in " ".join(out.stderr.split()) and "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []
    existing = tmp_path / "e.png"
    existing.write_bytes(b"keep")
    out = plot("effects", COMPLETE, "-o", str(existing))
    assert out.returncode == 2 and "already exists" in out.stderr and existing.read_bytes() == b"keep"
