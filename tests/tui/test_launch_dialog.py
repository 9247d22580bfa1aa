"""The launch dialog: problems beside their field while it stays open, `--set` overrides from a list of
every option, a description that follows them, a question before anything is created."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Select

from hierconsole.study.db.storage import Store
from hierconsole.study.read import list_studies
from hierconsole.tui.messages import StudyLaunched
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.tui.screens.launch import LaunchDialog
from tests.tui.conftest import SIZE, make_app, settle, shown


def error_of(dialog: LaunchDialog, field: str) -> str:
    widget = dialog.query_one(f"#error-{field}")
    return str(widget.render()) if widget.display else ""


async def open_dialog(pilot) -> LaunchDialog:
    await settle(pilot, pilot.app)
    await pilot.press("l")
    await settle(pilot, pilot.app)
    dialog = pilot.app.screen
    assert isinstance(dialog, LaunchDialog)
    return dialog


async def test_problems_are_shown_beside_their_field_and_the_dialog_stays_open(fixed_copy):
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=(100, 40)) as pilot:
            dialog = await open_dialog(pilot)
            dialog.query_one("#epochs").value = "two"
            dialog.query_one("#set").value = "training.lr=-1 training.nope=3"
            await settle(pilot, app)
            await pilot.press("ctrl+s")
            await settle(pilot, app)
            assert app.screen is dialog
            assert "'two' is not a whole number" in error_of(dialog, "epochs")
            assert error_of(dialog, "seeds") == ""
            dialog.query_one("#epochs").value = "1"
            await settle(pilot, app)
            assert error_of(dialog, "epochs") == ""
            problems = error_of(dialog, "set")
            assert "training.lr" in problems and "training.nope: unknown key" in problems
        assert len(list_studies(store)) == 2


async def test_a_problem_only_the_dataset_reveals_is_shown_in_place(fixed_copy):
    """The demo preset asks for more test queries than the tiny set holds: said in the dialog."""
    messages = []
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=(100, 40), message_hook=messages.append) as pilot:
            dialog = await open_dialog(pilot)
            dialog.query_one("#dataset", Select).value = "tiny"
            dialog.query_one("#epochs").value = "1"
            await settle(pilot, app)
            await pilot.press("ctrl+s")
            await settle(pilot, app)
            assert isinstance(app.screen, ConfirmDialog)
            await pilot.press("y")
            await settle(pilot, app)
            assert app.screen is dialog
            assert "n_query" in shown(app) and "not launched" in shown(app)
            assert not any(isinstance(m, StudyLaunched) for m in messages)
        assert len(list_studies(store)) == 2


@pytest.mark.slow
async def test_overrides_from_the_option_list_launch_a_small_study(fixed_copy):
    messages = []
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=(100, 40), message_hook=messages.append) as pilot:
            dialog = await open_dialog(pilot)
            dialog.query_one("#dataset", Select).value = "tiny"
            dialog.query_one("#seeds").value = "7"
            await settle(pilot, app)
            options = dialog.query_one("#options", DataTable)
            keys = [k.value for k in options.rows]
            assert "evaluation.n_query" in keys and "training.lr" in keys
            # Choosing an option puts KEY=its value into the set field, to edit there.
            options.focus()
            options.move_cursor(row=keys.index("evaluation.n_query"))
            await pilot.press("enter")
            await settle(pilot, app)
            field = dialog.query_one("#set")
            assert field.value == "evaluation.n_query=200" and app.focused is field
            field.value = "evaluation.n_query=20 training.epochs=1"
            await settle(pilot, app)
            text = " ".join(str(dialog.query_one("#preset-description").render()).split())
            assert "1 seed [7]" in text and "1 epoch," in text
            assert "overrides: evaluation.n_query=20 training.epochs=1" in text
            await pilot.press("ctrl+s")
            await settle(pilot, app)
            assert isinstance(app.screen, ConfirmDialog)
            assert "Launch a new 'demo' study on dataset tiny: 1 seed" in shown(app)
            await pilot.press("y")
            await settle(pilot, app)
            await settle(pilot, app)
            assert not isinstance(app.screen, (LaunchDialog, ConfirmDialog))
            launched = [m for m in messages if isinstance(m, StudyLaunched)]
            assert launched and app.study_id == launched[0].study_id
        studies = list_studies(store)
        assert len(studies) == 3
        assert store.value("SELECT count(*) FROM jobs WHERE study_id = ?", [studies[-1].study_id]) >= 1


async def test_nothing_loading_can_be_chosen(open_store):
    app = make_app(open_store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l")
        dialog = app.screen
        assert isinstance(dialog, LaunchDialog)
        # Before the choices arrive there is no select to choose from; after, no blank entry.
        assert not dialog.query("#preset") or not dialog.query_one("#preset", Select)._allow_blank
        await settle(pilot, app)
        preset = dialog.query_one("#preset", Select)
        assert preset.value == "demo" and not preset._allow_blank
        assert all("loading" not in str(prompt) for prompt, _ in preset._options)


async def test_the_executor_is_chosen_in_the_dialog_and_checked_in_place(fixed_copy):
    """The executor and the Ray address are fields like the others: a bad address is said beside it, an
    address without the ray executor too, and nothing is created."""
    with Store(fixed_copy) as store:
        app = make_app(store)
        async with app.run_test(size=(100, 40)) as pilot:
            dialog = await open_dialog(pilot)
            executor = dialog.query_one("#executor", Select)
            assert [str(v) for _, v in executor._options] == ["local", "ray"] and executor.value == "local"
            dialog.query_one("#address").value = "auto"
            await settle(pilot, app)
            # The line `hierconsole run --ray-address auto` refuses it with (one check, in the front door).
            assert "--ray-address names the Ray cluster of --executor ray" in error_of(dialog, "address")
            executor.value = "ray"
            dialog.query_one("#address").value = "nowhere"
            await settle(pilot, app)
            await pilot.press("ctrl+s")
            await settle(pilot, app)
            assert app.screen is dialog
            assert "'nowhere': give `auto`" in error_of(dialog, "address")
            dialog.query_one("#address").value = "ray://head:10001"
            await settle(pilot, app)
            assert error_of(dialog, "address") == ""
        assert len(list_studies(store)) == 2


def test_a_ray_request_names_its_cluster_in_the_question():
    import importlib.util

    from hierconsole.tui.screens.launch import check_fields, launch_question
    from hierconsole.vocabulary import Executor

    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install 'hierconsole[ray]'): a ray request is refused")

    request, preset, _ = check_fields("demo", None, "1", "", "", "ray", "ray://head:10001")
    assert request is not None and preset is not None
    assert request.workers.executor == Executor.RAY and request.workers.ray_address == "ray://head:10001"
    question = launch_question(preset, "synthetic:demo", 0, request)
    assert "on the Ray cluster at ray://head:10001?" in question
    local, preset, _ = check_fields("demo", None, "1", "", "", "ray", "")
    assert local is not None and preset is not None
    assert "on a Ray instance started in this console" in launch_question(preset, "x", 0, local)
