#!/usr/bin/env bash
# On the GPU machine: build, run the bootstrapping tests marked cuda and the bts benchmark;
# logs and JSON under $OUT (or ./out). Usage: bash scripts/gpu_bts.sh [presets] [repeat]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
PRESETS="${1:-n16-bts40,n16-bts35}"
REPEAT="${2:-5}"
if [ -n "${BTS_TESTS:-}" ]; then
  timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m cuda tests/circuits 2>&1 | tee "$OUT/bts_tests.log" | tail -15
fi
timeout 480 python3 -m benchmarks --suite bts --device cuda --shapes "$PRESETS" --repeat "$REPEAT" --warmup 1 \
  --json "$OUT/bts.json" 2>&1 | tee "$OUT/bts.log" | tail -45
