"""The console as a user waits for it: first painted frame and view switches, on an empty and a large store.

    python benchmarks/console.py [--studies 50] [--repeat 10] [--home DIR]

The large store holds `--studies` fabricated studies on the tiny synthetic set (three seeds each, 4 cells,
5 epochs of events; every other one locked, evaluated and audited), built through the real ingest and
phase logic with the fabricated events of the console tests (tests/stores/fixed.py). Built once into
`--home` (default: a temporary folder) and reused when that folder already holds it.

First frame: wall time from starting a fresh interpreter to the first frame Textual's headless driver
painted (the child prints the wall clock on its first screen's first refresh), median of `--repeat`.
View switch: in one console, each of the six views shown in turn (the action its number key runs) until
it shows its data (its loading workers done, every message handled, the screen refreshed); the first visit of a view (its screen is built) and
the later ones are reported apart, medians over `--repeat` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIRST_FRAME = """
import sys, time
from hierconsole.study.db.storage import Store
from pathlib import Path
from hierconsole.tui import app as console

class Timed(console.HierConsole):
    CSS_PATH = str(Path(console.__file__).with_name(console.HierConsole.CSS_PATH))

    def on_mount(self):
        super().on_mount()
        self.call_after_refresh(self._painted)

    def _painted(self):
        with open(sys.argv[2], "w") as f:  # stdout belongs to Textual while the app runs
            f.write(f"{time.time():.6f} {time.process_time():.6f}")
        self.exit(0)

with Store(sys.argv[1]) as store:
    Timed(store, orchestrate=False).run(headless=True, size=(80, 24))
"""


def build_store(home: Path, n_studies: int) -> None:
    """`n_studies` studies on the tiny set; even ones complete (evaluated, audited), odd ones training."""
    import pytest

    from hierconsole.datasets import make_synthetic
    from hierconsole.study.db.catalog import register_dataset
    from hierconsole.study.db.storage import Store
    from hierconsole.study.run.lifecycle import advance, create_study
    from tests.stores import fixed as fx
    from tests.tiny import TINY, tiny_preset

    with Store(home) as store, pytest.MonkeyPatch.context() as mp:
        register_dataset(store, make_synthetic(TINY))
        pinned = {
            "evaluation.qg_seeds": list(fx.SEEDS),
            "evaluation.aggregation": "micro",
            "temperature.euclidean": 0.2,
            "temperature.poincare": 0.2,
            "training.drop_last": True,
        }
        preset = tiny_preset(epochs=fx.EPOCHS, seeds=fx.SEEDS, **pinned)
        for i in range(n_studies):
            sid = f"bench-{i:03d}"
            mp.setattr("hierconsole.study.run.lifecycle.new_study_id", lambda preset, sid=sid: sid)
            create_study(store, preset, "tiny")
            complete = i % 2 == 0
            for seed in fx.SEEDS:
                job = f"{sid}/final-s{seed}"
                fx._apply(
                    store, job, sid, "final", seed, fx.training_events(seed, fx.EPOCHS, finish=complete)
                )
                fx._set_job(store, job, "finished" if complete else "running")
            if complete:
                advance(store, sid)
                store.execute(
                    "UPDATE studies SET locked_at = now(), test_first_read_at = now() WHERE study_id = ?",
                    [sid],
                )
                fx._apply(store, f"{sid}/evaluate", sid, "evaluate", 0, fx.evaluation_events(sid))
                fx._set_job(store, f"{sid}/evaluate", "finished")
                advance(store, sid)


def first_frame(home: Path, repeat: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds of the child) from process start to the first painted frame."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    out, cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        stamp = Path(tmp) / "painted"
        script = Path(tmp) / "first_frame.py"
        script.write_text(FIRST_FRAME)
        for _ in range(repeat):
            t0 = time.time()
            subprocess.run(
                [sys.executable, str(script), str(home), str(stamp)], capture_output=True, env=env, check=True
            )
            painted, cpu_seconds = (float(v) for v in stamp.read_text().split())
            out.append(painted - t0)
            cpu.append(cpu_seconds)
    return out, cpu


async def shown(app) -> None:
    """Until the current view has loaded its data and that is painted: its workers done, every message
    handled, then one refresh."""
    while True:
        busy = any(not w.is_finished for w in app.workers if w.group != "orchestrator")
        nodes = [app, app.screen, *app.screen.walk_children()]
        if not busy and all(n._message_queue.empty() for n in nodes):
            break
        await asyncio.sleep(0.001)
    painted = asyncio.Event()
    app.call_after_refresh(painted.set)
    await painted.wait()


Switches = dict[str, list[tuple[float, float]]]


async def view_switches(home: Path, repeat: int) -> tuple[Switches, Switches]:
    """Each view key's action run on the app's loop (what the key runs), timed until the view is shown;
    no Pilot in the loop, whose own waits cost more than the switch."""
    from hierconsole.study.db.storage import Store
    from hierconsole.tui.actions import VIEW_MODES
    from hierconsole.tui.app import HierConsole
    from tests.tui.conftest import make_app

    first: Switches = {}
    later: Switches = {mode: [] for mode, _ in VIEW_MODES}
    with Store(home) as store:
        app = (
            make_app(store, prebuild_views=True)
            if hasattr(HierConsole, "prebuild_next_view")
            else make_app(store)
        )
        async with app.run_test(size=(120, 40)):
            await shown(app)
            # The console builds the other views in the idle time after its first frame (a tree without
            # that builds each on its first visit): measured once that is done, as a user meets it.
            deadline = time.monotonic() + 60
            while getattr(app, "prebuild_views", False) and time.monotonic() < deadline:
                if all(mode in app._screen_stacks for mode, _ in VIEW_MODES):
                    break
                await asyncio.sleep(0.01)
            await shown(app)
            for round_ in range(repeat + 1):
                for mode, _ in VIEW_MODES:
                    t0, c0 = time.perf_counter(), time.process_time()
                    app.action_show_view(mode)
                    await shown(app)
                    seconds = (time.perf_counter() - t0, time.process_time() - c0)
                    assert app.current_mode == mode
                    if mode not in first:
                        first[mode] = [seconds]
                    elif round_ > 0:
                        later[mode].append(seconds)
    return first, later


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--home", type=Path, default=None, help="where the large store is built (kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hc-console-") as tmp:
        empty = Path(tmp) / "empty"
        large = args.home or Path(tmp) / "large"
        if not (large / "hierconsole.duckdb").exists():
            t0 = time.perf_counter()
            build_store(large, args.studies)
            print(f"# built {args.studies} studies in {time.perf_counter() - t0:.1f} s under {large}")
        print(f"# console  {time.strftime('%Y-%m-%d %H:%M')}  medians of {args.repeat}")
        print(f"  load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
        print("  (wall: what the user waits; CPU: this process's own time, steadier on a loaded machine)")
        for label, home in (("empty store", empty), (f"{args.studies} studies", large)):
            wall, cpu = first_frame(home, args.repeat)
            print(
                f"  first frame, {label:12s} wall {ms(statistics.median(wall))} (min {ms(min(wall))})"
                f"   CPU {ms(statistics.median(cpu))}"
            )
        first, later = asyncio.run(view_switches(large, args.repeat))
        print(
            f"  view switch ({args.studies} studies)    first visit wall / CPU     later: median wall / CPU"
        )
        for mode in first:
            (fw, fc), lw, lc = first[mode][0], *zip(*later[mode], strict=True)
            print(
                f"    {mode:16s}  {ms(fw)} / {ms(fc)}     {ms(statistics.median(lw))} / {ms(statistics.median(lc))}"
            )
        every = [s for values in later.values() for s in values]
        firsts = [v[0] for v in first.values()]
        print(
            f"    {'all views':16s}  {ms(statistics.median(w for w, _ in firsts))} / "
            f"{ms(statistics.median(c for _, c in firsts))}     {ms(statistics.median(w for w, _ in every))} / "
            f"{ms(statistics.median(c for _, c in every))}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
