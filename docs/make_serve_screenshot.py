"""Regenerate docs/serve.png, the README's picture of the console served to a browser (`hierconsole serve`).

    python docs/make_serve_screenshot.py                 # runs the demo study in a scratch store (about a minute)
    python docs/make_serve_screenshot.py --home DIR      # reuses DIR's newest complete study if it has one

The study is real (as in docs/make_screenshot.py); the server is `hierconsole --home HOME serve` in a
subprocess and the browser Debian's headless Chromium (tests/cli/served_console.py), shown the effects view.
Needs the serve extra and the `chromium` package.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "docs")]

from make_screenshot import complete_study  # noqa: E402

from hierconsole.study.db.storage import Store  # noqa: E402
from tests.cli.served_console import ServedPage, free_port, start_server, stop_server  # noqa: E402

OUT = ROOT / "docs" / "serve.png"
EFFECTS = "mean ± SD"
"""Text of the effects view's arm table, there once the view has painted its study."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, help="store folder to use (default: a scratch folder)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home = args.home or Path(scratch) / "home"
        with Store(home) as store:  # closed before the served console opens it
            complete_study(store)
        port = free_port()
        server, _ = start_server(home, port)
        page = ServedPage(Path(scratch) / "profile")
        try:
            page.open(f"http://127.0.0.1:{port}/")
            page.wait_for("Effects")
            page.press("3")
            page.wait_for(EFFECTS)
            page.settle()
            args.out.write_bytes(page.screenshot())
        finally:
            page.close()
            stop_server(server)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
