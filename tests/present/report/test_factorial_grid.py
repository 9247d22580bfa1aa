"""The factorial grid figure: each cell's mean ± SD where its geometry's row meets its objective's column,
a cell not trained left blank; the report shows it beyond the paper's 2 × 2 only."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from hierconsole.present.report.figures import draw
from hierconsole.present.report.study_report import arms_section
from hierconsole.study.read.report_inputs import study_inputs
from tests.stores.fixed import COMPLETE


@pytest.fixture(scope="module")
def demo(report_home):
    from hierconsole.study.db.storage import Store

    with Store(report_home, read_only=True) as store:
        return study_inputs(store, COMPLETE)


def _arms(values: dict[str, float]) -> pl.DataFrame:
    rows = [{"arm": a, "metric": "hier_mAP", "mean": v, "sd": 0.001, "n": 3} for a, v in values.items()]
    rows.append({"arm": "frozen", "metric": "hier_mAP", "mean": 0.3, "sd": None, "n": None})
    return pl.DataFrame(rows, schema={"arm": pl.String, "metric": pl.String, "mean": pl.Float64, "sd": pl.Float64, "n": pl.Int64})


def test_the_grid_puts_each_cell_where_its_factors_meet(demo):
    values = {"E_R": 0.51, "H_R": 0.52, "L_R": 0.53, "E_S": 0.54, "L_S": 0.56}  # H_S not trained
    fig = draw("factorial", dataclasses.replace(demo, arms=_arms(values)))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["R", "S"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["E", "H", "L"]
    placed = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text().split("\n")[0] for t in ax.texts}
    assert placed == {(0, 0): "0.5100", (1, 0): "0.5200", (2, 0): "0.5300", (0, 1): "0.5400", (2, 1): "0.5600"}


def test_the_report_shows_the_grid_beyond_the_papers_factorial(demo):
    def figures(inputs) -> list[str]:
        return [b.caption for b in arms_section(inputs).blocks if type(b).__name__ == "Figure"]

    assert not any("The factorial" in c for c in figures(demo))
    three = dataclasses.replace(demo, arms=_arms({"E_R": 0.5, "H_R": 0.5, "L_R": 0.5}))
    assert any("The factorial" in c for c in figures(three))
