#!/usr/bin/env bash
# One GPU call for the fused key-switching work: build, the fused-op CUDA tests, the
# key-switching benchmark (fused vs unfused, per-kernel profile), then the remaining CUDA
# tests and the scheme tests on the GPU. Logs and JSON under $OUT (or ./out).
#   bash scripts/gpu_ks.sh [all|bench|tests]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
STAGE="${1:-all}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
python3 -c "import fhetorch; assert fhetorch._ops.has_cuda(), 'CUDA kernels missing'" || exit 1
if [ "$STAGE" != bench ]; then
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/_ops/test_fused.py 2>&1 \
    | tee "$OUT/fused_cuda.log" | tail -6
fi
if [ "$STAGE" != tests ]; then
  timeout 240 python3 scripts/ks_bench.py --json "$OUT/ks_bench.json" 2>&1 | tee "$OUT/ks_bench.log" | tail -95
fi
if [ "$STAGE" != bench ]; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider -m cuda tests --ignore=tests/_ops/test_fused.py 2>&1 \
    | tee "$OUT/cuda_tests.log" | tail -4
  FHETORCH_TEST_DEVICE=cuda timeout 120 python3 -m pytest -q -p no:cacheprovider -m "not slow" tests/_ckks tests/tensor \
    2>&1 | tee "$OUT/scheme_cuda.log" | tail -4
fi
