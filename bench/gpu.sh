#!/usr/bin/env bash
# One prepared run on a machine with an NVIDIA GPU, results under $OUT (a temporary folder where unset):
# nvidia-smi, the CUDA tests, the zoo on the GPU against NumPy, BEAM against torch (bench/gpu.py says what and
# how). Without a GPU it says so, runs the checks that need none and exits 0.
#   OUT=/some/dir bench/gpu.sh [--minutes 8] [--only gemm_fp16 ...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d -t uopviz-gpu.XXXXXX)}
mkdir -p "$OUT"
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "results in $OUT"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed (see $OUT/nvidia-smi.txt)"
else
    echo "nvidia-smi is not installed here" | tee "$OUT/nvidia-smi.txt"
fi
"$PYTHON" bench/gpu.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu.log"
