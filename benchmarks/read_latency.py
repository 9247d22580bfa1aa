"""Read commands in a second shell while a study runs, and the console's first frame, as a user waits for them.

    python benchmarks/read_latency.py [--repeat 5] [--epochs 2]

Builds a home with two small complete demo studies (`run demo --epochs N --seeds 42,2024`, twice), then
starts a third, long one (`run demo --epochs 100000`) in the background: its workers load the machine's
cores and it holds the store, so a second shell reads the live snapshot it publishes. Meanwhile each of
`runs`, `studies`, `effects A` and `contrast A B` is run in a fresh interpreter, `--repeat` times (median);
then the run is stopped (SIGINT, what Ctrl-C does) and the same commands are timed on the idle machine,
reading the store itself. The ratio during / idle is what the running study costs a reader.

Breakdown (one more run of each command, in a child that times its phases): `start` the interpreter,
`import` hierconsole's CLI and the command's modules (building the parser), `open` opening the store or
the live snapshot (`Store(read_only=True)`), `query` what the command reads inside its one `with` block,
`render` what it prints after.

The console's first frame is timed on the real command, `hierconsole --home HOME`, in a pseudo-terminal
of 80x24: from the start of the process to the first output that holds the view tabs (the chrome every
frame has), on a home with no store yet, an empty store, and the full home above; then `q` quits it.
Its breakdown (in a child, headless): importing the console, opening the store, the app's start-up to
its first painted frame.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import resource
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ_TARGET = 1.0
FRAME_TARGET = 0.5

PHASES = """
import sys, time
t0 = time.perf_counter()
marks = {}
from hierconsole.study.db import storage

init, close = storage.Store.__init__, storage.Store.close

def timed_init(self, *a, **k):
    marks.setdefault("open0", time.perf_counter())
    init(self, *a, **k)
    marks.setdefault("open1", time.perf_counter())

def timed_close(self):
    close(self)
    marks.setdefault("close", time.perf_counter())

storage.Store.__init__, storage.Store.close = timed_init, timed_close
import hierconsole.cli as cli
real_build = cli.build_parser

def timed_build(*args):
    parser = real_build(*args)
    marks.setdefault("parsed", time.perf_counter())
    return parser

cli.build_parser = timed_build
code = cli.main(sys.argv[2:])
end = time.perf_counter()
with open(sys.argv[1], "w") as f:
    f.write(" ".join(str(marks.get(k, end) - t0) for k in ("parsed", "open0", "open1", "close")))
    f.write(f" {end - t0}")
sys.exit(code)
"""

CONSOLE_PHASES = """
import sys, time
t0 = time.perf_counter()
from hierconsole.tui import app as console
t1 = time.perf_counter()
from hierconsole.study.db.storage import Store
store = Store(sys.argv[1]); store.verify_readable()
t2 = time.perf_counter()
from pathlib import Path

class Timed(console.HierConsole):
    CSS_PATH = str(Path(console.__file__).with_name(console.HierConsole.CSS_PATH))

    def on_mount(self):
        super().on_mount()
        self.call_after_refresh(self._painted)

    def _painted(self):
        self.painted = time.perf_counter()
        self.exit(0)

app = Timed(store, orchestrate=False)
app.run(headless=True, size=(80, 24))
store.close()
with open(sys.argv[2], "w") as f:
    f.write(f"{t1 - t0} {t2 - t1} {app.painted - t2}")
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb", "COLUMNS": "120"}


def cli_argv(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hierconsole", "--home", str(home), *args]


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall(argv: list[str], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds (the command's own, user + system) of `repeat` runs."""
    times, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), cpu_of_children()
        done = subprocess.run(argv, capture_output=True, text=True, env=env())
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_of_children() - c0)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return statistics.median(times), statistics.median(cpus)


def phases(home: Path, args: list[str]) -> dict[str, float]:
    """start, import, open, query, render (seconds) of one run of `hierconsole --home HOME ARGS`."""
    with tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks"
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", PHASES, str(marks), "--home", str(home), *args],
            capture_output=True, env=env(), check=True,
        )  # fmt: skip
        total = time.perf_counter() - t0
        parsed, open0, open1, close, end = (float(v) for v in marks.read_text().split())
    return {
        "start": total - end,
        "import": open0,  # the parser, then the command's own imports up to its store
        "open": open1 - open0,
        "query": close - open1,
        "render": end - close,
    }


def first_frame_pty(homes: Callable[[], Path], repeat: int, columns: int = 80, rows: int = 24) -> float:
    """Median seconds from starting `hierconsole --home HOME` in a pseudo-terminal to its first frame
    (`homes()` gives the home of each try)."""
    times = []
    for _ in range(repeat):
        home = homes()
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cli_argv(home),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env(), "TERM": "xterm-256color"},
            start_new_session=True,
        )
        os.close(slave)
        seen = b""
        painted = None
        deadline = t0 + 120
        while painted is None and time.perf_counter() < deadline:
            ready, _, _ = select.select([master], [], [], 0.01)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                if b"Datasets" in seen:
                    painted = time.perf_counter() - t0
        if painted is None:
            proc.kill()
            raise SystemExit(f"no frame from the console on {home}:\n{seen[-2000:]!r}")
        times.append(painted)
        os.write(master, b"q")
        # Drain until it exits (a full pty would block it).
        end = time.perf_counter() + 30
        while proc.poll() is None and time.perf_counter() < end:
            if select.select([master], [], [], 0.05)[0]:
                with contextlib.suppress(OSError):
                    os.read(master, 65536)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    return statistics.median(times)


def console_phases(home: Path) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "marks"
        subprocess.run(
            [sys.executable, "-c", CONSOLE_PHASES, str(home), str(out)],
            capture_output=True, env={**env(), "TERM": "xterm-256color"}, check=True,
        )  # fmt: skip
        a, b, c = (float(v) for v in out.read_text().split())
    return a, b, c


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def study_ids(home: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from hierconsole.study.db.storage import Store\n"
         "with Store(sys.argv[1], read_only=True) as s:\n"
         "    print('\\n'.join(r[0] for r in s.rows('SELECT study_id FROM studies ORDER BY created_at')))",
         str(home)],
        capture_output=True, text=True, env=env(), check=True,
    )  # fmt: skip
    return done.stdout.split()


def wait_for_snapshot(home: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not (home / ".live" / "holder.json").exists():
        if time.monotonic() > deadline:
            raise SystemExit("the running study published no live snapshot")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the two complete studies")
    parser.add_argument("--home", type=Path, help="keep the home here (default: a temporary folder)")
    args = parser.parse_args()
    print(f"# read_latency  {time.strftime('%Y-%m-%d %H:%M')}  medians of {args.repeat}, fresh interpreters")
    print(f"  {os.cpu_count()} CPUs, load average at start {load()}")
    with tempfile.TemporaryDirectory(prefix="hc-read-") as tmp:
        base = Path(tmp)
        home = args.home or base / "home"
        t0 = time.perf_counter()
        for _ in range(2):
            subprocess.run(
                cli_argv(home, "run", "demo", "--epochs", str(args.epochs), "--seeds", "42,2024"),
                capture_output=True, env=env(), check=True,
            )  # fmt: skip
        a, b = study_ids(home)[:2]
        print(f"  built two complete demo studies in {time.perf_counter() - t0:.0f} s")
        reads = {
            "runs": ["runs"],
            "studies": ["studies"],
            "effects A": ["effects", a],
            "contrast A B": ["contrast", a, b],
        }
        # The console on a home with nothing yet (no store file: a new folder each try) and on an empty store.
        fresh = iter(range(10**6))

        def nothing() -> Path:
            folder = base / f"nothing-{next(fresh)}"
            folder.mkdir()
            return folder

        empty = base / "empty"
        empty.mkdir()
        subprocess.run(
            [sys.executable, "-c", "import sys; from hierconsole.study.db.storage import Store\n"
             "Store(sys.argv[1]).close()", str(empty)], env=env(), check=True,
        )  # fmt: skip

        holder = subprocess.Popen(
            cli_argv(home, "run", "demo", "--epochs", "100000", "--seeds", "42,2024,3407"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(), start_new_session=True,
        )  # fmt: skip
        try:
            wait_for_snapshot(home)
            time.sleep(5)  # the workers started and training
            during_load = load()
            during = {name: wall(cli_argv(home, *argv), args.repeat) for name, argv in reads.items()}
            during_phases = {name: phases(home, argv) for name, argv in reads.items()}
            during_load = f"{during_load} -> {load()}"
        finally:
            holder.send_signal(signal.SIGINT)
            try:
                holder.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(holder.pid, signal.SIGKILL)
                holder.wait()
        time.sleep(5)
        idle_load = load()
        idle = {name: wall(cli_argv(home, *argv), args.repeat) for name, argv in reads.items()}
        idle_phases = {name: phases(home, argv) for name, argv in reads.items()}

        print()
        print(f"## reads in a second shell (target <= {READ_TARGET:.1f} s during a run)")
        print(f"  during a run: load average {during_load}; idle: load average {idle_load}")
        print("  wall s (CPU s of the command itself); breakdown of one more run, wall s: start, import, open,")
        print("  query, render")
        print(f"  {'command':14s} {'during':>13s} {'idle':>13s} {'ratio':>6s}   breakdown during | idle")
        for name in reads:
            (d, dc), (i, ic) = during[name], idle[name]
            dp = " ".join(f"{v:.2f}" for v in during_phases[name].values())
            ip = " ".join(f"{v:.2f}" for v in idle_phases[name].values())
            flag = "ok" if d <= READ_TARGET else "OVER"
            print(f"  {name:14s} {d:5.2f} ({dc:4.2f}) {i:5.2f} ({ic:4.2f}) {d / i:5.2f}x   {dp} | {ip}   {flag}")

        print()
        print(f"## the console's first frame, hierconsole --home HOME in an 80x24 pty (target <= {FRAME_TARGET} s)")
        print(f"  load average {load()}")
        cases: dict[str, Callable[[], Path]] = {
            "no store yet": nothing,
            "empty store": lambda: empty,
            "full home": lambda: home,
        }
        for label, homes in cases.items():
            seconds = first_frame_pty(homes, args.repeat)
            imp, store, frame = console_phases(homes())
            flag = "ok" if seconds <= FRAME_TARGET else "OVER"
            print(
                f"  {label:14s} {seconds:6.2f} s   breakdown (headless): import {imp:.2f}, store {store:.2f}, "
                f"first frame {frame:.2f}   {flag}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
