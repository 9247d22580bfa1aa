"""Each family of audits judged on hand-built evidence, no store: a check is a pure function of what the read
layer hands it (study.read.audit_evidence), so its pass and its failure are shown here without training."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from hierconsole.datasets.splits import index_sha256
from hierconsole.study.analysis.audits import baselines, fairness, protocol, seal, tuning
from hierconsole.study.analysis.audits.result import Study
from hierconsole.study.analysis.lock import LockInputs, lock_digest
from hierconsole.vocabulary import HIER_AUTHORS, HIER_STYLE
from tests.tiny import tiny_preset

SID = "s"
PARAMS = fairness.expected_trainable(16, 32, 8)  # tiny_preset: hidden 32, out_dim 8


def study(**values: Any) -> Study:
    preset = tiny_preset(**values)
    return Study(SID, preset, preset.to_dict())


def run(seed: int, arm: str, **columns: Any) -> dict[str, Any]:
    return {
        "run_id": f"{SID}/final-s{seed}/{arm}", "job_id": f"{SID}/final-s{seed}", "seed": seed, "arm": arm,
        "geometry": "euclidean", "trainable_params": PARAMS, "init_sha256": f"init-{seed}", "updates": 4,
        "final_sha256": f"end-{seed}-{arm}", "reload_max_diff": 0.0, **columns,
    }  # fmt: skip


def finals(**columns: Any) -> list[dict[str, Any]]:
    return [run(seed, arm, **columns) for seed in (42, 2024) for arm in ("E_R", "H_R", "E_S", "H_S")]


def cells(runs: list[dict[str, Any]], s: Study | None = None, train_rows: int | None = 64) -> fairness.FinalCells:
    return fairness.FinalCells(s or study(), runs, 16, ["finished", "finished"], train_rows)


# fairness


def test_parameters_init_and_budget_pass_on_equal_cells_and_name_the_odd_one():
    even = cells(finals())
    assert fairness.trainable_parameters(even).ok is True
    assert fairness.same_init_within_seed(even).ok is True
    budget = fairness.update_budget(even)  # 64 rows / 32 per batch x 2 epochs
    assert budget.ok is True and budget.evidence == "updates per cell [4]; expected floor(64/32) x 2 = 4"

    odd = finals()
    odd[1] = run(42, "H_R", trainable_params=999, init_sha256="other", updates=3)
    check = fairness.trainable_parameters(cells(odd))
    assert check.ok is False and "final-s42/H_R has 999" in check.evidence
    check = fairness.same_init_within_seed(cells(odd))
    assert check.ok is False and "seed 42: final-s42/H_R starts from other, the other cells from init-42" in check.evidence
    check = fairness.update_budget(cells(odd))
    assert check.ok is False and check.evidence.endswith("; final-s42/H_R made 3")


def test_a_check_without_its_evidence_is_pending_not_passed():
    assert fairness.trainable_parameters(cells([])).ok is None
    assert fairness.update_budget(cells(finals(updates=None))).ok is None
    assert fairness.fixed_thread_count(fairness.FinalJobs([], {})).ok is None


def test_one_thread_count_and_device_setup_or_the_odd_job_is_named():
    jobs = [(f"{SID}/final-s42", 1, "cpu"), (f"{SID}/final-s2024", 1, "cpu")]
    assert fairness.fixed_thread_count(fairness.FinalJobs(jobs, {})).ok is True
    jobs[1] = (f"{SID}/final-s2024", 4, "cpu")
    check = fairness.fixed_thread_count(fairness.FinalJobs(jobs + [(f"{SID}/final-s7", 1, "cpu")], {}))
    assert check.ok is False and "final-s2024 ran with 4 thread(s) on cpu, the others with 1 on cpu" in check.evidence


def test_a_reload_that_is_not_exact_fails():
    assert fairness.checkpoint_reload_exact(cells(finals())).ok is True
    odd = finals()
    odd[0] = run(42, "E_R", reload_max_diff=0.5)
    check = fairness.checkpoint_reload_exact(cells(odd))
    assert check.ok is False and "final-s42/E_R differs by 0.5" in check.evidence


# seal


def qg(scored: list[tuple[str, int]]) -> seal.QgScores:
    return seal.QgScores(
        scored, [("qg:2024", 2024, "b" * 64), ("qg:42", 42, "a" * 64)], [r["run_id"] for r in finals()], []
    )


def test_every_cell_on_every_registered_qg_split_or_the_gap_is_named():
    every = [(r["run_id"], p) for r in finals() for p in (42, 2024)]
    check = seal.qg_splits_identical(qg(every))
    assert check.ok is True and check.evidence.endswith("cells per split: [8, 8]")
    check = seal.qg_splits_identical(qg(every[1:]))
    assert check.ok is False and "final-s42/E_R lacks Q/G perturbation(s) 42" in check.evidence
    assert seal.qg_splits_identical(qg([])).ok is None


def test_the_test_read_after_the_lock_passes_and_before_it_fails():
    lock, job = datetime(2027, 1, 15, 10, 2), {"job_id": f"{SID}/final-s42", "state": "finished", "finished_at": datetime(2027, 1, 15, 10, 1)}
    assert seal.test_read_after_lock(seal.TestReads(lock, datetime(2027, 1, 15, 10, 3), [job])).ok is True
    check = seal.test_read_after_lock(seal.TestReads(lock, datetime(2027, 1, 15, 10, 1, 30), [job]))
    assert check.ok is False and "before the lock at 2027-01-15 10:02:00" in check.evidence
    assert seal.test_read_after_lock(seal.TestReads(lock, None, [job])).ok is None


def test_a_job_handed_a_test_index_fails_naming_the_file_and_part():
    clean = seal.HandedSplits(f"{SID}/final-s42", "final", (), {"train": {"fit": np.array([0, 1, 2])}})
    test = np.array([7, 8, 9])
    assert seal.tuning_never_read_test(seal.TestIsolation(test, [clean])).ok is True
    leaky = seal.HandedSplits(f"{SID}/final-s42", "final", (), {"train": {"fit": np.array([0, 8, 9])}})
    check = seal.tuning_never_read_test(seal.TestIsolation(test, [leaky]))
    assert check.ok is False and check.evidence == "final-s42 train.fit holds 2 official-test indices"


def test_the_lock_hash_matches_until_a_locked_fact_changes():
    inputs = LockInputs("p" * 64, [("protocol", "x")], [(f"{SID}/final-s42/E_R", f"{SID}/final-s42", "E_R", "end")], False, {}, {}, None)
    digest, missing = lock_digest(inputs)
    assert seal.lock_hash_matches(seal.LockCheck(digest, digest, missing)).ok is True
    changed, _ = lock_digest(LockInputs(**{**inputs.__dict__, "splits": [("protocol", "y")]}))
    check = seal.lock_hash_matches(seal.LockCheck(digest, changed, []))
    assert check.ok is False and f"recomputed {changed[:12]}, recorded at the lock {digest[:12]}" in check.evidence
    assert seal.lock_hash_matches(seal.LockCheck(None, "", [])).ok is None


# tuning


def reuse(ends: dict[str, str], weights: str) -> tuning.TuningReuse:
    handed = {f"{SID}/final-s{seed}": [("train split", f"/h/{SID}/splits/train.npz")] for seed in (42, 2024)}
    return tuning.TuningReuse(
        finals=finals(),
        tuning_dirs={f"{SID}/tune": f"/h/{SID}/tune"},
        final_dirs={job: f"/h/{job}" for job in handed},
        ends=ends,
        handed=handed,
        scored=[(f"{SID}/final-s42/E_R", weights, weights)],
    )


def test_no_tuning_state_reaches_a_final_run_or_the_test():
    check = tuning.tuning_checkpoints_not_reused(reuse({"tuned": f"{SID}/tune/E_R"}, f"/h/{SID}/final-s42/m.pt"))
    assert check.ok is True and check.evidence.endswith("all 1 scored model load final jobs' files")
    check = tuning.tuning_checkpoints_not_reused(reuse({"end-42-E_R": f"{SID}/tune/E_R"}, f"/h/{SID}/tune/m.pt"))
    assert check.ok is False
    assert "final-s42/E_R ends in the state of tuning run tune/E_R" in check.evidence
    assert "evaluation scores final-s42/E_R from tuning job tune's folder" in check.evidence


def test_finals_trained_from_scratch_or_the_continued_run_is_named():
    s = study()
    epochs = {r["run_id"]: [(1, 2), (2, 4)] for r in finals()}
    evidence = tuning.FromScratch(s, finals(), 64, epochs, ["init-42"])
    assert tuning.finals_retrained_from_scratch(evidence).ok is True
    epochs[f"{SID}/final-s2024/H_S"] = [(1, 4), (2, 6)]
    check = tuning.finals_retrained_from_scratch(tuning.FromScratch(s, finals(), 64, epochs, ["init-42"]))
    assert check.ok is False and "final-s2024/H_S had made 4 updates by epoch 1, not 1 x 2" in check.evidence


def test_fixed_temperatures_pass_the_candidate_checks_vacuously():
    check = tuning.tuning_same_init(tuning.Candidates(study(), [], [], 16, []))
    assert check.ok is True and check.evidence == "no temperature tuning: the preset fixes every temperature"


# protocol counts


def counts(s: Study, leaves: int) -> protocol.SplitCounts:
    return protocol.SplitCounts(
        preset=s.preset,
        protocol={"sizes": {"train": 64, "test": 30}, "params": {}},
        tuning_sizes={"fit": 40, "query": 10, "gallery": 10},
        qg_sizes=[{"query": 10, "gallery": 20}, {"query": 10, "gallery": 20}],
        development_fit=64,
        final_fit=64,
        groups=(leaves, 3, 2),
    )


def test_the_declared_counts_match_the_realised_split_or_each_offender_is_named():
    s = study(**{"expected.leaves": 12, "expected.test_images": 30})
    check = protocol.expected_counts(counts(s, 12))
    assert check.ok is True and check.evidence == "2 of 2 declared counts match"
    check = protocol.expected_counts(counts(s, 11))
    assert check.ok is False and check.evidence == "1 of 2 declared counts match; leaves is 11, expected 12"
    assert protocol.realised_counts(counts(s, 11))["query_images"] == 10


def test_a_shuffle_the_preset_asks_for_but_the_store_lacks_fails():
    assert protocol.taxonomy_shuffle_development_only(protocol.ShuffleControl(asked=False, record=None)).ok is True
    check = protocol.taxonomy_shuffle_development_only(protocol.ShuffleControl(asked=True, record=None))
    assert check.ok is False and check.evidence == "the preset asks for a taxonomy shuffle but the store records none"


# baselines


def test_pca_fitted_on_the_training_samples_only():
    s = study(**{"evaluation.baselines": ["pca"]})
    train, test = np.arange(10), np.arange(10, 15)
    fit = {"run_id": f"{SID}/evaluate/pca", "fitted_sha256": index_sha256(train), "n_fitted": 10, "test_overlap": 0, "dim_in": 16, "dim_out": 8}
    check = baselines.pca_fitted_on_training_only(baselines.PcaFit(s, f"{SID}/evaluate/pca", fit, train, test))
    assert check.ok is True and check.evidence.startswith("16-D -> 8-D on 10 training samples")
    leaked = {**fit, "fitted_sha256": index_sha256(np.arange(12)), "test_overlap": 2}
    check = baselines.pca_fitted_on_training_only(baselines.PcaFit(s, f"{SID}/evaluate/pca", leaked, train, test))
    assert check.ok is False and "2 fitted samples are official-test samples" in check.evidence
    assert baselines.pca_fitted_on_training_only(baselines.PcaFit(s, f"{SID}/evaluate/pca", None)).ok is None
    assert baselines.pca_fitted_on_training_only(baselines.PcaFit(study(), f"{SID}/evaluate/pca", None)).ok is True


def test_the_hier_arm_under_the_authors_recipe_has_their_head():
    check = baselines.hier_authors_recipe(cells(finals()))
    assert check.ok is True and f"no {HIER_STYLE} arm trained by the authors' recipe" in check.evidence
    s = study(**{"evaluation.baselines": [HIER_STYLE], "baselines.hier.recipe": HIER_AUTHORS})
    head = baselines.authors_head_trainable(16, 128)
    hier = [run(seed, HIER_STYLE, trainable_params=head) for seed in (42, 2024)]
    assert baselines.hier_authors_recipe(cells(finals() + hier, s)).ok is True
    hier[1] = run(2024, HIER_STYLE, trainable_params=PARAMS)
    check = baselines.hier_authors_recipe(cells(finals() + hier, s))
    assert check.ok is False and f"final-s2024/{HIER_STYLE} has {PARAMS:,}" in check.evidence
