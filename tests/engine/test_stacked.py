"""Seeds stacked in one process (engine.stacked) against their per-seed jobs: every cell's numbers unchanged.

Stacking is only acceptable if it changes nothing a job records: on CPU the final models, the optimiser
state in the checkpoints and every event's numbers (losses, batch hashes, validation metrics, hashes of
the final states) must be bit for bit those of the same jobs trained one at a time on the batched engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from hierconsole.contract import layout
from hierconsole.engine.checkpoints import list_checkpoints, load_payload
from hierconsole.engine.stacked import StackedTrainer, stacking_problem
from hierconsole.engine.trainer import FAULT_ENV, FactorialTrainer
from hierconsole.engine.worker import EXIT_DONE
from hierconsole.vocabulary import JobKind

from .conftest import cells_for, make_spec, recorded

pytestmark = pytest.mark.slow  # worker processes

SEEDS = (42, 2024, 3407)
VOLATILE = {"ts", "seconds", "pid"}  # when and how fast, never what was computed


def _specs(root: Path, fs, fs_dir, **changes):
    """The final jobs of one study: one per seed, all reading the study's split files."""
    specs = [make_spec(root / f"s{seed}", fs, fs_dir, seed=seed, **changes) for seed in SEEDS]
    shared = {"train_split": specs[0].train_split, "val_split": specs[0].val_split}
    specs = [replace(s, **shared) for s in specs]
    for s in specs:
        s.write(Path(s.out_dir) / "spec.json")
    return specs


def _record(events: list) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in VOLATILE} for e in recorded(events)]


def _log(spec) -> list[dict]:
    lines = (Path(spec.out_dir) / layout.EVENTS).read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in VOLATILE} for line in lines]


def _bits(folder: Path) -> dict[str, bytes]:
    """Every tensor of the final models and of the last checkpoint, as bytes."""
    out = {}
    for path in sorted(folder.glob("final-*.pt")):
        for key, t in load_payload(path)["model"].items():
            out[f"{path.name}:{key}"] = t.numpy().tobytes()
    epoch, path = list_checkpoints(folder / layout.CHECKPOINTS)[-1]
    for cell, state in load_payload(path)["cells"].items():
        for key, t in state["model"].items():
            out[f"ckpt{epoch}:{cell}:{key}"] = t.numpy().tobytes()
        for k, entry in state["optimizer"]["state"].items():
            for name, t in entry.items():
                out[f"ckpt{epoch}:{cell}:opt{k}:{name}"] = t.numpy().tobytes()
        if "prototypes" in state:  # an objective's own parameters and their moments
            out[f"ckpt{epoch}:{cell}:prototypes"] = state["prototypes"]["value"].numpy().tobytes()
            for name, t in state["prototypes"]["optimizer"].items():
                out[f"ckpt{epoch}:{cell}:prototypes:{name}"] = t.numpy().tobytes()
    return out


@pytest.fixture(scope="module")
def per_seed(tmp_path_factory, tiny_fs, tiny_dir):
    """The reference: each seed's job trained on its own (batched engine), its events and its bits."""
    root = tmp_path_factory.mktemp("per-seed")
    out = {}
    for spec in _specs(root, tiny_fs, tiny_dir):
        events: list = []
        FactorialTrainer(spec, events.append).run()
        out[spec.seed] = (_record(events), _bits(Path(spec.out_dir)))
    return out


def test_stacked_seeds_equal_their_per_seed_jobs_bit_for_bit(tmp_path, tiny_fs, tiny_dir, per_seed):
    specs = _specs(tmp_path, tiny_fs, tiny_dir)
    sinks: list[list] = [[] for _ in specs]
    finals = StackedTrainer(specs, [s.append for s in sinks]).run()
    assert sorted(finals) == sorted(s.job_id for s in specs)
    for spec, events in zip(specs, sinks, strict=True):
        ref_events, ref_bits = per_seed[spec.seed]
        assert _record(events) == ref_events, f"seed {spec.seed}: events differ"
        bits = _bits(Path(spec.out_dir))
        assert bits.keys() == ref_bits.keys()
        changed = [k for k in bits if bits[k] != ref_bits[k]]
        assert not changed, f"seed {spec.seed}: {changed[:5]}"
    # The seeds did train differently: stacking did not make them share anything.
    hashes = {next(e["final_sha256"] for e in _record(s) if e["kind"] == "final") for s in sinks}
    assert len(hashes) == len(SEEDS)


def _worker(specs, home: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault:
        env[FAULT_ENV] = fault
    paths = [str(Path(s.out_dir) / "spec.json") for s in specs]
    return subprocess.run(
        [sys.executable, "-m", "hierconsole.engine.worker", "--home", str(home), *paths],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_stacked_worker_killed_then_resumed_equals_the_per_seed_jobs(tmp_path, tiny_fs, tiny_dir, per_seed):
    # One worker process for the three jobs; SIGKILL in epoch 3 (after two checkpoints of every job).
    specs = _specs(tmp_path, tiny_fs, tiny_dir)
    killed = _worker(specs, tmp_path, fault="3:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    for spec in specs:
        assert [e for e, _ in list_checkpoints(Path(spec.out_dir) / layout.CHECKPOINTS)] == [1, 2]
    done = _worker(specs, tmp_path)
    assert done.returncode == EXIT_DONE, done.stderr
    for spec in specs:
        log = _log(spec)
        starts = [e for e in log if e["kind"] == "start"]
        assert len(starts) == 2 and all(e["jobs_in_process"] == 3 for e in starts)
        assert starts[-1]["device"] == "cpu" and starts[-1]["deterministic"] is None
        assert starts[-1]["torch_version"] == torch.__version__
        assert [e["epoch"] for e in log if e["kind"] == "resume"] == [2]
        assert log[-1]["kind"] == "done"
        ref_events, ref_bits = per_seed[spec.seed]
        assert _bits(Path(spec.out_dir)) == ref_bits, f"seed {spec.seed}"
        # The resumed run's epochs 3.. and finals are the uninterrupted run's.
        resumed = [e for e in log if e["kind"] in ("epoch", "final") and e.get("epoch", 3) >= 3]
        expected = [e for e in ref_events if e["kind"] in ("epoch", "final") and e.get("epoch", 3) >= 3]
        assert resumed == expected


def test_jobs_at_different_epochs_train_one_after_the_other_with_the_same_result(
    tmp_path, tiny_fs, tiny_dir, per_seed
):
    specs = _specs(tmp_path, tiny_fs, tiny_dir)
    FactorialTrainer(specs[0], lambda e: None).run()  # seed 42 is finished; the others have not begun
    sinks: list[list] = [[] for _ in specs]
    StackedTrainer(specs, [s.append for s in sinks]).run()
    assert [e["epoch"] for e in _record(sinks[0]) if e["kind"] == "resume"] == [3]
    for spec in specs:
        assert _bits(Path(spec.out_dir)) == per_seed[spec.seed][1]


def test_only_final_jobs_of_one_study_with_the_same_cells_stack(tmp_path, tiny_fs, tiny_dir):
    specs = _specs(tmp_path, tiny_fs, tiny_dir)
    assert stacking_problem(specs) is None
    assert "differ in their cells" in stacking_problem([specs[0], replace(specs[1], cells=cells_for(("E_R",)))])
    assert "tune job" in stacking_problem([specs[0], replace(specs[1], kind=JobKind.TUNE)])
    assert "repeat" in stacking_problem([specs[0], replace(specs[1], seed=specs[0].seed, job_id="x")])
    assert "reference engine" in stacking_problem([specs[0], replace(specs[1], batched=False)])
    with pytest.raises(ValueError, match="cannot stack these jobs"):
        StackedTrainer([specs[0], replace(specs[1], study_id="other")], [print, print])


def test_stacked_seeds_of_any_components_equal_their_per_seed_jobs_bit_for_bit(tmp_path, tiny_fs, tiny_dir):
    # Lorentz and product heads, flat SupCon and soft-label CE with its leaf prototypes (the autograd path)
    # stack as the paper's cells do.
    arms = ("E_R", "L_S", "M_F", "E_C", "L_C")
    reference = {}
    for spec in _specs(tmp_path / "alone", tiny_fs, tiny_dir, arms=arms):
        events: list = []
        FactorialTrainer(spec, events.append).run()
        reference[spec.seed] = (_record(events), _bits(Path(spec.out_dir)))
    specs = _specs(tmp_path / "stacked", tiny_fs, tiny_dir, arms=arms)
    sinks: list[list] = [[] for _ in specs]
    StackedTrainer(specs, [s.append for s in sinks]).run()
    for spec, events in zip(specs, sinks, strict=True):
        ref_events, ref_bits = reference[spec.seed]
        assert _record(events) == ref_events, f"seed {spec.seed}: events differ"
        bits = _bits(Path(spec.out_dir))
        assert bits.keys() == ref_bits.keys() and all(bits[k] == ref_bits[k] for k in bits)
        assert {k for k in bits if k.endswith(":prototypes")} == {f"ckpt3:{a}:prototypes" for a in ("E_C", "L_C")}
