#!/usr/bin/env bash
# The GPU path, checked and measured in one unattended run on a machine with an NVIDIA GPU:
#
#   benchmarks/gpu_check.sh OUTDIR [WHEELS]     # WHEELS: default gpu_wheels/ (benchmarks/gpu_wheels.sh)
#
# The machine needs Python 3.12 with a CUDA build of torch and numpy; everything else comes from WHEELS
# (hierconsole, geoopt, scipy, pytest and its requirements), installed offline into a folder of their
# own (pip install --no-index --no-deps --target). Steps, each time-boxed, each run whatever the previous
# ones gave (a failure is recorded, never fatal):
#
#   environment     nvidia-smi, Python, torch, numpy
#   install         the carried wheels
#   imports         hierconsole, geoopt and torch.cuda in the installed folder
#   cuda_checks     benchmarks/cuda_checks.py: device settings, CUDA against CPU, the fast paths against
#                   their references, the same run twice, a killed worker resumed (see that script)
#   factorial       benchmarks/gpu_factorial.py: the full 12-run x 100-epoch CUB-sized factorial end to
#                   end, stacked, with its CPU reference and GEMM-only floor
#   short_a/short_b the 10-epoch factorial twice: identical fingerprints (models and test metrics)?
#   pytest_cuda     tests/engine/test_geometry.py under pytest, its CUDA test included
#   per_seed        the full factorial with the seeds one after the other (what stacking gains)
#
# Everything goes to OUTDIR: one log per step, the scripts' JSON and markdown, and summary.md (the
# steps' status and times, the figures, the checks). The whole run stays within $GPU_CHECK_BUDGET
# seconds (default 480): a step gets at most what is left, and steps that no longer fit are recorded as
# skipped. If the CUDA checks stop on an operation without a deterministic CUDA kernel, the later steps
# run with HIERCONSOLE_CUDA_DETERMINISM=warn (recorded), so one run still yields every figure.
set -uo pipefail

OUT=${1:?usage: benchmarks/gpu_check.sh OUTDIR [WHEELS]}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WHEELS=$(cd "${2:-$REPO/gpu_wheels}" 2>/dev/null && pwd || echo "${2:-$REPO/gpu_wheels}")
# The interpreter that has torch: $PYTHON, else python3, else python.
if [ -z "${PYTHON:-}" ]; then
    for candidate in python3 python; do
        if "$candidate" -c "import torch" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
    done
fi
PYTHON=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-480}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SITE=$(mktemp -d /tmp/hc-gpu-site.XXXXXX)
START=$(date +%s)
STEPS="$OUT/steps.tsv"
printf 'step\tstatus\texit\tseconds\tlimit\n' > "$STEPS"
cd "$REPO" || exit 2

elapsed() { echo $(( $(date +%s) - START )); }

# step NAME LIMIT_SECONDS COMMAND...: run it with its output in OUTDIR/NAME.log, at most LIMIT seconds
# and never past the budget; record status (ok, failed, timeout, skipped), exit code and seconds.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$(( BUDGET - $(elapsed) ))
    if [ "$left" -lt 15 ]; then
        printf '%s\tskipped\t-\t0\t%s\n' "$name" "$limit" >> "$STEPS"
        echo "== $name: skipped (budget spent)"
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (at most ${limit} s)"
    local t0 rc status
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=ok ;;
        124|137) status=timeout ;;
        *) status=failed ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$(( $(date +%s) - t0 ))" "$limit" >> "$STEPS"
    tail -n 15 "$OUT/$name.log"
    return 0
}

environment() {
    date -u '+%Y-%m-%d %H:%M:%S UTC'
    uname -a
    nproc
    command -v nvidia-smi >/dev/null && nvidia-smi
    "$PYTHON" - <<'PY'
import platform, sys
print("python", platform.python_version(), sys.executable)
try:
    import numpy
    print("numpy", numpy.__version__)
except Exception as exc:
    print("numpy: not importable:", exc)
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"device {i}: {p.name}, {p.total_memory / 2**30:.0f} GiB, capability {p.major}.{p.minor}")
PY
    "$PYTHON" -m pip --version
}

install() {
    ls -l "$WHEELS"
    if "$PYTHON" -m pip --version >/dev/null 2>&1; then
        "$PYTHON" -m pip install --no-index --no-deps --no-compile --disable-pip-version-check \
            --target "$SITE" "$WHEELS"/*.whl
    else
        # No pip: a wheel is a zip archive laid out as installed, so unpacking it is enough to import it.
        "$PYTHON" - "$SITE" "$WHEELS"/*.whl <<'PY'
import sys, zipfile
for wheel in sys.argv[2:]:
    zipfile.ZipFile(wheel).extractall(sys.argv[1])
    print("unpacked", wheel)
PY
    fi
}

imports() {
    "$PYTHON" - <<'PY'
import sys
import geoopt, hierconsole, numpy, scipy, torch
import hierconsole.engine.worker, hierconsole.engine.stacked, hierconsole.engine.evaluator
print("hierconsole", hierconsole.__version__, hierconsole.__file__)
print("geoopt", geoopt.__version__, "scipy", scipy.__version__, "numpy", numpy.__version__)
print("torch", torch.__version__, "cuda available", torch.cuda.is_available())
heavy = [m for m in ("duckdb", "polars", "pyarrow", "textual") if m in sys.modules]
print("store/console packages imported:", heavy or "none")
import os
cuda_needed = os.environ.get("DEVICE") == "cuda"
sys.exit(0 if (torch.cuda.is_available() or not cuda_needed) and not heavy else 1)
PY
}

same_fingerprints() {
    "$PYTHON" - "$OUT/short_a/gpu_factorial.json" "$OUT/short_b/gpu_factorial.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["run"] for p in sys.argv[1:])
print("run a:", a["fingerprint"])
print("run b:", b["fingerprint"])
diff = [k for k in a["metrics"] if a["metrics"][k] != b["metrics"].get(k)]
print("test results that differ:", len(diff), diff[:5])
sys.exit(0 if a["fingerprint"] == b["fingerprint"] else 1)
PY
}

summary() {
    "$PYTHON" - "$OUT" "$BUDGET" "$(elapsed)" <<'PY'
import csv, json, sys
from pathlib import Path
out, budget, spent = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
lines = ["# gpu_check", ""]
env = out / "environment.log"
if env.exists():
    lines += ["```", *env.read_text().splitlines()[:40], "```", ""]
lines += [f"Budget {budget} s, spent {spent} s.", "", "| step | status | exit | seconds | limit |", "|---|---|---|---|---|"]
for row in csv.DictReader(open(out / "steps.tsv"), delimiter="\t"):
    lines.append(f"| {row['step']} | {row['status']} | {row['exit']} | {row['seconds']} | {row['limit']} |")
mode = out / "determinism_mode.txt"
if mode.exists():
    lines += ["", mode.read_text().strip()]
checks = out / "cuda_checks" / "cuda_checks.json"
if checks.exists():
    lines += ["", "## CUDA checks", "", "| check | status | seconds | detail |", "|---|---|---|---|"]
    for c in json.loads(checks.read_text())["checks"]:
        lines.append(f"| {c['check']} | {c['status']} | {c['seconds']:.1f} | {c['detail']} |")
for name in ("factorial", "per_seed"):
    md = out / name / "gpu_factorial.md"
    if md.exists():
        lines += ["", f"## {name}", "", md.read_text().replace("# gpu_factorial", "### gpu_factorial")]
fp = out / "same_fingerprints.log"
if fp.exists():
    lines += ["", "## The 10-epoch factorial twice", "", "```", fp.read_text().strip(), "```"]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}

# GPU_CHECK_DRY_RUN=1: the same steps on CPU with the demo data and a few epochs, to try the script itself
# on a machine without a GPU (its figures mean nothing).
DEVICE=cuda
FULL=(--dataset cub)
SHORT=(--dataset cub --epochs 10)
if [ "${GPU_CHECK_DRY_RUN:-0}" = 1 ]; then
    DEVICE=cpu
    FULL=(--dataset demo --epochs 3)
    SHORT=(--dataset demo --epochs 2)
fi
export PYTHON SITE WHEELS OUT DEVICE
export -f environment install imports same_fingerprints
export PYTHONPATH="$SITE"
export PYTHONDONTWRITEBYTECODE=1
step environment 30 bash -c environment
step install 90 bash -c install
step imports 60 bash -c imports
step cuda_checks 200 "$PYTHON" benchmarks/cuda_checks.py --device "$DEVICE" --out "$OUT/cuda_checks"
if grep -q "deterministic implementation\|use_deterministic_algorithms" "$OUT/cuda_checks.log" 2>/dev/null; then
    export HIERCONSOLE_CUDA_DETERMINISM=warn
    echo "The CUDA checks met an operation without a deterministic CUDA kernel (cuda_checks.log); the later" \
        "steps ran with HIERCONSOLE_CUDA_DETERMINISM=warn, and their warnings name every such operation." \
        > "$OUT/determinism_mode.txt"
fi
step factorial 240 "$PYTHON" benchmarks/gpu_factorial.py --device "$DEVICE" "${FULL[@]}" \
    --out "$OUT/factorial" --cpu-epochs 2 --cpu-threads "$(nproc)"
step short_a 90 "$PYTHON" benchmarks/gpu_factorial.py --device "$DEVICE" "${SHORT[@]}" --cpu-epochs 0 \
    --no-gemm --out "$OUT/short_a"
step short_b 90 "$PYTHON" benchmarks/gpu_factorial.py --device "$DEVICE" "${SHORT[@]}" --cpu-epochs 0 \
    --no-gemm --out "$OUT/short_b"
step same_fingerprints 20 bash -c same_fingerprints
step pytest_cuda 60 "$PYTHON" -m pytest -q -p no:cacheprovider --noconftest tests/engine/test_geometry.py
step per_seed 150 "$PYTHON" benchmarks/gpu_factorial.py --device "$DEVICE" "${FULL[@]}" --mode per-seed \
    --cpu-epochs 0 --out "$OUT/per_seed"
summary > /dev/null
cat "$OUT/summary.md"
rm -rf "$SITE"
# The exit status says whether every step that ran succeeded; in a dry run (CI: .ci/run) whether every
# step ran and succeeded, so a run whose steps were skipped never reads as a GPU path that works.
awk -v dry="${GPU_CHECK_DRY_RUN:-0}" -F'\t' \
    'NR > 1 && ($2 == "failed" || $2 == "timeout" || (dry == 1 && $2 == "skipped")) { bad = 1 } END { exit bad }' \
    "$STEPS"
