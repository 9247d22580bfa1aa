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


def test_only_global_options_are_the_console_or_the_version():
    from hierconsole.cli import only_global_options

    for argv in ([], ["--home", "h"], ["--home=h", "--wide"], ["--version"], ["--wide", "--version"]):
        assert only_global_options(argv), argv
    for argv in (["--home"], ["--help"], ["-h"], ["runs"], ["--home", "h", "runs"], ["--verbose"]):
        assert not only_global_options(argv), argv
    assert build_parser(["--home", "h"]).parse_args(["--home", "h"]).command is None


@pytest.mark.slow  # a subprocess
def test_the_version_imports_no_command_module(tmp_path):
    # It built every command's parser first (polars, duckdb and the store imported: 0.38 s against 0.05 s).
    code = (
        "import sys\nfrom hierconsole.cli import COMMAND_MODULES, main\ntry:\n    main(['--version'])\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "loaded = {f'hierconsole.cli.{m}' for m in COMMAND_MODULES if m != 'completion'} | {'polars', 'duckdb'}\n"
        "print(code, sorted(loaded & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hierconsole ")
    assert done.stdout.strip().splitlines()[-1] == "0 []"
