"""The paper's published numbers the tests check against: one copy, in the package
(hierconsole.study.analysis.paper_values); re-exported here for the tests that import them from tests."""

from hierconsole.study.analysis.paper_values import (  # noqa: F401
    CUB_S7,
    CUB_S7_EFFECTS,
    CUB_S11,
    PER_SEED_COLUMNS,
    SEEDS,
    SHORT_ARM,
    cub_s7_csv,
    cub_s7_table,
)
