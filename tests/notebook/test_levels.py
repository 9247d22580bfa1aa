"""The notebook names a study's levels: the codes its frames are keyed by, beside the data's own names."""

from __future__ import annotations

import hierconsole as hc
from tests.stores.fixed import COMPLETE


def test_levels_name_the_codes_of_the_per_seed_columns(fixed_home):
    home = hc.open_home(fixed_home)
    levels = home.levels(COMPLETE)
    assert levels.columns == ["position", "code", "name", "hier", "trained"]
    assert levels["code"].to_list() == ["leaf", "middle", "high"]
    assert levels["hier"].to_list() == [False, True, True]
    assert levels["trained"].to_list() == [True, True, True]
    per_seed = home.per_seed(COMPLETE)
    mean_columns = [c for c in per_seed.columns if c.endswith("_mAP") and c != "hier_mAP"]
    assert mean_columns == [f"{code}_mAP" for code in levels["code"]]
    assert set(home.metrics(COMPLETE)["level"].unique()) <= set(levels["code"])
