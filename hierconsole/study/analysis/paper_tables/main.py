"""The main paper's tables (Tables 1 and 2) and the numbers its text reports (abstract, Sec. 5.1-5.5)."""

from __future__ import annotations

from hierconsole.study.analysis.paper_tables.model import PaperTable

MAP_COLUMNS = ("leaf_mAP", "middle_mAP", "high_mAP", "hier_mAP")
EFFECT_KEYS = ("dataset", "aggregation", "metric", "effect")

MAIN_1 = PaperTable(
    id="main-1",
    title="Controlled Geometry x Loss factorial: per arm mean ± SD over three training seeds",
    source="main paper, Table 1 (Sec. 5.2)",
    keys=("dataset", "aggregation", "arm"),
    columns=MAP_COLUMNS,
    with_sd=True,
    decimals=4,
    rows=(
        ("cub", "micro", "E_R", (0.6171, 0.0028), (0.4991, 0.0017), (0.5636, 0.0010), (0.5314, 0.0013)),
        ("cub", "micro", "H_R", (0.6351, 0.0033), (0.5153, 0.0029), (0.5679, 0.0006), (0.5416, 0.0017)),
        ("cub", "micro", "E_S", (0.5144, 0.0032), (0.5480, 0.0022), (0.6121, 0.0007), (0.5800, 0.0009)),
        ("cub", "micro", "H_S", (0.4550, 0.0016), (0.5405, 0.0022), (0.6255, 0.0006), (0.5830, 0.0009)),
        ("nabirds", "macro", "E_R", (0.6831, 0.0028), (0.1994, 0.0034), (0.4830, 0.0029), (0.3412, 0.0031)),
        ("nabirds", "macro", "H_R", (0.6840, 0.0052), (0.1971, 0.0019), (0.4887, 0.0024), (0.3429, 0.0005)),
        ("nabirds", "macro", "E_S", (0.4655, 0.0045), (0.2296, 0.0027), (0.5461, 0.0003), (0.3878, 0.0014)),
        ("nabirds", "macro", "H_S", (0.4387, 0.0066), (0.2245, 0.0010), (0.5494, 0.0031), (0.3869, 0.0020)),
    ),
    note="CUB is its registered query-micro endpoint, NABirds Parent-disjoint group-macro.",
)

MAIN_2 = PaperTable(
    id="main-2",
    title="Semantic-supervision ablation on NABirds Parent-disjoint (means)",
    source="main paper, Table 2 (Sec. 6); the same arms with SDs are supplement Table 9",
    keys=("dataset", "aggregation", "member"),
    columns=MAP_COLUMNS,
    decimals=4,
    rows=(
        ("nabirds", "macro", "leaf-only", 0.6717, 0.1901, 0.4231, 0.3066),
        ("nabirds", "macro", "leaf-parent", 0.6178, 0.2441, 0.4407, 0.3424),
        ("nabirds", "macro", "full", 0.5459, 0.2408, 0.5391, 0.3899),
        ("nabirds", "macro", "shuffled", 0.5874, 0.1559, 0.2881, 0.2220),
    ),
    note="Members as in presets/families/nabirds-semantic-control.toml; each arm has its own frozen epochs.",
)

ABSTRACT = PaperTable(
    id="abstract",
    title="Headline simple effects on mean hierarchy mAP, as the abstract rounds them",
    source="abstract and Sec. 1 (the same numbers)",
    keys=EFFECT_KEYS,
    columns=("mean",),
    decimals=4,
    rows=(
        ("cub", "micro", "hier_mAP", "loss_E", +0.0487),
        ("cub", "micro", "hier_mAP", "loss_H", +0.0414),
        ("cub", "micro", "hier_mAP", "geom_R", +0.0102),
        ("cub", "micro", "hier_mAP", "geom_S", +0.0030),
        ("nabirds", "macro", "hier_mAP", "loss_E", +0.0467),
        ("nabirds", "macro", "hier_mAP", "loss_H", +0.0440),
        ("nabirds", "macro", "hier_mAP", "geom_R", +0.0017),
        ("nabirds", "macro", "hier_mAP", "geom_S", -0.0009),
    ),
)

SEC_5_1 = PaperTable(
    id="sec-5.1",
    title="Baseline context: contextual models' mAP per level",
    source="main paper, Sec. 5.1 (text)",
    keys=("dataset", "split", "arm"),
    columns=("leaf_mAP", "middle_mAP", "high_mAP"),
    decimals=4,
    rows=(
        ("cub", "official", "frozen", 0.6559, 0.3463, 0.4000),
        ("cub", "official", "hier", 0.7566, 0.2425, 0.1696),
        ("cub", "official", "euclidean_regression", None, 0.4880, 0.5631),
        ("nabirds", "seen_class", "hier", 0.7031, 0.1149, 0.3801),
        ("nabirds", "seen_class", "supcon", 0.5249, 0.3286, 0.8901),
    ),
    note=(
        "Historical contextual models under their own objectives and selection protocols, not the factorial: "
        "frozen = frozen DINOv2, hier = HIER-style, euclidean_regression = a historical 32-D Euclidean "
        "taxonomy-regression projector (its Class mAP is not given), supcon = the historical Taxonomy-SupCon "
        "baseline. NABirds is the original seen-class evaluation, not Parent-disjoint. The text names no "
        "aggregation and no SD."
    ),
)

SEC_5_2 = PaperTable(
    id="sec-5.2",
    title="Simple effects on mean hierarchy mAP, mean ± SD over seeds, with the seeds' directions",
    source="main paper, Sec. 5.2 (text); the CUB group-macro means are its post-hoc sensitivity paragraph",
    keys=EFFECT_KEYS,
    columns=("mean", "sd", "positive_seeds"),
    decimals=6,
    rows=(
        ("cub", "micro", "hier_mAP", "loss_E", +0.048670, 0.000409, 3),
        ("cub", "micro", "hier_mAP", "loss_H", +0.041424, 0.001149, 3),
        ("cub", "micro", "hier_mAP", "geom_R", +0.010246, 0.000416, 3),
        ("cub", "micro", "hier_mAP", "geom_S", +0.003001, 0.000687, 3),
        ("cub", "micro", "hier_mAP", "interaction", -0.007245, 0.000804, 0),
        ("nabirds", "macro", "hier_mAP", "loss_E", +0.046656, 0.004351, 3),
        ("nabirds", "macro", "hier_mAP", "loss_H", +0.044046, 0.002527, 3),
        ("nabirds", "macro", "hier_mAP", "geom_R", +0.001706, 0.003657, 2),
        ("nabirds", "macro", "hier_mAP", "geom_S", -0.000904, 0.003188, None),
        ("nabirds", "macro", "hier_mAP", "interaction", -0.002610, 0.006799, None),
        ("cub", "macro", "hier_mAP", "geom_R", +0.008904, None, None),
        ("cub", "macro", "hier_mAP", "geom_S", +0.004647, None, None),
        ("cub", "macro", "hier_mAP", "loss_E", +0.062202, None, None),
        ("cub", "macro", "hier_mAP", "loss_H", +0.057945, None, None),
        ("cub", "macro", "hier_mAP", "interaction", -0.004256, None, None),
    ),
    note=(
        "positive_seeds is what the text states ('all three', 'negative in all three', 'two of three'); "
        "None where it says only 'mixed' or 'not seed-wise consistent'. The CUB macro rows are post hoc."
    ),
)

SEC_5_4 = PaperTable(
    id="sec-5.4",
    title="Redistribution: H_S - E_S per level (mAP)",
    source="main paper, Sec. 5.4 (text)",
    keys=("dataset", "aggregation", "contrast", "metric"),
    columns=("mean",),
    decimals=4,
    rows=(
        ("cub", "micro", "geom_S", "leaf_mAP", -0.0594),
        ("cub", "micro", "geom_S", "middle_mAP", -0.0074),
        ("cub", "micro", "geom_S", "high_mAP", +0.0134),
        ("nabirds", "macro", "geom_S", "leaf_mAP", -0.0268),
        ("nabirds", "macro", "geom_S", "middle_mAP", -0.0051),
        ("nabirds", "macro", "geom_S", "high_mAP", +0.0033),
    ),
)

OUTER_NOTE = (
    "Earlier, validation-frozen experiments (not the fixed-100-epoch factorial): frozen = Frozen DINOv2, "
    "matched_euclidean / matched_hyperbolic = the matched-geometry (regression) controls, supcon = "
    "Taxonomy-SupCon; the SD is over the three outer splits. CUB is stated group-macro; NABirds is "
    "Parent-disjoint, whose endpoint is group-macro (Sec. 4)."
)

SEC_5_5 = PaperTable(
    id="sec-5.5",
    title="Outer splits: mean hierarchy mAP per model, mean ± SD over three outer splits",
    source="main paper, Sec. 5.5 (text)",
    keys=("dataset", "aggregation", "split", "arm"),
    columns=("hier_mAP",),
    with_sd=True,
    decimals=4,
    rows=(
        ("cub", "macro", "genus_disjoint_outer", "frozen", (0.3146, 0.0098)),
        ("cub", "macro", "genus_disjoint_outer", "matched_euclidean", (0.3126, 0.0099)),
        ("cub", "macro", "genus_disjoint_outer", "matched_hyperbolic", (0.3148, 0.0096)),
        ("cub", "macro", "genus_disjoint_outer", "supcon", (0.3464, 0.0218)),
        ("nabirds", "macro", "parent_disjoint_outer", "matched_euclidean", (0.3404, 0.0220)),
        ("nabirds", "macro", "parent_disjoint_outer", "matched_hyperbolic", (0.3426, 0.0223)),
        ("nabirds", "macro", "parent_disjoint_outer", "supcon", (0.3849, 0.0177)),
    ),
    note=OUTER_NOTE,
)

SEC_5_5_GAINS = PaperTable(
    id="sec-5.5-gains",
    title="Outer splits: paired gains, mean (± SD) over the outer splits",
    source="main paper, Sec. 5.5 (text)",
    keys=("dataset", "aggregation", "split", "contrast", "metric"),
    columns=("mean", "sd", "positive_splits"),
    decimals=4,
    rows=(
        ("cub", "macro", "genus_disjoint_outer", "supcon - matched_hyperbolic", "hier_mAP", +0.0316, None, 3),
        ("cub", "macro", "genus_disjoint_outer", "supcon - matched_hyperbolic", "middle_mAP", -0.0003, None, None),
        ("cub", "macro", "genus_disjoint_outer", "supcon - matched_hyperbolic", "high_mAP", +0.0634, None, None),
        ("nabirds", "macro", "parent_disjoint_outer", "supcon - matched_hyperbolic", "hier_mAP", +0.0423, 0.0068, 3),
        ("nabirds", "macro", "parent_disjoint_outer", "matched_hyperbolic - matched_euclidean", "hier_mAP", +0.00222, 0.00049, None),
    ),
    note=(
        OUTER_NOTE + " The CUB middle (Genus) and high (Family) gains are 'about' these values in the text; "
        "the last NABirds row is printed to 5 decimals."
    ),
)

TABLES: tuple[PaperTable, ...] = (MAIN_1, MAIN_2, ABSTRACT, SEC_5_1, SEC_5_2, SEC_5_4, SEC_5_5, SEC_5_5_GAINS)
