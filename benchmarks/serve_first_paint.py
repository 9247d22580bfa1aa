"""The console's first paint in a browser through `hierconsole serve`: from navigation to the first view's text.

    python benchmarks/serve_first_paint.py [--rounds 5]

One server (`hierconsole --home HOME serve` in a subprocess, an empty home) and one headless Chromium
(Debian's, tests/cli/served_console.py); each round opens a new page, so each round starts a new console
process, and closes it (waiting for that console to exit) before the next. Milestones, seconds from
Page.navigate, polled every 10 ms in the page:

- page:   textual-serve's script has built its terminal (the page and its script loaded);
- socket: the page's websocket to the server is open (the server has started the console's process);
- bytes:  the console's first output reached the page (the console has started and drawn its first frame);
- text:   the first view's text ("This store is empty.") is on the terminal's screen.

For reference, each round then times the console's first frame without a browser, in the same run and on
the same home: a fresh interpreter running Textual's headless driver (benchmarks/startup.py's measure, CONSOLE below).

Needs the serve extra and the `chromium` package.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cli.served_console import (  # noqa: E402
    FIRST_VIEW,
    SCREEN_ROWS,
    ServedPage,
    descendants,
    free_port,
    start_server,
    stop_server,
    wait_until,
)

MILESTONES = ("page", "socket", "bytes", "text")
REFERENCE = "no browser"
# benchmarks/startup.py's measure, without building the other views in idle time: the first frame does not
# wait for them, and Textual 8 may fail to shut down while one is being built ("dictionary changed size").
CONSOLE = """
import asyncio, sys
from hierconsole.study.db.storage import Store
from hierconsole.tui.app import HierConsole

async def main():
    with Store(sys.argv[1]) as store:
        app = HierConsole(store, orchestrate=False, prebuild_views=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()

asyncio.run(main())
"""
PROBE = f"""(() => {{
  const screen = {SCREEN_ROWS};
  return JSON.stringify({{
    page: !!window.__terminal,
    socket: !!document.querySelector(".textual-terminal.-connected"),
    bytes: document.body !== null && document.body.classList.contains("-first-byte"),
    text: screen !== null && screen.includes({json.dumps(FIRST_VIEW)}),
  }});
}})()"""


def one_round(page: ServedPage, url: str, server_pid: int) -> dict[str, float]:
    reached: dict[str, float] = {}
    start = time.perf_counter()
    page.open(url)
    while len(reached) < len(MILESTONES):
        try:
            flags = json.loads(page.browser.evaluate(PROBE) or "{}")
        except RuntimeError:  # between about:blank and the served page
            flags = {}
        now = time.perf_counter() - start
        for name in (*MILESTONES, REFERENCE):
            if flags.get(name) and name not in reached:
                reached[name] = now
        if now > 120:
            raise TimeoutError(f"after 120 s only {sorted(reached)} were reached")
        time.sleep(0.01)
    page.close_page()
    wait_until(lambda: not descendants(server_pid), "the round's console to exit")
    return reached


def console_alone(home: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CONSOLE, str(home)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        port = free_port()
        home = Path(scratch) / "home"
        server, _ = start_server(home, port)
        page = ServedPage(Path(scratch) / "profile")
        rounds = []
        try:
            for _ in range(args.rounds):
                reached = one_round(page, f"http://127.0.0.1:{port}/", server.pid)
                reached[REFERENCE] = console_alone(home)  # the store is free again: the round's console quit
                rounds.append(reached)
        finally:
            page.close()
            stop_server(server)
    print(f"first paint through hierconsole serve, {args.rounds} rounds (seconds from navigation)")
    print(f"{'milestone':<10}" + "".join(f"{i + 1:>8}" for i in range(args.rounds)) + f"{'median':>9}{'best':>8}")
    for name in (*MILESTONES, REFERENCE):
        values = [r[name] for r in rounds]
        cells = "".join(f"{v:>8.2f}" for v in values)
        print(f"{name:<10}{cells}{statistics.median(values):>9.2f}{min(values):>8.2f}")


if __name__ == "__main__":
    main()
