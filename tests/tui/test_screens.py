"""Each view driven by the Pilot on fixed data: what it shows equals what the domain functions return."""

from __future__ import annotations

import numpy as np
from textual._context import active_app
from textual.widgets import DataTable, RichLog

from hierconsole.contract import events
from hierconsole.locations import study_dir
from hierconsole.study.analysis.effects import simple_effects
from hierconsole.study.analysis.redistribution import redistribution
from hierconsole.study.db.storage import Store
from hierconsole.study.read import job_events, list_datasets, per_seed
from hierconsole.study.read.audits import CHECKS
from hierconsole.styles import EFFECT_DIGITS
from hierconsole.tui.messages import JobEvents
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.tui.screens.export import ExportScreen
from hierconsole.tui.screens.import_dialog import ImportDialog
from hierconsole.tui.screens.run_detail import RunDetailScreen
from tests.deep_trees import inat_rows, write_inat_json
from tests.stores.fixed import COMPLETE, LIVE, SEEDS
from tests.tui.conftest import SIZE, make_app, settle, shown


def mean_sd(e) -> str:
    """An effect as the console and the CLI both show it (styles.EFFECT_DIGITS decimals)."""
    return f"{e.mean:+.{EFFECT_DIGITS}f} ± {e.sd:.{EFFECT_DIGITS}f}"


async def test_effects_show_the_domain_numbers_for_each_metric(open_store):
    table = per_seed(open_store, COMPLETE)
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=(80, 48)) as pilot:  # the effects table below the arm table, unscrolled
        await pilot.press("3")
        await settle(pilot, app)
        for metric, keys in (
            ("hier_mAP", ()),
            ("middle_mAP", ("m",)),
            ("middle_R@1", ("k",)),
            ("high_R@5", ("k", "m")),
        ):
            for key in keys:
                await pilot.press(key)
            await settle(pilot, app)
            text = shown(app)
            assert f"metric {metric}" in text
            effects = simple_effects(table, [metric])[metric]
            for name, e in effects.items():
                assert f"{name} " in text and mean_sd(e) in text, (metric, name)
                assert f"{e.positive}/{e.n}" in text
        await pilot.press("a")  # one aggregation only: the console says how to get another
        await pilot.pause()
        assert any("rescore" in n.message for n in app._notifications)


async def test_effects_fill_in_seed_by_seed(fixed_copy):
    """Metrics of a half-scored seed are left out; each completed seed appears when its events arrive."""
    with Store(fixed_copy) as store:
        store.execute(
            "CREATE TABLE held AS SELECT * FROM metrics WHERE study_id = ? AND seed <> 42", [COMPLETE]
        )
        store.execute("DELETE FROM metrics WHERE study_id = ? AND seed <> 42", [COMPLETE])

        def arrive(arms: tuple[str, ...]) -> None:
            """The evaluation job's metrics events for seed 2024: stored, then announced."""
            store.execute(
                "INSERT INTO metrics SELECT * FROM held WHERE seed = 2024 AND arm IN (SELECT unnest(?))",
                [list(arms)],
            )
            metrics = events.TestMetrics(
                run_id=f"{COMPLETE}/final-s2024/{arms[0]}",
                seed=2024,
                arm=arms[0],
                perturbation=42,
                aggregation="micro",
                posthoc=False,
                metrics={},
            )
            app.post_message(JobEvents(f"{COMPLETE}/evaluate", COMPLETE, [metrics]))

        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            assert "seeds scored 1/3" in shown(app)
            assert "(n=1)" in shown(app)

            arrive(("E_R", "H_R"))
            await settle(pilot, app)
            assert "seeds scored 1/3" in shown(app)

            arrive(("E_S", "H_S"))
            await settle(pilot, app)
            text = shown(app)
            assert "seeds scored 2/3" in text
            expected = simple_effects(
                per_seed(store, COMPLETE).filter(per_seed(store, COMPLETE)["seed"] != 3407)
            )
            assert mean_sd(expected["hier_mAP"]["geom_S"]) in text


async def test_aggregation_switch_shows_the_rescored_table(fixed_copy):
    with Store(fixed_copy) as store:
        # What a post-hoc re-score stores: the same cells under another aggregation, flagged post hoc.
        store.execute(
            "INSERT INTO metrics SELECT study_id, run_id, seed, arm, perturbation, 'macro', level, metric, "
            "value * 0.9, true FROM metrics WHERE study_id = ?",
            [COMPLETE],
        )
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            await settle(pilot, app)
            assert "aggregation micro of micro/macro" in shown(app)
            await pilot.press("a")
            await settle(pilot, app)
            text = shown(app)
            assert "aggregation macro (post-hoc)" in text
            macro = simple_effects(per_seed(store, COMPLETE, "macro"), ["hier_mAP"])["hier_mAP"]
            assert mean_sd(macro["loss_E"]) in text


async def test_redistribution_bars_per_level_and_seed(open_store):
    result = redistribution(per_seed(open_store, COMPLETE), "mAP")
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=(80, 60)) as pilot:
        await pilot.press("5")
        await settle(pilot, app)
        text = shown(app)
        for contrast, by_level in result.contrasts.items():
            verdict = "yes" if result.pattern[contrast] else "no"
            assert f"pattern {verdict} ({result.seeds_with_pattern[contrast]}/3)" in text
            for e in by_level.values():
                assert mean_sd(e) in text
                for value in e.per_unit.values():
                    assert f"{value:+.{EFFECT_DIGITS}f}" in text


async def test_a_failed_audit_cannot_be_missed(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert "4 Audits ✗1" in shown(app)  # flagged in the tabs of every view
        await pilot.press("4")
        await settle(pilot, app)
        text = shown(app)
        assert f"✗ 1 of {len(CHECKS)} checks FAILED: update_budget" in text
        assert "update_budget FAIL updates per cell [39, 40]" in text
        assert app.screen.query_one("#banner").has_class("-failed")


async def test_audits_of_a_running_study_are_pending_not_passed(open_store):
    app = make_app(open_store, study=LIVE)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("4")
        await settle(pilot, app)
        text = shown(app)
        assert "pending" in text and "evaluated now; recorded when the study completes" in text
        assert "FAIL" not in text


async def test_run_detail_shows_each_stored_event(open_store):
    job_id = f"{LIVE}/final-s2024"
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("down")  # jobs by seed: final-s42, final-s2024, final-s3407
        await pilot.press("enter")
        await settle(pilot, app)
        assert isinstance(app.screen, RunDetailScreen) and app.screen.job_id == job_id
        assert len(app.screen.query_one(RichLog).lines) == len(job_events(open_store, job_id))
        assert "running 3/5 ETA 3s" in shown(app)
        await pilot.press("escape")
        assert app.current_mode == "runs" and not isinstance(app.screen, RunDetailScreen)


async def test_export_writes_where_it_says_and_asks_before_overwriting(open_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    messages = []
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.press("6")
        await settle(pilot, app)
        target = tmp_path / f"{COMPLETE}-effects.csv"
        target.write_text("precious\n")
        await pilot.press("w")
        await settle(pilot, app)
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")
        await settle(pilot, app)
        assert target.read_text() == "precious\n"
        await pilot.press("w")
        await settle(pilot, app)
        await pilot.press("y")
        await settle(pilot, app)
        # A bubbling message reaches the hook once per node it passes: count each message once.
        written = {id(m): m for m in messages if isinstance(m, ExportScreen.Written)}
        assert [w.path for w in written.values()] == [target]
        assert target.read_text().startswith("metric,effect,definition")
        assert "✓ wrote table effects" in shown(app)


async def test_export_errors_are_shown_in_place(open_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        await settle(pilot, app)
        app.screen.query_one("#export-path").value = "no-such-folder/table.csv"
        await pilot.press("w")
        await settle(pilot, app)
        # The line names the absolute path, which wraps where tmp_path is long (as under pytest-xdist).
        assert "no-such-folderdoesnotexistfix:createitfirst" in "".join(shown(app).split())
    assert not (tmp_path / "no-such-folder").exists()


def _write_generic(folder, tiny_fs, *, bad: bool = False):
    np.save(folder / "features.npy", tiny_fs.features)
    rows = ["id,leaf,split"]
    for i, (id_, leaf, split) in enumerate(zip(tiny_fs.ids, tiny_fs.leaf, tiny_fs.split, strict=True)):
        name = tiny_fs.taxonomy.leaves[leaf] if not (bad and i < 2) else f"no-such-leaf-{i}"
        rows.append(f"{id_},{name},{('train', 'val', 'test')[split]}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    (folder / "taxonomy.csv").write_text(
        "leaf,middle,high\n" + "\n".join(",".join(r) for r in tiny_fs.taxonomy.rows()) + "\n"
    )


async def _fill_import(pilot, folder, name: str) -> None:
    await pilot.press("i")
    await pilot.pause()
    dialog = pilot.app.screen
    assert isinstance(dialog, ImportDialog)
    dialog.query_one("#name").value = name
    for field, file in (("features", "features.npy"), ("labels", "labels.csv"), ("taxonomy", "taxonomy.csv")):
        dialog.query_one(f"#path-{field}").value = str(folder / file)
    await pilot.press("ctrl+s")
    await settle(pilot, pilot.app)


async def test_import_problems_are_listed_in_place_and_nothing_is_written(fixed_copy, tmp_path, tiny_fs):
    _write_generic(tmp_path, tiny_fs, bad=True)
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("1")
            await settle(pilot, app)
            await _fill_import(pilot, tmp_path, "mine")
            assert isinstance(app.screen, ImportDialog)
            text = shown(app)
            assert "no-such-leaf-0" in text and "no-such-leaf-1" in text
        assert [d.dataset_id for d in list_datasets(store)] == ["tiny"]
        assert not (fixed_copy / "datasets" / "mine").exists()


async def test_import_registers_the_dataset_and_shows_its_taxonomy(fixed_copy, tmp_path, tiny_fs):
    _write_generic(tmp_path, tiny_fs)
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=(80, 40)) as pilot:
            await pilot.press("1")
            await settle(pilot, app)
            await _fill_import(pilot, tmp_path, "mine")
            assert not isinstance(app.screen, ImportDialog)
            table = app.screen.query_one("#datasets", DataTable)
            assert [k.value for k in table.rows] == ["tiny", "mine"]
            table.move_cursor(row=1)
            await settle(pilot, app)
            text = shown(app)
            assert "mine taxonomy" in text
            for line in tiny_fs.taxonomy.summary().lines():
                assert line in text
        assert [d.dataset_id for d in list_datasets(store)] == ["tiny", "mine"]


async def test_delete_asks_first(fixed_copy):
    with Store(fixed_copy) as store:
        app = make_app(store, study=COMPLETE)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("x")
            assert isinstance(app.screen, ConfirmDialog)
            await pilot.press("n")
            await settle(pilot, app)
            assert COMPLETE in [s.study_id for s in app.studies]
            await pilot.press("x")
            await pilot.press("y")
            await settle(pilot, app)
            await settle(pilot, app)
            assert [s.study_id for s in app.studies] == [LIVE]
            assert app.study_id == LIVE
        assert not study_dir(store.home, COMPLETE).exists()
        for table in ("studies", "jobs", "runs", "metrics", "audits", "splits"):
            assert store.one(f"SELECT count(*) FROM {table} WHERE study_id = ?", [COMPLETE])[0] == 0, table


async def test_delete_refuses_a_study_with_active_jobs(open_store):
    app = make_app(open_store, study=LIVE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("x", "y")
        await settle(pilot, app)
        assert any("cancel them first" in n.message for n in app._notifications)
        assert LIVE in [s.study_id for s in app.studies]


async def test_cancel_and_resume_need_a_suitable_job(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("down", "down")  # final-s3407, crashed
        await pilot.press("c")
        await pilot.pause()
        assert any("select a queued or running job" in n.message for n in app._notifications)
        await pilot.press("r")  # resumable, but this console runs no orchestrator
        await pilot.pause()
        assert any("no orchestrator" in n.message for n in app._notifications)
        assert "crashed: worker PID 4242 is gone" in shown(app)


async def test_selecting_a_study_makes_it_current(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert app.study_id == LIVE
        studies = app.screen.query_one("#studies", DataTable)
        studies.focus()
        studies.move_cursor(row=0)
        await pilot.press("enter")
        await settle(pilot, app)
        assert app.study_id == COMPLETE
        jobs = [k.value for k in app.screen.query_one("#jobs", DataTable).rows]
        assert jobs == [*(f"{COMPLETE}/final-s{seed}" for seed in SEEDS), f"{COMPLETE}/evaluate"]


async def test_a_view_loaded_as_the_console_closes_is_dropped_without_a_traceback(open_store):
    """A loading worker that finishes as the console quits (q, SIGTERM, a browser tab closed) posts its
    result to a screen whose widgets Textual's shutdown has already removed: the served console printed
    a NoMatches traceback as it ended. The real screens, after a real shutdown, take such a message."""
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("4")
        await settle(pilot, app)
        audits = app.screen
        await pilot.press("1")
        await settle(pilot, app)
        datasets = app.screen
        assert audits.query("#banner") and datasets.query("#welcome")
    # As in a real shutdown, the screens still find their app (run_test's exit has already reset it).
    active_app.set(app)
    assert not app.is_running and not audits.query("#banner")  # Textual removed the widgets
    audits._loaded(audits.Loaded(None, [], False))
    datasets._loaded(datasets.Loaded([]))


def _write_inat(folder) -> None:
    """A seven-rank iNaturalist train/val pair (the published JSON layout) and features keyed by image id."""
    rng = np.random.default_rng(3)
    rows = inat_rows(12, rng)
    train_ids, val_ids = list(range(100, 148)), list(range(900, 924))
    write_inat_json(folder / "train.json", rows, train_ids, [i % 12 for i in range(48)])
    write_inat_json(folder / "val.json", rows, val_ids, [i % 12 for i in range(24)])
    ids = np.array([str(i) for i in train_ids + val_ids])
    np.savez(folder / "f.npz", features=rng.standard_normal((len(ids), 8)).astype(np.float32), ids=ids)


async def _fill_inat(pilot, folder, levels: str) -> ImportDialog:
    await pilot.press("i")
    await pilot.pause()
    dialog = pilot.app.screen
    assert isinstance(dialog, ImportDialog)
    dialog.query_one("#kind-inat").value = True
    await pilot.pause()
    dialog.query_one("#name").value = "inat"
    for field, value in (("features", folder / "f.npz"), ("train", folder / "train.json"),
                         ("val", folder / "val.json"), ("levels", levels)):  # fmt: skip
        dialog.query_one(f"#path-{field}").value = str(value)
    await pilot.press("ctrl+s")
    await settle(pilot, pilot.app)
    return dialog


async def test_import_an_inat_file_keeps_the_ranks_asked_for(fixed_copy, tmp_path):
    _write_inat(tmp_path)
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=(80, 40)) as pilot:
            await pilot.press("1")
            await settle(pilot, app)
            await _fill_inat(pilot, tmp_path, "species,genus,family,order,phylum")  # a subset, finest first
            assert not isinstance(app.screen, ImportDialog), shown(app)
            text = shown(app)
            assert "5 · 12→" in text  # five levels, twelve species
        (info,) = [d for d in list_datasets(store) if d.dataset_id == "inat"]
        assert info.levels.codes == ("species", "genus", "family", "order", "phylum")


async def test_import_an_inat_file_refuses_a_rank_out_of_order_in_place(fixed_copy, tmp_path):
    _write_inat(tmp_path)
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("1")
            await settle(pilot, app)
            await _fill_inat(pilot, tmp_path, "genus,species")
            assert isinstance(app.screen, ImportDialog)
            assert "finest first" in shown(app)
        assert [d.dataset_id for d in list_datasets(store)] == ["tiny"]
        assert not (fixed_copy / "datasets" / "inat").exists()
