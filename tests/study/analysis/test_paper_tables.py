"""The paper's transcribed tables checked against themselves: wherever the paper's numbers determine one
another (per-seed effects are differences of per-seed arms, a mean ± SD summarises three per-seed values,
the hier score is the mean of middle and high, the text restates a table), the transcription must agree
with itself to the paper's rounding. A typo in one cell breaks one of these checks. The shipped files are
read back beside the loader's tables by a plain CSV parse.

Inconsistencies that are the paper's own (not the transcription's) are listed in PAPER_INCONSISTENCIES and
checked to be exactly that large, so they are marked rather than "fixed".
"""

from __future__ import annotations

import csv
import math
import statistics
import tomllib

import pytest

from hierconsole.factorial import CONTRASTS
from hierconsole.levels import PAPER_CODES as LEVELS
from hierconsole.study.analysis.paper_tables import (
    PAPER_DIR,
    PAPER_TABLES,
    PaperTable,
    load_tables,
    paper_long,
)
from hierconsole.vocabulary import AGGREGATIONS, ARMS, BASELINES
from tests.paper_tables import SEEDS

HALF = 0.5  # a printed value is within half a unit of its last digit of the exact one
EPS = 1e-12


def unit(table: PaperTable) -> float:
    return 10.0**-table.decimals


def by_key(table_id: str) -> dict[tuple, dict]:
    t = PAPER_TABLES[table_id]
    return {t.key_of(r): t.cells(r) for r in t.rows}


def per_seed_arms(table_id: str) -> dict[tuple[str, int], dict[str, float]]:
    """(arm, seed) -> metric -> value of a per-seed arm table (S3, S5)."""
    t = PAPER_TABLES[table_id]
    return {(str(r[2]), int(r[3])): t.cells(r) for r in t.rows}  # type: ignore[misc]


# -- the index ------------------------------------------------------------------------------------------


def test_every_table_has_rows_and_its_long_frame():
    assert len(PAPER_TABLES) == 26
    for table_id, t in PAPER_TABLES.items():
        assert t.id == table_id and t.rows and t.title and t.source
        long = paper_long(table_id)
        printed = sum(c is not None for r in t.rows for c in t.cells(r).values())
        assert long.height == printed
        assert long.columns == [*t.keys, "column", "value", "sd"]


def test_the_papers_numbering_is_indexed():
    expected = {"main-1", "main-2", "sec-5.1", "sec-5.2", "sec-5.4", "sec-5.5", "sec-S1"}
    expected |= {f"S{i}" for i in range(1, 13)}
    assert expected <= set(PAPER_TABLES)


def test_keys_use_the_projects_words():
    arms = {*ARMS, *BASELINES, "euclidean_regression", "supcon", "matched_euclidean", "matched_hyperbolic"}
    for t in PAPER_TABLES.values():
        frame = {k: {t.key_of(row)[i] for row in t.rows} for i, k in enumerate(t.keys)}
        assert frame["dataset"] <= {"cub", "nabirds"}, t.id
        if "aggregation" in t.keys:
            assert frame["aggregation"] <= set(AGGREGATIONS), t.id
        if "arm" in t.keys:
            assert frame["arm"] <= arms, t.id
        if "level" in t.keys:
            assert frame["level"] - {None} <= set(LEVELS), t.id
        if "effect" in t.keys:
            assert frame["effect"] <= set(CONTRASTS), t.id


def test_sd_cells_are_mean_sd_pairs():
    long = paper_long("main-1").row(0, named=True)
    assert (long["arm"], long["column"], long["value"], long["sd"]) == ("E_R", "leaf_mAP", 0.6171, 0.0028)
    assert by_key("main-1")[("nabirds", "macro", "H_S")]["hier_mAP"] == (0.3869, 0.0020)
    with pytest.raises(ValueError, match="not a \\(mean, sd\\) pair"):
        PaperTable("x", "x", "x", ("dataset",), ("v",), (("cub", 0.5),), 4, with_sd=True)
    with pytest.raises(ValueError, match="expected 2"):
        PaperTable("x", "x", "x", ("dataset",), ("v",), (("cub",),), 4)
    with pytest.raises(ValueError, match="share their keys"):
        PaperTable("x", "x", "x", ("dataset",), ("v",), (("cub", 1.0), ("cub", 2.0)), 4)


# -- the shipped files ----------------------------------------------------------------------------------


def _plain(text: str, *, verbatim: bool) -> object:
    """A CSV cell parsed the simplest way, independently of the loader: empty is None, "m ± s" a pair,
    else an int, else a float, else the text."""
    if text == "" or verbatim:
        return text or None
    if "±" in text:
        mean, sd = text.split("±")
        return (float(mean), float(sd))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def test_the_loader_reads_every_shipped_file_as_written():
    # Each table is its CSV's cells as written, in tables.toml's order, with its entry's words: a loader
    # that shifted a column, dropped a row or mistyped a cell (3 for 3.0, "0" for 0) fails here.
    index = tomllib.loads((PAPER_DIR / "tables.toml").read_text(encoding="utf-8"))["table"]
    assert [entry["id"] for entry in index] == list(PAPER_TABLES)
    assert sorted(p.name for p in PAPER_DIR.iterdir()) == sorted(["tables.toml", *(f"{i}.csv" for i in PAPER_TABLES)])
    for entry in index:
        t = PAPER_TABLES[entry["id"]]
        assert (t.title, t.source, t.keys, t.decimals) == (entry["title"], entry["source"], tuple(entry["keys"]), entry["decimals"])
        assert (t.with_sd, t.note) == (entry.get("with_sd", False), entry.get("note", ""))
        with (PAPER_DIR / f"{t.id}.csv").open(encoding="utf-8", newline="") as f:
            header, *body = csv.reader(f)
        assert header == [*t.keys, *t.columns] and len(body) == len(t.rows), t.id
        for row, texts in zip(t.rows, body, strict=True):
            for name, cell, text in zip(header, row, texts, strict=True):
                plain = _plain(text, verbatim=name in entry.get("text", ()))
                assert cell == plain and repr(cell) == repr(plain), (t.id, name, text)


def test_a_damaged_table_file_is_named_with_its_line(tmp_path):
    for f in ("tables.toml", "S3.csv"):
        (tmp_path / f).write_bytes((PAPER_DIR / f).read_bytes())
    (tmp_path / "tables.toml").write_text(
        '[[table]]\nid = "S3"\ntitle = "t"\nsource = "s"\nkeys = ["dataset", "aggregation", "arm", "seed"]\ndecimals = 6\n'
        'with_sd = true\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="S3.csv, line 2: '0.613884' is not 'mean ± sd'"):
        load_tables(tmp_path)
    (tmp_path / "tables.toml").write_text(
        '[[table]]\nid = "S3"\ntitle = "t"\nsource = "s"\nkeys = ["dataset", "arm"]\ndecimals = 6\n', encoding="utf-8"
    )
    with pytest.raises(ValueError, match="does not start with the keys"):
        load_tables(tmp_path)


# -- per-seed tables against their summaries ----------------------------------------------------------


@pytest.mark.parametrize("table_id", ["S3", "S5"])
def test_per_seed_hier_is_the_mean_of_middle_and_high(table_id):
    for (arm, seed), v in per_seed_arms(table_id).items():
        assert v["hier_mAP"] == pytest.approx((v["middle_mAP"] + v["high_mAP"]) / 2, abs=1e-6 + EPS), (arm, seed)


@pytest.mark.parametrize(("arms_id", "effects_id"), [("S3", "S4"), ("S5", "S6")])
def test_per_seed_effects_are_differences_of_per_seed_arms(arms_id, effects_id):
    arms = per_seed_arms(arms_id)
    for (_, _, metric, effect), cells in by_key(effects_id).items():
        for s in SEEDS:
            value = CONTRASTS[effect].value({a: arms[(a, s)][metric] for a in ARMS})
            # The paper differences its unrounded arm values: each printed arm carries 0.5e-6 of rounding.
            tol = (2 if effect == "interaction" else 1) * 1e-6 + 0.5e-6 + EPS
            assert cells[f"seed_{s}"] == pytest.approx(value, abs=tol), (effect, s)


@pytest.mark.parametrize("effects_id", ["S4", "S6", "S11"])
def test_effect_mean_and_sd_summarise_the_seeds(effects_id):
    t = PAPER_TABLES[effects_id]
    for key, cells in by_key(effects_id).items():
        values = [cells[f"seed_{s}"] for s in SEEDS]
        assert cells["mean"] == pytest.approx(statistics.fmean(values), abs=HALF * unit(t) + 0.5e-6 + EPS), key
        assert cells["sd"] == pytest.approx(statistics.stdev(values), abs=HALF * unit(t) + 1e-6 + EPS), key


@pytest.mark.parametrize("effects_id", ["S4", "S6", "S11"])
def test_effects_are_consistent_within_each_seed(effects_id):
    # interaction = geom_S - geom_R = loss_H - loss_E, whatever the arms were.
    e = {key[3]: cells for key, cells in by_key(effects_id).items()}
    for s in SEEDS:
        c = f"seed_{s}"
        assert e["interaction"][c] == pytest.approx(e["geom_S"][c] - e["geom_R"][c], abs=2e-6), s
        assert e["interaction"][c] == pytest.approx(e["loss_H"][c] - e["loss_E"][c], abs=2e-6), s


@pytest.mark.parametrize(("dataset", "arms_id"), [("cub", "S3"), ("nabirds", "S5")])
def test_table_1_is_the_mean_and_sd_of_the_per_seed_rows(dataset, arms_id):
    arms = per_seed_arms(arms_id)
    main = PAPER_TABLES["main-1"]
    for key, cells in by_key("main-1").items():
        if key[0] != dataset:
            continue
        arm = key[2]
        for metric, (mean, sd) in cells.items():
            values = [arms[(arm, s)][metric] for s in SEEDS]
            # Half a unit of Table 1's rounding, plus what the per-seed rows' own rounding can move
            # (NABirds E_S middle: the rounded rows give SD 0.0027500, printed 0.0027).
            tol = HALF * unit(main) + 1e-6 + EPS
            assert mean == pytest.approx(statistics.fmean(values), abs=tol), (arm, metric)
            assert sd == pytest.approx(statistics.stdev(values), abs=tol), (arm, metric)


# -- the hier score in the summary tables ---------------------------------------------------------------


@pytest.mark.parametrize("table_id", ["main-1", "main-2", "S9", "S10"])
def test_hier_mean_is_the_mean_of_middle_and_high_means(table_id):
    t = PAPER_TABLES[table_id]
    for key, cells in by_key(table_id).items():
        middle, high, hier = (cells[c] for c in ("middle_mAP", "high_mAP", "hier_mAP"))
        if t.with_sd:
            middle, high, hier = middle[0], high[0], hier[0]
        # Each of the three is rounded: half a unit for hier, half for the mean of the other two.
        assert hier == pytest.approx((middle + high) / 2, abs=unit(t) + EPS), key


@pytest.mark.parametrize("table_id", ["S1", "S2"])
def test_tuning_score_is_the_mean_and_the_winner_the_best(table_id):
    t = PAPER_TABLES[table_id]
    rows = by_key(table_id)
    for key, cells in rows.items():
        assert cells["score"] == pytest.approx((cells["middle_mAP"] + cells["high_mAP"]) / 2, abs=1e-6), key
    for geometry in ("euclidean", "poincare"):
        ranked = sorted((k for k in rows if k[2] == geometry), key=lambda k: -rows[k]["score"])
        assert [k[3] for k in ranked] and {k[3] for k in ranked} == {0.07, 0.10, 0.20, 0.30, 0.50, 1.00}
        assert ranked[0][4] == "winner" and ranked[1][4] == "runner-up"
        assert all(k[4] is None for k in ranked[2:])
    assert len(t.rows) == 12


@pytest.mark.parametrize("table_id", ["S7", "S8"])
def test_recall_grows_with_k(table_id):
    for key, cells in by_key(table_id).items():
        means = [cells[f"R@{k}"][0] for k in (1, 5, 10, 20)]
        assert means == sorted(means), key


# -- the main text against the tables it restates -------------------------------------------------------


def test_section_5_2_restates_the_effects_tables():
    effects = {**by_key("S4"), **by_key("S6"), **by_key("S11")}
    for key, cells in by_key("sec-5.2").items():
        source = effects[key]
        assert cells["mean"] == source["mean"], key
        if cells["sd"] is not None:
            assert cells["sd"] == source["sd"], key
        if cells["positive_seeds"] is not None:
            assert cells["positive_seeds"] == sum(source[f"seed_{s}"] > 0 for s in SEEDS), key


def test_the_abstract_rounds_section_5_2():
    effects = by_key("sec-5.2")
    for key, cells in by_key("abstract").items():
        assert cells["mean"] == pytest.approx(round(effects[key]["mean"], 4), abs=EPS), key


@pytest.mark.parametrize(("dataset", "arms_id"), [("cub", "S3"), ("nabirds", "S5")])
def test_section_5_4_is_h_s_minus_e_s_of_the_per_seed_means(dataset, arms_id):
    arms = per_seed_arms(arms_id)
    for (d, _, contrast, metric), cells in by_key("sec-5.4").items():
        if d != dataset:
            continue
        plus, minus = CONTRASTS[contrast].plus, CONTRASTS[contrast].minus
        diff = statistics.fmean(arms[(plus, s)][metric] - arms[(minus, s)][metric] for s in SEEDS)  # type: ignore[index]
        assert cells["mean"] == pytest.approx(round(diff, 4), abs=EPS), (dataset, metric)


def test_section_5_5_gains_are_differences_of_its_means():
    means = {(k[0], k[3]): c["hier_mAP"][0] for k, c in by_key("sec-5.5").items()}
    for (dataset, _, _, contrast, metric), cells in by_key("sec-5.5-gains").items():
        if metric != "hier_mAP":
            continue  # the per-level gains have no printed level means
        plus, minus = contrast.split(" - ")
        assert cells["mean"] == pytest.approx(means[(dataset, plus)] - means[(dataset, minus)], abs=1e-4 + EPS)


def test_the_semantic_contrasts_are_differences_of_table_9():
    members = {"Full": "full", "Shuffled": "shuffled", "Leaf+Parent": "leaf-parent", "Leaf-only": "leaf-only"}
    s9 = {k[2]: c for k, c in by_key("S9").items()}
    for (_, _, contrast, metric), cells in by_key("sec-S9").items():
        plus, minus = (members[m] for m in contrast.split(" - "))
        diff = s9[plus][metric][0] - s9[minus][metric][0]
        assert cells["mean"] == pytest.approx(diff, abs=1e-4 + EPS), (contrast, metric)


def test_table_2_is_table_9s_means():
    s9 = by_key("S9")
    for key, cells in by_key("main-2").items():
        for metric, value in cells.items():
            assert value == s9[key][metric][0], (key, metric)


def test_the_curvature_contrasts_are_differences_of_table_10():
    members = {"Base": "base", "Near-flat": "near-flat", "Strong": "strong", "Small radius": "small-radius"}
    members |= {"Large radius": "large-radius", "Euclidean": "euclidean"}
    s10 = {k[2]: c for k, c in by_key("S10").items()}
    for (_, _, contrast, metric), cells in by_key("sec-S10").items():
        plus, minus = (members[m] for m in contrast.split(" - "))
        diff = s10[plus][metric][0] - s10[minus][metric][0]
        assert cells["mean"] == pytest.approx(diff, abs=1e-6 + EPS), contrast
        if cells["positive_seeds"] == 0:
            assert cells["mean"] < 0


# -- counts ---------------------------------------------------------------------------------------------


def test_taxonomy_and_split_counts_add_up():
    n = {(k[0], k[1]): c["value"] for k, c in by_key("sec-S1").items()}
    cub = {q: v for (d, q), v in n.items() if d == "cub"}
    nab = {q: v for (d, q), v in n.items() if d == "nabirds"}
    assert cub["exact_name_matches"] + cub["fuzzy_matches"] + cub["manual_aliases"] + cub["manual_verifications"] == cub["leaf_classes"]
    assert cub["train_images"] + cub["test_images"] == cub["images"]
    assert cub["single_class_middle_groups"] < cub["middle_groups"]
    assert sum(nab[f"{p}_leaf_classes"] for p in ("train", "val", "test")) == nab["leaf_classes"]
    assert sum(nab[f"{p}_middle_groups"] for p in ("train", "val", "test")) == nab["middle_groups"]
    assert nab["tune_train_images"] + nab["tune_gallery_images"] + nab["tune_query_images"] == nab["development_images"]
    assert nab["test_gallery_images"] + nab["test_query_images"] == nab["test_images"]
    s3 = by_key("sec-S3")
    for dataset, test_images in (("cub", cub["test_images"]), ("nabirds", nab["test_images"])):
        for s in SEEDS:
            assert s3[(dataset, s, None, "queries")]["value"] + s3[(dataset, s, None, "gallery")]["value"] == test_images
            for level in ("middle", "high"):
                assert s3[(dataset, s, level, "valid_queries")]["value"] <= s3[(dataset, s, None, "queries")]["value"]
    assert nab["test_query_images"] == s3[("nabirds", 42, None, "queries")]["value"]


def test_the_audit_table_agrees_with_the_counts_and_the_architecture():
    audit = {(k[0], k[1]): c["value"] for k, c in by_key("S12").items()}
    counts = by_key("sec-S1")
    samples = {"cub": counts[("cub", "train_images")]["value"], "nabirds": counts[("nabirds", "development_images")]["value"]}
    # 768 -> Linear(256) -> BN -> ReLU -> Dropout -> Linear(32) (supplement S4).
    params = (768 * 256 + 256) + 2 * 256 + (256 * 32 + 32)
    for dataset, n in samples.items():
        assert int(audit[(dataset, "Training samples")].replace(",", "")) == n
        assert int(audit[(dataset, "Trainable parameters/cell")].replace(",", "")) == params
        batch = int(audit[(dataset, "Batch size")])
        assert int(audit[(dataset, "Updates/epoch")]) == n // batch  # drop_last=True
    ball = {(k[0], k[1]): c["value"] for k, c in by_key("sec-S12").items()}
    for dataset in ("cub", "nabirds"):
        radius = 1 / math.sqrt(ball[(dataset, "curvature")])
        assert ball[(dataset, "ball_radius")] == pytest.approx(round(radius, 4), abs=EPS)
        assert ball[(dataset, "max_embedding_norm")] < ball[(dataset, "ball_radius")]


def test_section_5_4_shows_finer_down_highest_up_in_both_datasets():
    for (dataset, _, _, metric), cells in by_key("sec-5.4").items():
        assert (cells["mean"] > 0) == (metric == "high_mAP"), (dataset, metric)


def test_the_cub_outer_gain_is_the_mean_of_its_level_gains():
    gains = {k[4]: c["mean"] for k, c in by_key("sec-5.5-gains").items() if k[0] == "cub"}
    assert gains["hier_mAP"] == pytest.approx((gains["middle_mAP"] + gains["high_mAP"]) / 2, abs=1e-4)


def test_section_5_5_restates_the_curvature_contrasts():
    s10 = {k[2]: c["mean"] for k, c in by_key("sec-S10").items()}
    assert s10["Base - Near-flat"] == -0.000419  # Sec. 5.5: "slightly below ... (-0.000419)"
    assert s10["Strong - Base"] == -0.002314  # Sec. 5.5: "reduces it by a further 0.002314"


def test_section_4_restates_the_valid_query_ranges_and_run_counts():
    s3 = by_key("sec-S3")
    genus = [s3[("cub", s, "middle", "valid_queries")]["value"] for s in SEEDS]
    family = [s3[("cub", s, "high", "valid_queries")]["value"] for s in SEEDS]
    assert (min(genus), max(genus), min(family), max(family)) == (482, 487, 747, 750)  # Sec. 4
    audit = {(k[0], k[1]): c["value"] for k, c in by_key("S12").items()}
    for dataset in ("cub", "nabirds"):
        seeds = audit[(dataset, "Training seeds")].split("/")
        assert audit[(dataset, "Final training runs")] == f"{len(ARMS) * len(seeds)}/12 verified"
        qg = audit[(dataset, "Q/G seeds")].split("/")
        assert audit[(dataset, "Official Q/G cells")] == f"{len(ARMS) * len(seeds) * len(qg)}/36 verified"


# -- the digest a replication's tables stage is keyed by ------------------------------------------------


def test_the_digest_follows_the_numbers_not_the_prose():
    import dataclasses

    from hierconsole.study.analysis.paper_tables import PAPER_TABLES_DIGEST, tables_digest

    tables = list(PAPER_TABLES.values())
    assert tables_digest(tables) == PAPER_TABLES_DIGEST and len(PAPER_TABLES_DIGEST) == 64
    s3 = PAPER_TABLES["S3"]
    reworded = [dataclasses.replace(s3, title="another title", note="another note")]
    assert tables_digest(reworded) == tables_digest([s3])
    fixed = (s3.rows[0][:-1] + (0.532473,), *s3.rows[1:])
    assert tables_digest([dataclasses.replace(s3, rows=fixed)]) != tables_digest([s3])
