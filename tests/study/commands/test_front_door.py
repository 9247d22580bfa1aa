"""One front door: the CLI, the notebook and the console refuse the same bad launch input with the same
line (each check lives once, in `study.commands`), and nothing is created. The CLI runs as a real
subprocess, the notebook through its API, the console through Textual's pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import hierconsole as hc
from hierconsole.errors import HierconsoleError
from hierconsole.study.db.storage import Store
from hierconsole.study.read import list_studies
from hierconsole.tui.screens.dialogs import ConfirmDialog
from hierconsole.tui.screens.launch import LaunchDialog
from tests.reliability.conftest import cli, one_line_error, tree_digest
from tests.tui.conftest import make_app, settle

pytestmark = pytest.mark.slow  # the CLI in subprocesses

HAS_CUDA = torch.cuda.is_available()


def the_line(text: str, marker: str) -> str:
    """The one line of `text` that says `marker`, without the prefix a front end puts before it."""
    (line,) = [ln for ln in text.splitlines() if marker in ln]
    line = line.strip()
    for prefix in ("error: ", "↳ ", "not launched: ", "- "):
        line = line.removeprefix(prefix)
    return line


async def console_says(home: Path, field: str, value: str, marker: str) -> str:
    """Type `value` into the launch dialog's `field`, launch (saying yes to the question if one comes),
    and return the line the dialog shows about `marker`; the dialog stays open and nothing is created."""
    with Store(home) as store:
        app = make_app(store)
        async with app.run_test(size=(120, 50)) as pilot:
            await settle(pilot, app)
            await pilot.press("l")
            await settle(pilot, app)
            dialog = app.screen
            assert isinstance(dialog, LaunchDialog)
            dialog.query_one(f"#{field}").value = value
            await settle(pilot, app)
            await pilot.press("ctrl+s")
            await settle(pilot, app)
            if isinstance(app.screen, ConfirmDialog):  # a problem only the store or the machine reveals
                await pilot.press("y")
                await settle(pilot, app)
            assert app.screen is dialog
            shown = [
                str(w.render())
                for w in dialog.query(".field-error")
                if w.display and marker in str(w.render())
            ]
            assert len(shown) == 1, shown
            return the_line(shown[0], marker)
        assert len(list_studies(store)) == 2


# (CLI flags, notebook keywords, console field and text, the words that find the line)
CASES = {
    "bad-set-value": (
        ["--set", "training.lr=-1"], {"values": {"training.lr": -1}}, ("set", "training.lr=-1"), "training.lr",
    ),
    "unknown-key": (
        ["--set", "training.nope=3"], {"training__nope": 3}, ("set", "training.nope=3"), "training.nope",
    ),
    "unknown-device": (
        ["--set", "compute.device=tpu"], {"values": {"compute.device": "tpu"}}, ("set", "compute.device=tpu"),
        "compute.device",
    ),
    "absent-device": (
        ["--set", "compute.device=cuda"], {"values": {"compute.device": "cuda"}}, ("set", "compute.device=cuda"),
        "but this machine's torch",
    ),
    "missing-dataset": (
        ["--set", "data.dataset=missing"], {"values": {"data.dataset": "missing"}},
        ("set", "data.dataset=missing"), "no dataset 'missing'",
    ),
    "epochs-not-a-number": (["--epochs", "two"], {"epochs": "two"}, ("epochs", "two"), "'two'"),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
async def test_the_cli_the_notebook_and_the_console_refuse_a_bad_input_with_the_same_line(fixed_copy, case):
    if case == "absent-device" and HAS_CUDA:
        pytest.skip("CUDA is present: compute.device=cuda is not a bad value here")
    flags, keywords, (field, value), marker = CASES[case]
    before = tree_digest(fixed_copy)

    done = cli(fixed_copy, "run", "demo", *flags)
    one_line_error(done)
    by_cli = the_line(done.stderr, marker)
    with pytest.raises(HierconsoleError) as refused:
        hc.open_home(fixed_copy, writable=True).run("demo", **keywords)
    by_notebook = the_line(str(refused.value), marker)
    by_console = await console_says(fixed_copy, field, value, marker)

    assert by_cli == by_notebook == by_console
    assert tree_digest(fixed_copy) == before  # nothing created by any of them


async def test_a_malformed_override_is_the_same_line_in_the_cli_and_the_console(fixed_copy):
    """`--set garbage` (the notebook takes typed values, so it has no such text to mistype)."""
    by_cli = the_line(one_line_error(cli(fixed_copy, "run", "demo", "--set", "garbage")), "KEY=VALUE")
    assert by_cli == "--set: expected KEY=VALUE (e.g. training.lr=1e-4), got 'garbage'"
    assert await console_says(fixed_copy, "set", "garbage", "KEY=VALUE") == by_cli
