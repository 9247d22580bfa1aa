"""Every JSON document the CLI prints names its shape's version (issue 40, item 8): `effects --json` once
moved its effects under "effects" with no word to the scripts that read it. The commands are enumerated from
the parser, so a command that gains `--json` without a run here fails this test."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from hierconsole.cli import build_parser, main
from hierconsole.present.json_output import JSON_SCHEMA, SCHEMA_KEY
from tests.present.report import conftest as report_stores
from tests.present.report.conftest import FAMILY
from tests.stores.fixed import COMPLETE

report_home = report_stores.report_home  # the store these commands read: a complete study and a family


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _prints_json(parser: argparse.ArgumentParser) -> bool:
    """A `--json` option, or an option whose choices include json (a JSON-lines stream), here or in a
    subcommand of its own (`extract cub|nabirds|files`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if any(_prints_json(p) for p in action.choices.values()):
                return True
        elif "--json" in action.option_strings or "json" in (action.choices or ()):
            return True
    return False


def _json_commands() -> set[str]:
    return {name for name, parser in _subcommands(build_parser()).items() if _prints_json(parser)}


def _scoring_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    leaf = rng.integers(0, 4, 40)
    labels = np.stack([leaf, leaf % 2, np.zeros_like(leaf)], axis=1)
    path = tmp_path / "emb.npz"
    np.savez(path, query=rng.standard_normal((10, 4)).astype(np.float32), gallery=rng.standard_normal((30, 4)).astype(np.float32),
             query_labels=labels[:10], gallery_labels=labels[10:])  # fmt: skip
    return path


# Each command's JSON invocations over the report store (a complete study and a family).
RUNS: dict[str, list[list[str]]] = {
    "effects": [["effects", COMPLETE, "--json"], ["effects", FAMILY, "--json"]],
    "contrast": [["contrast", FAMILY, "--json"], ["contrast", f"{FAMILY}:base", f"{FAMILY}:strong", "--json"]],
    "families": [["families", "--json"], ["families", FAMILY, "--json"]],
    "score": [["score", "{scoring}", "--json"]],
}
# A JSON-lines stream: `schema` is on every record; running it needs images and a backbone, so it is
# covered where extraction is (tests/extraction), and here by its writer's one definition.
STREAMS = {"extract"}


def test_every_json_command_is_covered():
    assert _json_commands() == set(RUNS) | STREAMS


@pytest.mark.parametrize("argv", [a for runs in RUNS.values() for a in runs], ids=" ".join)
def test_every_json_document_carries_the_schema(argv, report_home, tmp_path, capsys):
    argv = [a.replace("{scoring}", str(_scoring_file(tmp_path))) for a in argv]
    home = [] if argv[0] == "score" else ["--home", str(report_home)]
    assert main([*home, *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert next(iter(doc)) == SCHEMA_KEY and doc[SCHEMA_KEY] == JSON_SCHEMA


def test_the_extraction_stream_puts_the_schema_on_every_record():
    import inspect

    from hierconsole.cli import extract

    # The one writer of its records goes through json_text, which puts `schema` first.
    assert "json_text({\"done\": done, \"total\": total}" in inspect.getsource(extract)
