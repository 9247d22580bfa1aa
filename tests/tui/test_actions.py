"""One registry drives bindings, footer, command palette and help: each must show exactly its entries."""

from __future__ import annotations

from collections import Counter

from textual.binding import Binding

from hierconsole.tui.actions import (
    ACTIONS,
    REPLICATION_VIEW,
    SCOPES,
    VIEW_MODES,
    ActionsProvider,
    actions_for,
    bindings_for,
    help_rows,
)
from hierconsole.tui.app import HierConsole
from hierconsole.tui.screens.audits import AuditsScreen
from hierconsole.tui.screens.datasets import DatasetsScreen
from hierconsole.tui.screens.dialogs import ConfirmDialog, QuitDialog
from hierconsole.tui.screens.effects import EffectsScreen
from hierconsole.tui.screens.export import ExportScreen
from hierconsole.tui.screens.families import FamiliesScreen
from hierconsole.tui.screens.help import HelpScreen
from hierconsole.tui.screens.import_dialog import ImportDialog
from hierconsole.tui.screens.launch import LaunchDialog
from hierconsole.tui.screens.redistribution import RedistributionScreen
from hierconsole.tui.screens.replication import ReplicationScreen
from hierconsole.tui.screens.run_detail import RunDetailScreen
from hierconsole.tui.screens.runs import RunsScreen
from tests.stores.fixed import COMPLETE
from tests.tui.conftest import SIZE, make_app, settle, shown

NODES = {
    "app": HierConsole,
    "datasets": DatasetsScreen,
    "runs": RunsScreen,
    "run_detail": RunDetailScreen,
    "effects": EffectsScreen,
    "audits": AuditsScreen,
    "redistribution": RedistributionScreen,
    "export": ExportScreen,
    "families": FamiliesScreen,
    "replication": ReplicationScreen,
    "help": HelpScreen,
    "import": ImportDialog,
    "launch": LaunchDialog,
    "confirm": ConfirmDialog,
    "quit": QuitDialog,
}


def test_every_scope_has_a_node_whose_bindings_are_the_registry():
    assert set(NODES) == set(SCOPES) == {a.scope for a in ACTIONS}
    for scope, node in NODES.items():
        assert bindings_for(scope) == node.BINDINGS, scope
        assert node is HierConsole or scope == node.SCOPE


def test_every_handler_exists_on_its_node():
    for a in ACTIONS:
        name = a.handler.split("(", 1)[0]
        assert callable(getattr(NODES[a.scope], f"action_{name}", None)), a.id


def test_keys_are_unique_within_a_scope_and_never_shadow_the_global_ones():
    global_actions = {k: a for a in actions_for("app") for k in a.key.split(",")}
    for scope in SCOPES:
        keys = Counter(k for a in actions_for(scope) for k in a.key.split(","))
        assert max(keys.values()) == 1, (scope, keys)
        if scope != "app":
            # A view may take a global key over only for the same meaning (q in the quit question).
            for a in actions_for(scope):
                for k in a.key.split(","):
                    assert k not in global_actions or global_actions[k].description == a.description, a.id
    assert len({a.id for a in ACTIONS}) == len(ACTIONS)


def test_one_binding_per_meaning_across_views():
    """A key means one thing everywhere: r is never resume in one view and reload in another."""
    meanings: dict[str, set[str]] = {}
    for a in ACTIONS:
        for k in a.key.split(","):
            meanings.setdefault(k, set()).add(a.description)
    assert {k: d for k, d in meanings.items() if len(d) > 1} == {}


def test_help_lists_every_action():
    rows = list(help_rows())
    assert len(rows) == len(ACTIONS)
    assert {(key, description) for _, key, description, _ in rows} == {
        (a.key_display or a.key, a.description) for a in ACTIONS
    }


async def test_footer_shows_the_screen_and_global_actions(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await settle(pilot, app)
        footer = shown(app).rsplit("\n", 1)[-1]
        for a in [*actions_for("effects"), *actions_for("app")]:
            if a.group is None:
                assert f"{a.key_display or a.key} {a.description}" in footer, a.id
        # The view keys are on the tab line, beside each view's title, not in the footer.
        assert "1 Datasets 2 Runs 3 Effects 4 Audits" in shown(app)


async def test_help_screen_and_palette_come_from_the_registry(open_store):
    app = make_app(open_store, study=COMPLETE)
    async with app.run_test(size=(100, 60)) as pilot:
        await pilot.press("3")
        await settle(pilot, app)
        provider = ActionsProvider(app.screen)
        titles = [hit.text for hit in [h async for h in provider.discover()]]
        views = {mode for mode, _ in VIEW_MODES} | {REPLICATION_VIEW[1]}
        expected = [a for a in ACTIONS if a.scope == "app" or a.scope in views]
        assert titles == [f"{SCOPES[a.scope]}: {a.description}  ({a.key_display or a.key})" for a in expected]
        # Choosing an entry runs the same action as its key.
        hits = [h async for h in provider.search("Effects: metric")]
        await hits[0].command()
        await settle(pilot, app)
        assert app.screen.selection.metric == "middle_mAP"
        # An action of another view: the palette goes there and runs it.
        hits = [h async for h in provider.search("Audits: reload")]
        assert "[^r]" in str(hits[0].help)
        await hits[0].command()
        await settle(pilot, app)
        assert app.current_mode == "audits"
        await pilot.press("3")
        await settle(pilot, app)

        await pilot.press("question_mark")
        await settle(pilot, app)
        text = shown(app)
        for a in ACTIONS:
            assert a.help in text, a.id
        await pilot.press("escape")
        assert app.current_mode == "effects" and isinstance(app.screen, EffectsScreen)


def test_view_bindings_are_grouped_and_left_to_the_tab_line():
    views = [b for b in bindings_for("app") if b.group is not None]
    assert [b.key for b in views] == list("12345678")
    # Families (7) is off the footer and the tab line (replication, 8, is on it); the footer holds none.
    assert all(isinstance(b, Binding) and b.group == views[0].group and not b.show for b in views)
