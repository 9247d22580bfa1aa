"""How long the synthetic data take to make, the CUB-sized set most of all (it stands in for real features).

    python benchmarks/synthetic.py [--repeat 5]

Median and best wall time of `make_synthetic` for each built-in configuration, in this process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hierconsole.datasets import make_synthetic  # noqa: E402
from hierconsole.datasets.synthetic import CUB_SIZED_CONFIG, DEMO_CONFIG  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"# synthetic data  {time.strftime('%Y-%m-%d %H:%M')}  {args.repeat} rounds")
    for name, config in (("demo", DEMO_CONFIG), ("cub-sized", CUB_SIZED_CONFIG)):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fs = make_synthetic(config)
            times.append(time.perf_counter() - t0)
        print(
            f"  {name:10s} {len(fs):6d} samples x {fs.dim:4d}-D   median {statistics.median(times):6.2f} s"
            f"   best {min(times):6.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
