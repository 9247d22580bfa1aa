"""Hostile and damaged inputs to `extract` and the file readers, as a fault probe met them: a decompression
bomb, list paths (and symlinks) outside the image folder, a killed extraction's decoding workers, an
oversized CSV field, a header of a million columns, a weights file that carries code, and `/dev/zero` or a
line with no end given to each reader of a user's file. Each is one clear line (exit 2) or a listed,
skipped image, and nothing leaks."""

from __future__ import annotations

import json
import os
import resource
import signal
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hierconsole.bounded_input import MAX_DOCUMENT_BYTES, MAX_LINE_BYTES
from tests.extraction.conftest import TINY
from tests.generic_files import write_generic
from tests.reliability.conftest import cli_argv, one_line_error, wait_for

pytestmark = pytest.mark.slow  # the CLI in subprocesses

TINY_FLAGS = ["--weights", "none", "--seed", "0", "--batch-size", "2", "--shard-size", "4", "--workers", "0"]
assert TINY_FLAGS[-2:] == ["--workers", "0"]


def _model(tmp_path: Path) -> list[str]:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return ["--model", str(path)]


def _folder(tmp_path: Path, n: int = 5) -> Path:
    root = tmp_path / "images"
    root.mkdir()
    for k in range(n):
        pixels = np.random.default_rng(k).integers(0, 256, size=(30, 40, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / f"bird_{k}.png")
    return root


def _bomb(path: Path, width: int = 20_000, height: int = 20_000) -> None:
    """A small valid PNG whose header is rewritten to claim width x height (its CRC fixed): the file is a
    few hundred bytes, decoding it would need gigabytes."""
    Image.new("RGB", (8, 8)).save(path)
    data = bytearray(path.read_bytes())
    ihdr = data[12:29]  # chunk type and its 13 bytes of data
    ihdr[4:12] = struct.pack(">II", width, height)
    data[12:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(ihdr)) & 0xFFFFFFFF)
    path.write_bytes(bytes(data))


def _extract(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(cli_argv(home, "extract", *args), capture_output=True, text=True, timeout=timeout)


def test_a_decompression_bomb_is_listed_and_skipped(tmp_path):
    root = _folder(tmp_path)
    _bomb(root / "bomb.png")
    out = tmp_path / "features.npz"
    done = _extract(tmp_path, "folder", str(root), "-o", str(out), *TINY_FLAGS, *_model(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    text = " ".join(done.stdout.split())
    assert "1 image could not be read" in text
    assert "bomb.png" in text and "20,000 x 20,000 = 400,000,000 pixels, over the limit" in text
    with np.load(out) as z:
        assert sorted(map(str, z["ids"])) == [f"bird_{k}.png" for k in range(5)]
    manifest = json.loads(next(tmp_path.glob("features*.json")).read_text())
    assert [f["id"] for f in manifest["failed"]] == ["bomb.png"]

    # The limit is an option: at 1,000 pixels the 30 x 40 birds are over it too, each listed by reason.
    small = tmp_path / "small.npz"
    done = _extract(tmp_path, "folder", str(root), "-o", str(small), *TINY_FLAGS, *_model(tmp_path), "--max-pixels", "1000")
    assert done.returncode == 2 or "could not be read" in done.stdout, done.stdout + done.stderr
    assert "over the limit of 1,000" in " ".join((done.stdout + done.stderr).split())


def test_list_paths_outside_the_folder_are_refused_before_anything_is_read(tmp_path):
    root = _folder(tmp_path)
    listing = tmp_path / "list.csv"
    listing.write_text("id,path\nok,bird_0.png\nhost,/etc/hostname\nup,../../secret.png\n")
    out = tmp_path / "features.npz"
    done = _extract(tmp_path, "folder", str(root), "--list", str(listing), "-o", str(out), *TINY_FLAGS, *_model(tmp_path))
    text = one_line_error(done)
    assert "'/etc/hostname' is outside the image folder" in text and "'../../secret.png'" in text
    assert "--allow-outside-paths" in text and "id 'ok'" not in text
    assert not out.exists() and not list(tmp_path.glob("features.npz*"))

    # Asked for, an outside file is read where it is (and /etc/hostname, not an image, listed as such).
    listing.write_text("id,path\nok,bird_0.png\nhost,/etc/hostname\n")
    done = _extract(
        tmp_path, "folder", str(root), "--list", str(listing), "-o", str(out), *TINY_FLAGS, *_model(tmp_path),
        "--allow-outside-paths",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "/etc/hostname" in done.stdout and "cannot decode the image" in done.stdout


def _children(pid: int) -> set[int]:
    """Every live process whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_decoding_workers_die_with_a_killed_extraction(tmp_path):
    """As the probe met it: SIGKILL of `extract` left a DataLoader worker reparented to PID 1 for good."""
    root = _folder(tmp_path, 8)
    blocking = root / "bird_3.png"
    blocking.unlink()
    os.mkfifo(blocking)  # a worker opening it waits for a writer that never comes
    listing = tmp_path / "list.csv"  # listed by name: walking the folder would pass over a pipe
    listing.write_text("id,path\n" + "".join(f"b{k},bird_{k}.png\n" for k in range(8)))
    out = tmp_path / "features.npz"
    flags = [*TINY_FLAGS[:-2], "--workers", "2"]
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen(
        cli_argv(home, "extract", "folder", str(root), "--list", str(listing), "-o", str(out), *flags, *_model(tmp_path)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    workers: set[int] = set()
    try:
        def two_workers() -> bool:
            workers.update(_children(proc.pid))
            return len(workers) >= 2

        wait_for(two_workers, timeout=120, what="two decoding workers")
        time.sleep(1.0)  # let each worker finish its start-up (and its request to die with the parent)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        wait_for(lambda: not any(_alive(w) for w in workers), timeout=30, what="the workers to end")
    finally:
        proc.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


def test_an_oversized_csv_field_is_named_as_such(tmp_path):
    root = _folder(tmp_path, 1)
    listing = tmp_path / "list.csv"
    listing.write_text("id,path\n" + "x" * 200_000 + ",bird_0.png\n")
    text = one_line_error(_extract(tmp_path, "folder", str(root), "--list", str(listing), "-o", str(tmp_path / "f.npz"), *TINY_FLAGS))
    assert "a field is longer than 131,072 characters" in text and "UTF-8" not in text


def test_a_million_column_header_is_refused_in_a_bounded_line(tmp_path):
    root = _folder(tmp_path, 1)
    listing = tmp_path / "list.csv"
    # Its 6.9 MB are past the bound of a line: refused as such, before any column is looked at.
    listing.write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n")
    done = _extract(tmp_path, "folder", str(root), "--list", str(listing), "-o", str(tmp_path / "f.npz"), *TINY_FLAGS)
    text = one_line_error(done)
    assert "line 1 is longer than 1 MiB" in text and len(done.stderr) < 3_000
    # A header of 100,000 columns fits a line: its columns are checked, and the message quotes it cut short.
    listing.write_text(",".join(f"c{i}" for i in range(100_000)) + "\n")
    done = _extract(tmp_path, "folder", str(root), "--list", str(listing), "-o", str(tmp_path / "f.npz"), *TINY_FLAGS)
    text = one_line_error(done)
    assert "the header must name the columns id and path" in text
    assert len(done.stderr) < 3_000 and "characters in all" in text


def test_weights_that_carry_code_are_refused_without_torchs_unsafe_advice(tmp_path):
    import torch

    class Payload:
        def __reduce__(self):
            return (print, ("this would have run",))

    weights = tmp_path / "evil.pt"
    torch.save({"cls_token": Payload()}, weights)
    root = _folder(tmp_path, 1)
    done = _extract(tmp_path, "folder", str(root), "-o", str(tmp_path / "f.npz"), "--weights", str(weights), *_model(tmp_path), "--workers", "0")
    text = one_line_error(done)
    assert "refused unread" in text and "state dict" in text
    assert "weights_only" not in text and "this would have run" not in done.stdout + done.stderr


def test_a_symlink_in_the_image_folder_to_a_file_outside_is_refused(tmp_path):
    """The outside-paths rule holds for where a path leads, not only for how it is written: a symlink in
    the folder to a file outside it is refused as `../` is, whether the folder is walked or listed."""
    root = _folder(tmp_path, 2)
    secret = tmp_path / "secret.png"
    Image.fromarray(np.zeros((30, 40, 3), dtype=np.uint8)).save(secret)
    (root / "link.png").symlink_to(secret)
    (root / "inside.png").symlink_to(root / "bird_0.png")  # a dataset's own link inside stays allowed
    out = tmp_path / "features.npz"
    listing = tmp_path / "list.csv"
    listing.write_text("id,path\nok,bird_0.png\nin,inside.png\nlink,link.png\n")
    for how in ([], ["--list", str(listing)]):
        done = _extract(tmp_path, "folder", str(root), *how, "-o", str(out), *TINY_FLAGS, *_model(tmp_path))
        text = one_line_error(done)
        assert "'link.png' is outside the image folder" in text and "--allow-outside-paths" in text, text
        assert "inside.png" not in text and "bird_0" not in text, text
        assert not out.exists()
    # Asked for, it is read where it leads.
    done = _extract(tmp_path, "folder", str(root), "-o", str(out), *TINY_FLAGS, *_model(tmp_path), "--allow-outside-paths")
    assert done.returncode == 0, done.stdout + done.stderr
    with np.load(out) as z:
        assert "link.png" in set(map(str, z["ids"]))


# -- a file with no end: /dev/zero, or one line of 50 MB ---------------------------------------------------

MEMORY_CAP = 3 << 30
"""Address space a refused command may take: torch's import needs well under 1 GiB of it here; a reader
that held an endless line whole would pass the cap and fail the test rather than eat the machine."""
ENDLESS = 50_000_000


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _endless(path: Path, first: bytes = b"") -> Path:
    """`first`, then 50 MB without a line end."""
    with path.open("wb") as fh:
        fh.write(first)
        block = b"x" * (1 << 20)
        for _ in range(ENDLESS // len(block)):
            fh.write(block)
    return path


def _files(tmp: Path) -> dict[str, Path]:
    """Valid inputs of every reader, so that only the one under test is bad."""
    generic = write_generic(tmp / "generic")
    classes = tmp / "classes.txt"
    classes.write_text("1 001.Black_footed_Albatross\n")
    checklist = tmp / "checklist.csv"
    checklist.write_text(
        "category,English name,scientific name,family\n"
        "species,Black-footed Albatross,Phoebastria nigripes,Diomedeidae (Albatrosses)\n"
    )
    folder = tmp / "images"
    folder.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(folder / "a.png")
    model = tmp / "model.json"
    model.write_text(json.dumps(TINY))
    return {
        "features": generic.features, "labels": generic.labels, "taxonomy": generic.taxonomy,
        "classes": classes, "checklist": checklist, "folder": folder, "model": model,
    }  # fmt: skip


def _generic(f: dict[str, Path], **bad: Path) -> list[str]:
    g = {**f, **bad}
    return ["import", "generic", str(g["features"]), str(g["labels"]), str(g["taxonomy"]), "--name", "x"]


def _build_cub(f: dict[str, Path], tmp: Path, **bad: Path) -> list[str]:
    g = {**f, **bad}
    extra = ["--aliases", str(g["aliases"])] if "aliases" in g else []
    return ["taxonomy", "build-cub", str(g["classes"]), str(g["checklist"]), "-o", str(tmp / "tax.csv"), *extra]


# Each reader: (the command, given the valid files, the temp folder and the bad file; what it is called).
READERS = {
    "labels-csv": (lambda f, tmp, bad: _generic(f, labels=bad), "line of the labels CSV"),
    "taxonomy-csv": (lambda f, tmp, bad: _generic(f, taxonomy=bad), "line of the taxonomy CSV"),
    "image-list": (
        lambda f, tmp, bad: ["extract", "folder", str(f["folder"]), "--list", str(bad), "-o", str(tmp / "o.npz"), *TINY_FLAGS],
        "line of the image list",
    ),
    "cub-list": (lambda f, tmp, bad: _build_cub(f, tmp, classes=bad), "line of the list"),
    "checklist-csv": (lambda f, tmp, bad: _build_cub(f, tmp, checklist=bad), "line of the checklist"),
    "per-seed-csv": (lambda f, tmp, bad: ["effects", "--from-csv", str(bad)], "line of the per-seed CSV"),
    "aliases-json": (lambda f, tmp, bad: _build_cub(f, tmp, aliases=bad), "an aliases JSON file"),
    "model-json": (
        lambda f, tmp, bad: ["extract", "folder", str(f["folder"]), "-o", str(tmp / "o.npz"), "--model", str(bad), *TINY_FLAGS],
        "a model config",
    ),
    # `run` reads its file once to learn whether it is a family: that read meets the bound for both.
    "preset-toml": (lambda f, tmp, bad: ["run", str(bad), "--dry-run"], "a preset or family file"),
    "family-toml": (lambda f, tmp, bad: ["run", str(bad), "--dry-run"], "a preset or family file"),
}
WHOLE = {"aliases-json", "model-json", "preset-toml", "family-toml"}
"""Readers of a file read whole (JSON, TOML): bounded by size, not by line."""
NO_DEVICES = {"cub-list", "preset-toml", "family-toml"}
"""Readers that take regular files only: a device is refused as no such file, unread."""


@pytest.mark.parametrize("source", ["dev-zero", "endless-line"])
@pytest.mark.parametrize("reader", READERS)
def test_a_file_without_end_is_refused_in_bounded_memory(tmp_path, reader, source):
    command, what = READERS[reader]
    files = _files(tmp_path)
    suffix = ".json" if reader.endswith("json") else ".toml" if reader.endswith("toml") else ".csv"
    bad = tmp_path / f"bad{suffix}"
    if source == "dev-zero":
        bad.symlink_to("/dev/zero")  # a name the reader accepts (.json, .csv) for the device
    else:
        # A family's first line makes it one (a [family] table), so that its reader is the one that meets the rest.
        _endless(bad, b"[family]\n#" if reader == "family-toml" else b"#" if reader == "preset-toml" else b"")
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        cli_argv(home, *command(files, tmp_path, bad)),
        capture_output=True, text=True, timeout=300, preexec_fn=_capped,
    )  # fmt: skip
    text = one_line_error(done)
    assert "bad" + suffix in text, text
    if source == "dev-zero" and reader in NO_DEVICES:
        assert "missing" in text or "not found" in text, text
    elif reader in WHOLE:
        assert f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB, the most {what} may be" in text, text
    else:
        assert f"line 1 is longer than {MAX_LINE_BYTES >> 20} MiB, the most a {what} may hold" in text, text
    assert len(done.stderr) < 2_000, done.stderr
