#!/usr/bin/env bash
# Prepare, on a machine with network access, the wheels benchmarks/gpu_check.sh installs on the GPU
# machine (Python 3.12, a CUDA torch and numpy preinstalled, no network, 64 MiB carried per run):
#
#   benchmarks/gpu_wheels.sh [FOLDER]       # default: gpu_wheels/ at the repository root (git-ignored)
#
# hierconsole's own wheel (built from this checkout), geoopt and scipy (geoopt imports scipy at import
# time), and pytest with its requirements (gpu_check.sh runs the CUDA test of tests/engine/test_geometry.py
# with it; nothing else of the suite, which needs the store). Every other requirement of hierconsole
# stays behind: a worker imports only torch, numpy and geoopt (tests/engine/test_import_closure.py).
# WHEEL_PYTHON=3.11 fetches for another interpreter (a dry run of gpu_check.sh here). Writes
# FOLDER/SIZES.txt and fails if the folder exceeds the 64 MiB a run may carry.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu_wheels}
PYTHON=${PYTHON:-python}
LIMIT_BYTES=$((64 * 1024 * 1024))

rm -rf "$OUT"
mkdir -p "$OUT"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$OUT" .
# Binary wheels for the GPU machine's interpreter (CPython 3.12, x86_64 Linux), whatever runs this.
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "${WHEEL_PYTHON:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any --dest "$OUT" \
    geoopt==0.5.1 "scipy>=1.14" pytest iniconfig pluggy packaging pygments
total=$(du -cb "$OUT"/*.whl | tail -1 | cut -f1)
{
    echo "# wheels for benchmarks/gpu_check.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
    for f in "$OUT"/*.whl; do printf '%10d  %s\n' "$(stat -c %s "$f")" "$(basename "$f")"; done
    printf '%10d  total (limit %d)\n' "$total" "$LIMIT_BYTES"
} > "$OUT/SIZES.txt"
cat "$OUT/SIZES.txt"
if [ "$total" -gt "$LIMIT_BYTES" ]; then
    echo "gpu_wheels: $OUT holds $total bytes, more than the 64 MiB a run may carry" >&2
    exit 1
fi
