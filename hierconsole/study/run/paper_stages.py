"""The paper's replication as stages: which exist for the datasets given, and what each reads.

Either dataset may be left out; its stages are then absent and the paper tables that need it are named
as omitted. A stage's external inputs are content hashes the front end computes (image folders, weights,
taxonomy, the scale and seed) before anything is created.
"""

from __future__ import annotations

from hierconsole.study.run.stage_graph import Stage

CUB = "cub"
NABIRDS = "nabirds"


def paper_stages(datasets: frozenset[str]) -> list[Stage]:
    """The stage graph for the datasets given (a non-empty subset of {cub, nabirds})."""
    if not datasets or not datasets <= {CUB, NABIRDS}:
        raise ValueError(
            f"datasets must be a non-empty subset of {{{CUB}, {NABIRDS}}}, not {sorted(datasets)}"
        )
    stages: list[Stage] = []
    imports: list[str] = []
    if CUB in datasets:
        stages += [
            Stage("extract-cub", (), ("cub_images", "weights", "model")),
            Stage("taxonomy-cub", (), ("cub_labels", "taxonomy_source")),
            Stage("import-cub", ("extract-cub", "taxonomy-cub"), ()),
        ]
        imports.append("import-cub")
    if NABIRDS in datasets:
        stages += [
            Stage("extract-nabirds", (), ("nabirds_images", "weights", "model")),
            Stage("import-nabirds", ("extract-nabirds",), ("nabirds_hierarchy",)),
        ]
        imports.append("import-nabirds")
    deps = tuple(imports)
    stages += [
        Stage("factorials", deps, ("scale", "seed")),
        Stage("families", deps, ("scale", "seed")),
        Stage("baselines", deps, ("scale", "seed")),
        Stage("rescore", ("factorials", "families"), ("scale",)),
        Stage("tables", ("factorials", "families", "baselines", "rescore"), ("scale", "paper_values")),
        Stage("report", ("tables",), ()),
    ]
    return stages
