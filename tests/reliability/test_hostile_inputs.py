"""Hostile and damaged inputs to `extract` and the CSV readers, as a fault probe met them: a decompression
bomb, list paths outside the image folder, a killed extraction's decoding workers, an oversized CSV field,
a header of a million columns and a weights file that carries code. Each is one clear line (exit 2) or a
listed, skipped image, and nothing leaks."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.extraction.conftest import TINY
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
    listing.write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n")
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
