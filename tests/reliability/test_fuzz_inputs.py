"""Every command that reads a user's file, fed a few hundred hostile variants of a valid one: random bytes,
truncations, wrong delimiters, huge numbers, NaN and inf, negative counts, empty files, byte-order marks,
other encodings, deep nesting and long lines, drawn from fixed seeds. Each must be one `error:` line with
exit status 2, no traceback, and leave the home (and any output asked for) as it was.

Most cases call the CLI's entry (`hierconsole.cli:main`, which maps HierconsoleError to exit 2) in this
process, so that hundreds of them fit the quick loop; a handful run as real processes (marked slow).

A line past the readers' bound (no newline) and names that would climb out of the home are among them.
"""

from __future__ import annotations

import codecs
import json
import random
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from hierconsole.bounded_input import MAX_LINE_BYTES
from hierconsole.cli import main
from hierconsole.datasets import make_synthetic
from tests.generic_files import write_generic
from tests.reliability.conftest import cli, one_line_error, tree_digest
from tests.stores.layouts import TINY_MODEL, make_cub
from tests.stores.real import registered_home
from tests.tiny import TINY

CASES_PER_FILE = 12
"""Text variants drawn per file and seed family; with the fixed kinds below, a few hundred cases in all."""
LONG_LINE = 200_000
"""Characters of a very long line, still under the bounded readers' cap."""
ENDLESS_LINE = 2 * MAX_LINE_BYTES
"""Bytes of a line past the bounded readers' cap, with no newline: refused, not read into memory."""
EXTRACT_FLAGS = ("--weights", "none", "--seed", "0", "--workers", "0")
"""Random weights of a tiny model: what `extract` needs besides the file under test."""
DEEP = 3_000
"""Nesting depth of the deep cases: past Python's recursion limit for a recursive parser."""


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    """The CLI's words after `--home HOME`; files are written before the case runs."""
    files: dict[Path, bytes]
    outputs: tuple[Path, ...] = ()
    """Files the command was asked to write: still absent after a refusal."""


# --- hostile variants ---------------------------------------------------------------------------------


def _text_variants(valid: bytes, rng: random.Random, numeric: bool = True) -> Iterator[tuple[str, bytes]]:
    """Hostile versions of a valid text file: every kind once, then random truncations and random bytes."""
    text = valid.decode()
    yield "empty", b""
    yield "blank-lines", b"\n\n  \n"
    yield "random-bytes", rng.randbytes(400)
    yield "nul-bytes", b"\x00" * 64 + valid[:50]
    yield "bom-utf16", codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    yield "latin1-mixed", valid[: len(valid) // 2] + "Grünfink ñandú\n".encode("latin-1") + valid[len(valid) // 2 :]
    yield "semicolons", text.replace(",", ";").replace(" ", ";").encode()
    yield "tabs-and-pipes", text.replace(",", "\t|").replace(" ", "|").encode()
    yield "header-only", text.splitlines(keepends=True)[0].encode()
    yield "long-line", text.encode() + b"x" * LONG_LINE + b"\n"
    yield "endless-line", text.encode() + b"x" * ENDLESS_LINE
    if "," in text:  # a file without commas is not CSV: an unclosed quote changes nothing there
        yield "quote-unclosed", text.replace(",", ',"', 1).encode()
    if numeric and _replace_numbers(text, "x", rng) != text:  # only where whole-number fields stand
        for word in ("NaN", "inf", "-inf", "-1", "1e400", "99999999999999999999999", "1.5"):
            yield f"number-{word}", _replace_numbers(text, word, rng).encode()
    for k in range(CASES_PER_FILE):
        cut = rng.randrange(1, max(2, len(valid) - 1))
        yield f"truncated-{k}", valid[:cut]
    for k in range(CASES_PER_FILE // 3):
        yield f"random-{k}", rng.randbytes(rng.randrange(1, 2_000))


def _replace_numbers(text: str, word: str, rng: random.Random) -> str:
    """`text` with one in three of its whole-number fields (or the first) replaced by `word`."""
    out, done = [], False
    for line in text.splitlines(keepends=True):
        parts = _split_keep(line)
        for i, p in enumerate(parts):
            if p.strip().isdigit() and (not done or rng.random() < 1 / 3):
                parts[i], done = word + ("\n" if p.endswith("\n") else ""), True
        out.append("".join(parts))
    return "".join(out)


def _split_keep(line: str) -> list[str]:
    """`line` cut after each comma or blank, the separators kept, so that joining gives it back."""
    parts, current = [], ""
    for ch in line:
        current += ch
        if ch in ", ":
            parts.append(current)
            current = ""
    return [*parts, current] if current else parts


def _array_variants(rng: random.Random) -> Iterator[tuple[str, Callable[[Path], None]]]:
    """Writers of hostile features files (.npy, .npz): wrong shapes and values, none of the valid data."""

    def npy(array: np.ndarray) -> Callable[[Path], None]:
        return lambda path: np.save(path.with_suffix(".npy"), array)

    yield "npy-0d", npy(np.float32(1.0))
    yield "npy-1d", npy(np.ones(10, dtype=np.float32))
    yield "npy-3d", npy(np.ones((2, 3, 4), dtype=np.float32))
    yield "npy-empty", npy(np.zeros((0, 48), dtype=np.float32))
    yield "npy-nan", npy(np.full((312, 48), np.nan, dtype=np.float32))
    yield "npy-inf", npy(np.full((312, 48), np.inf, dtype=np.float32))
    yield "npy-strings", npy(np.array([["a"] * 48] * 312))
    yield "npy-objects", npy(np.array([{"a": 1}] * 312, dtype=object))
    yield "npy-complex", npy(np.ones((312, 48), dtype=np.complex64))
    yield "npy-wrong-rows", npy(np.ones((7, 48), dtype=np.float32))
    yield "npz-no-arrays", lambda path: np.savez(path.with_suffix(".npz"))
    yield "npz-ids-mismatch", lambda path: np.savez(
        path.with_suffix(".npz"), features=np.ones((5, 48), dtype=np.float32), ids=np.arange(3)
    )
    yield "npz-ids-duplicate", lambda path: np.savez(
        path.with_suffix(".npz"), features=np.ones((3, 48), dtype=np.float32), ids=np.array(["a", "a", "b"])
    )
    for k in range(4):
        blob = rng.randbytes(rng.randrange(1, 600))
        yield f"npy-random-{k}", lambda path, blob=blob: path.with_suffix(".npy").write_bytes(blob)
        yield f"npz-random-{k}", lambda path, blob=blob: path.with_suffix(".npz").write_bytes(b"PK\x03\x04" + blob)
    for k in range(4):
        yield f"npy-truncated-{k}", lambda path, k=k: _truncated_npy(path.with_suffix(".npy"), 20 + 97 * k)


def _truncated_npy(path: Path, keep: int) -> None:
    np.save(path, np.ones((312, 48), dtype=np.float32))
    path.write_bytes(path.read_bytes()[:keep])


def _toml_variants(valid: str, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Hostile presets: the text variants, then valid TOML with hostile values."""
    for name, data in _text_variants(valid.encode(), rng, numeric=False):
        if name not in ("semicolons", "tabs-and-pipes", "header-only", "quote-unclosed"):
            yield name, data
    for key, value in (
        ("training.epochs", "3000000000"),
        ("training.epochs", "-5"),
        ("training.epochs", "nan"),
        ("training.epochs", "inf"),
        ("training.epochs", "1e400"),
        ("training.epochs", "99999999999999999999999999"),
        ("training.batch_size", "-1"),
        ("training.hidden", "3000000000"),
        ("training.seeds", "[-1]"),
        ("training.seeds", "[3000000000]"),
        ("training.lr", "nan"),
        ("training.lr", "-inf"),
        ("compute.threads_per_worker", "0"),
        ("controls.shuffle_seed", "[1, 1]"),
        ("compute.max_parallel_jobs", "3000000000"),
        ("split.counts", "[-1, 2, 3]"),
        ("training.cells", '["E_R", "X"]'),
        ("training.epochs", "[" * DEEP + "]" * DEEP),
        ("training.epochs", "{ a = " * 400 + "1" + " }" * 400),
        ("training.optimizer", '"' + "x" * LONG_LINE + '"'),
    ):
        table, option = key.split(".")
        yield f"value-{option}-{value[:12]}", f"{valid}\n[{table}]\n{option} = {value}\n".encode()
    yield "duplicate-table", (valid + "\n" + valid).encode()
    yield "array-of-tables", b"[[study]]\nname = 'x'\n"


# --- the valid inputs the variants are made from ------------------------------------------------------


@dataclass(frozen=True)
class Valid:
    home: Path
    work: Path
    generic_features: Path
    generic_labels: Path
    generic_taxonomy: Path
    cub_root: Path
    cub_features: Path
    cub_taxonomy: Path
    checklist: Path
    preset: str
    family: str
    model: Path


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> Valid:
    base = tmp_path_factory.mktemp("fuzz")
    home = registered_home(base / "home", make_synthetic(TINY))
    generic = write_generic(base / "generic")
    layout = make_cub(base / "cub", families=2, genera=1, species=2, per_class=3)
    cub_features = base / "cub_features.npy"
    np.save(cub_features, np.random.default_rng(0).normal(size=(layout.images, 16)).astype(np.float32))
    names = [line.split(" ", 1)[1] for line in (layout.root / "classes.txt").read_text().splitlines()]
    cub_taxonomy = base / "cub_taxonomy.csv"
    cub_taxonomy.write_text("leaf,middle,high\n" + "".join(f"{n},g{i // 2},f{i // 4}\n" for i, n in enumerate(names)))
    model = base / "model.json"
    model.write_text(json.dumps(TINY_MODEL))
    preset = (
        '[study]\nname = "fuzz"\n\n[data]\ndataset = "tiny"\n\n[evaluation]\naggregation = "micro"\n'
        'n_query = 40\n\n[geometry.poincare]\nc = 0.1\nr = 2.3\n\n[temperature]\neuclidean = 0.1\n'
        "poincare = 0.1\n"
    )
    family = '[family]\nname = "fz"\nbase = "demo"\n\n[overrides]\n"training.epochs" = 2\n\n[members.a]\n"training.lr" = 1e-3\n'
    work = base / "work"
    work.mkdir()
    return Valid(
        home, work, generic.features, generic.labels, generic.taxonomy, layout.root, cub_features, cub_taxonomy,
        base / "cub" / "checklist.csv", preset, family, model,
    )  # fmt: skip


def _cases(v: Valid) -> list[Case]:
    """Every case, drawn from seeds fixed per file so a run is repeatable and a failure reproducible."""
    w = v.work
    cases: list[Case] = []

    def add(name: str, argv: list[str], files: dict[Path, bytes], outputs: tuple[Path, ...] = ()) -> None:
        cases.append(Case(name, argv, files, outputs))

    generic = [str(v.generic_features), str(v.generic_labels), str(v.generic_taxonomy)]
    for slot, path, seed in ((1, v.generic_labels, 11), (2, v.generic_taxonomy, 12)):
        for kind, data in _text_variants(path.read_bytes(), random.Random(seed)):
            target = w / f"generic-{slot}-{kind}.csv"
            argv = ["import", "generic", *generic[:slot], str(target), *generic[slot + 1 :], "--name", "fz"]
            add(f"generic-{path.stem}-{kind}", argv, {target: data})
    for kind, write in _array_variants(random.Random(13)):
        target = w / f"features-{kind}"
        write(target)
        written = next(w.glob(f"features-{kind}.*"))
        add(f"generic-features-{kind}", ["import", "generic", str(written), *generic[1:], "--name", "fz"], {})
        add(f"cub-features-{kind}", ["import", "cub", str(v.cub_root), str(written), str(v.cub_taxonomy)], {})
    for listing, seed in (("images.txt", 21), ("image_class_labels.txt", 22), ("train_test_split.txt", 23), ("classes.txt", 24)):
        for kind, data in _text_variants((v.cub_root / listing).read_bytes(), random.Random(seed)):
            if kind.startswith("truncated") and kind[-1] not in "0123":  # four truncations per listing
                continue
            root = w / f"cub-{listing}-{kind}"
            files = {root / name.name: name.read_bytes() for name in v.cub_root.glob("*.txt")}
            files[root / listing] = data
            add(f"cub-{listing}-{kind}", ["import", "cub", str(root), str(v.cub_features), str(v.cub_taxonomy)], files)
    for kind, data in _text_variants(v.cub_taxonomy.read_bytes(), random.Random(25)):
        target = w / f"cub-taxonomy-{kind}.csv"
        add(f"cub-taxonomy-{kind}", ["import", "cub", str(v.cub_root), str(v.cub_features), str(target)], {target: data})
    classes = v.cub_root / "classes.txt"
    for kind, data in _text_variants(v.checklist.read_bytes(), random.Random(31), numeric=False):
        target, out = w / f"checklist-{kind}.csv", w / f"taxonomy-{kind}.csv"
        add(f"checklist-{kind}", ["taxonomy", "build-cub", str(classes), str(target), "-o", str(out)], {target: data}, (out,))
    for kind, data in _json_variants(json.dumps({"Bird000 Warbler": "Bird000 Warbler"}), random.Random(32)):
        target, out = w / f"aliases-{kind}.json", w / f"taxonomy-aliases-{kind}.csv"
        argv = ["taxonomy", "build-cub", str(classes), str(v.checklist), "-o", str(out), "--aliases", str(target)]
        add(f"aliases-{kind}", argv, {target: data}, (out,))
    for kind, data in _toml_variants(v.preset, random.Random(41)):
        target = w / f"preset-{kind}.toml"
        add(f"preset-{kind}", ["run", str(target), "--dry-run"], {target: data})
    for kind, data in _toml_variants(v.family, random.Random(42)):
        if kind.startswith("value-"):
            continue  # the family's overrides are a table of dotted keys: its own cases follow
        target = w / f"family-{kind}.toml"
        add(f"family-{kind}", ["run", str(target), "--dry-run"], {target: data})
    for value in ("3000000000", "-3", "nan", "inf", "1e400", "[" * DEEP + "]" * DEEP, '"' + "x" * 5000 + '"', "[1, [2, [3]]]"):
        target = w / f"family-override-{value[:8]}.toml"
        data = v.family.replace('"training.epochs" = 2', f'"training.epochs" = {value}').encode()
        add(f"family-override-{value[:12]}", ["run", str(target), "--dry-run"], {target: data})
    for key, value in (
        ("training.epochs", "3000000000"), ("training.epochs", "-1"), ("training.epochs", "nan"),
        ("training.epochs", "inf"), ("training.batch_size", "1e400"), ("training.seeds", "[1, 1]"),
        ("training.seeds", "[" * DEEP + "]" * DEEP), ("training.lr", "{a = 1}"), ("training.lr", '"\x00"'),
        ("evaluation.n_query", "99999999999999999999"), ("no.such", "1"), ("training", "1"),
        ("compute.threads_per_worker", "3000000000"), ("training.cells", "[]"),
    ):  # fmt: skip
        add(f"set-{key}-{value[:12]}", ["run", "demo", "--dataset", "tiny", "--dry-run", "--set", f"{key}={value}"], {})
    for kind, data in _json_variants(json.dumps(TINY_MODEL), random.Random(51)):
        target, out = w / f"model-{kind}.json", w / f"extract-{kind}.npz"
        argv = ["extract", "cub", str(v.cub_root), "-o", str(out), *EXTRACT_FLAGS, "--model", str(target)]
        add(f"model-{kind}", argv, {target: data}, (out,))
    for kind, data in _text_variants(b"not used\n", random.Random(61), numeric=False):
        if kind in ("random-bytes", "empty", "nul-bytes", "bom-utf16", "truncated-0"):
            folder, out = w / f"images-{kind}", w / f"extract-images-{kind}.npz"
            files = {folder / f"bird_{k}.png": data + bytes([k]) for k in range(3)}
            argv = ["extract", "folder", str(folder), "-o", str(out), *EXTRACT_FLAGS, "--model", str(v.model)]
            add(f"images-{kind}", argv, files, (out,))
    for name in ("", " ", "\t", "x" * 5_000, "a\nb", "\x00", "\x1b[31mred", "../../evil", "a/b", "/tmp/x", ".hidden", ".."):
        add(f"name-{name[:8]!r}", ["import", "generic", *generic, "--name", name], {})
    return cases


def _json_variants(valid: str, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    for name, data in _text_variants(valid.encode(), rng, numeric=False):
        if name not in ("semicolons", "tabs-and-pipes", "header-only"):
            yield name, data
    yield "deep-array", b"[" * DEEP + b"]" * DEEP
    yield "deep-object", b'{"a":' * DEEP + b"1" + b"}" * DEEP
    yield "a-list", b"[1, 2, 3]"
    yield "a-number", b"1e400"
    yield "nan", b"NaN"
    yield "null", b"null"
    yield "huge-values", json.dumps({k: 10**30 for k in json.loads(valid)}).encode()
    yield "negative-values", json.dumps({k: -1 for k in json.loads(valid)}).encode()
    yield "nan-values", json.dumps({k: float("nan") for k in json.loads(valid)}).encode()
    yield "unknown-keys", json.dumps({"no_such_field": 1}).encode()
    yield "duplicate-keys", b'{"a": 1, "a": 2}'


# --- running them -------------------------------------------------------------------------------------


def _refused_in_process(home: Path, case: Case, capsys: pytest.CaptureFixture[str]) -> str | None:
    """Why `case` broke the rule (None when it was one `error:` line, exit 2, home and outputs untouched)."""
    for path, data in case.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    before = tree_digest(home)
    capsys.readouterr()
    try:
        code: int | str = main(["--home", str(home), *case.argv])
    except SystemExit as exc:  # argparse: usage and an error, not the one line
        code = f"SystemExit({exc.code})"
    except Exception as exc:  # noqa: BLE001 - a traceback is the finding this test reports
        code = f"raised {type(exc).__name__}: {str(exc)[:200]}"
    captured = capsys.readouterr()
    err = captured.err
    problems = []
    if code != 2:
        problems.append(f"exit {code}")
    if "Traceback" in err + captured.out:
        problems.append("traceback")
    # `extract` draws its progress bar while it reads the images, before it can know none is readable.
    said = err[err.find("error: ") :] if case.argv[0] == "extract" else err
    if not said.startswith("error: ") or err.count("error:") != 1:
        problems.append(f"stderr {err[:300]!r}")
    if tree_digest(home) != before:
        problems.append("home changed")
    left = [str(p) for out in case.outputs for p in out.parent.glob(f"{out.stem}*")]  # shards and sidecars too
    if left:
        problems.append(f"wrote {left}")
    return "; ".join(problems) or None


def test_hostile_files_are_one_line_each(valid: Valid, capsys: pytest.CaptureFixture[str]) -> None:
    cases = _cases(valid)
    assert len(cases) >= 300, len(cases)  # the issue asks for a few hundred
    broken = {}
    for case in cases:
        why = _refused_in_process(valid.home, case, capsys)
        if why is not None:
            broken[case.name] = why
    assert not broken, f"{len(broken)} of {len(cases)} cases broke the rule:\n" + "\n".join(
        f"{name}: {why}" for name, why in broken.items()
    )


SUBPROCESS_CASES = (
    "generic-labels-random-bytes",
    "cub-images.txt-bom-utf16",
    "preset-random-bytes",
    "set-training.epochs-3000000000",
    "model-deep-object",
    "generic-features-npy-objects",
)


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_hostile_files_are_one_line_in_a_real_process(valid: Valid, tmp_path: Path, name: str) -> None:
    """A few of the cases as a user meets them: the CLI in its own process."""
    case = next(c for c in _cases(valid) if c.name == name)
    for path, data in case.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    home = tmp_path / "home"
    shutil.copytree(valid.home, home)
    before = tree_digest(home)
    one_line_error(cli(home, *case.argv, stdin=subprocess.DEVNULL))
    assert tree_digest(home) == before
    assert not any(p.exists() for p in case.outputs)
