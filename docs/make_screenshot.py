"""Regenerate docs/effects.svg, the README's picture of the effects view at 80x24.

    python docs/make_screenshot.py                 # runs the demo study in a scratch store (about a minute)
    python docs/make_screenshot.py --home DIR      # reuses DIR's newest complete study if it has one

The study is real: the shipped demo preset on the synthetic demo data, trained by the usual worker processes.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from hierconsole.config import load_preset
from hierconsole.study.db.catalog import ensure_dataset
from hierconsole.study.db.storage import Store
from hierconsole.study.run.lifecycle import create_study
from hierconsole.study.run.orchestrator import Orchestrator
from hierconsole.tui.app import HierConsole

OUT = Path(__file__).resolve().parent / "effects.svg"


def complete_study(store: Store) -> str:
    row = store.one("SELECT study_id FROM studies WHERE phase = 'complete' ORDER BY created_at DESC LIMIT 1")
    if row is not None:
        return row[0]
    preset = load_preset("demo")
    study_id = create_study(store, preset, ensure_dataset(store, preset.data.dataset))
    Orchestrator(store, max_parallel=preset.compute.max_parallel_jobs).run_until_idle([study_id])
    return study_id


async def screenshot(store: Store, study_id: str, out: Path) -> None:
    app = HierConsole(store, orchestrate=False, study=study_id, home_label="~/.local/share/hierconsole")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", help="store folder to use (default: a scratch folder)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, Store(args.home or scratch) as store:
        study_id = complete_study(store)
        asyncio.run(screenshot(store, study_id, args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
