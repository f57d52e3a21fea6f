#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA, run the CUDA tests, the scheme tests on the
# GPU and the ops benchmark; logs and JSON under $OUT (or ./out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
python3 -c "import fhetorch; assert fhetorch._ops.has_cuda(), 'CUDA kernels missing'; print('CUDA kernels: yes')" || exit 1
STAGE="${1:-all}"
if [ "$STAGE" = all ] || [ "$STAGE" = tests ]; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests 2>&1 | tee "$OUT/cuda_tests.log" | tail -25
  FHETORCH_TEST_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider -m "not slow" tests/ckks tests/tensor 2>&1 \
    | tee "$OUT/scheme_cuda.log" | tail -15
fi
if [ "$STAGE" = all ] || [ "$STAGE" = bench ]; then
  timeout 400 python3 -m benchmarks --suite ops --device cuda --json "$OUT/ops.json" 2>&1 | tee "$OUT/bench.log" | tail -60
fi
