"""What a remote job sends home: the job folder mirrored file by file (changes and removals, never the live
process's own files or temporaries), inputs packed and unpacked by home-relative path, paths that would
leave their folder refused, and the boundary lines that make files travel."""

from __future__ import annotations

import os

import pytest

from hierconsole.contract import events as ev
from hierconsole.contract import layout, transfer


def _write(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_changes_mirror_a_job_folder_onto_another(tmp_path):
    node, home = tmp_path / "node", tmp_path / "home"
    _write(node / "checkpoints" / "ckpt-000001.pt", b"one")
    _write(node / "checkpoints" / "ckpt-000001.pt.sha256", b"h1")
    _write(node / "best-E_R.pt", b"best")
    for own in (layout.EVENTS, layout.HEARTBEAT, layout.LOCK, layout.WORKER_LOG, layout.SPEC):
        _write(node / own, b"the live process's own")
    _write(node / "checkpoints" / ".ckpt-000002.pt.tmp-123", b"half written")

    copies, known = transfer.changes(node, {})
    assert sorted(c.path for c in copies) == [
        "best-E_R.pt",
        "checkpoints/ckpt-000001.pt",
        "checkpoints/ckpt-000001.pt.sha256",
    ]
    transfer.unpack(home, copies)
    assert transfer.folder_state(home).keys() == known.keys()

    # The next checkpoint replaces the first (the trainer prunes it) and the best model is unchanged.
    os.replace(node / "checkpoints" / ".ckpt-000002.pt.tmp-123", node / "checkpoints" / "ckpt-000002.pt")
    (node / "checkpoints" / "ckpt-000001.pt").unlink()
    (node / "checkpoints" / "ckpt-000001.pt.sha256").unlink()
    copies, known = transfer.changes(node, known)
    assert {c.path: c.data for c in copies} == {
        "checkpoints/ckpt-000002.pt": b"half written",
        "checkpoints/ckpt-000001.pt": None,
        "checkpoints/ckpt-000001.pt.sha256": None,
    }
    transfer.unpack(home, copies)
    assert {p.relative_to(home).as_posix(): p.read_bytes() for p in home.rglob("*") if p.is_file()} == {
        "best-E_R.pt": b"best",
        "checkpoints/ckpt-000002.pt": b"half written",
    }
    assert transfer.changes(node, known)[0] == []


def test_a_rewritten_file_travels_again(tmp_path):
    _write(tmp_path / "best-E_R.pt", b"epoch 1")
    _, known = transfer.changes(tmp_path, {})
    _write(tmp_path / "best-E_R.pt", b"epoch 22")  # another size: seen even within one mtime tick
    copies, _ = transfer.changes(tmp_path, known)
    assert copies == [transfer.FileCopy("best-E_R.pt", b"epoch 22")]


def test_pack_and_unpack_rebuild_inputs_by_home_relative_path(tmp_path):
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    _write(home / "datasets" / "tiny" / "features.npy", b"f")
    _write(home / "datasets" / "tiny" / "meta" / "taxonomy.csv", b"t")
    _write(home / "studies" / "s" / "splits" / "train.npz", b"i")
    copies = transfer.pack(home, ["datasets/tiny", "studies/s/splits/train.npz"])
    transfer.unpack(scratch, copies)
    assert {p.relative_to(scratch).as_posix() for p in scratch.rglob("*") if p.is_file()} == {
        "datasets/tiny/features.npy",
        "datasets/tiny/meta/taxonomy.csv",
        "studies/s/splits/train.npz",
    }
    assert (scratch / "studies/s/splits/train.npz").read_bytes() == b"i"


@pytest.mark.parametrize("bad", ["../outside", "/etc/passwd", "a/../../b", ""])
def test_paths_that_leave_their_folder_are_refused(tmp_path, bad):
    with pytest.raises(transfer.TransferError, match="must be relative"):
        transfer.unpack(tmp_path / "root", [transfer.FileCopy(bad, b"x")])
    assert not (tmp_path / "outside").exists()


def test_boundaries_are_the_lines_that_mark_durable_work():
    epoch = ev.to_line(ev.Epoch(cell="E_R", epoch=1, epochs=2, train_loss=0.5, updates=8, batch_sha256="ab"))
    checkpoint = ev.to_line(ev.Checkpoint(epoch=1, sha256="cd"))
    assert not transfer.has_boundary(epoch.encode())
    assert not transfer.has_boundary(b'{"kind": "checkpoint", torn')
    assert transfer.has_boundary((epoch + checkpoint).encode())
    assert transfer.has_boundary(ev.to_line(ev.Done()).encode())


def test_the_worker_fsyncs_every_boundary_event():
    """Files travel at the lines the worker makes durable: the two lists must not drift apart."""
    from hierconsole.engine.worker import EventLog

    assert {cls.KIND for cls in EventLog.DURABLE} <= transfer.BOUNDARY_KINDS
