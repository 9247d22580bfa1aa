"""The parser a command builds: only its own module's, and the same for that command as the full one."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from hierconsole.cli import COMMAND_MODULES, COMMANDS, build_parser, command_of


def _registered(module: str) -> list[str]:
    sub = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(f"hierconsole.cli.{module}").register(sub)
    return list(sub.choices)


def test_the_index_names_every_command_and_its_module():
    registered = {command: module for module in COMMAND_MODULES for command in _registered(module)}
    assert registered == COMMANDS


def test_the_command_is_the_first_word_after_the_global_options():
    assert command_of(["--home", "h", "--wide", "runs", "demo"]) == "runs"
    assert command_of(["--home=h", "effects", "--json"]) == "effects"
    assert command_of(["studies"]) == "studies"
    for argv in ([], ["--help"], ["--version"], ["rnus"], ["--home", "runs"], ["-h", "runs"]):
        assert command_of(argv) is None, argv


def test_a_command_parses_as_the_full_parser_parses_it():
    argv = ["--home", "h", "effects", "demo", "--json", "--precision", "4"]
    one, full = build_parser(argv), build_parser()
    assert vars(one.parse_args(argv)) == vars(full.parse_args(argv))
    assert one.format_usage() == full.format_usage()


@pytest.mark.slow  # a subprocess
def test_a_read_command_imports_neither_polars_nor_numpy(tmp_path):
    code = (
        "import sys; from hierconsole.cli import main; code = main(['--home', sys.argv[1], 'runs']); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'polars', 'numpy', 'torch', 'textual'}))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
