#!/usr/bin/env bash
# Compiles every CUDA source (csrc/cuda/*.cu) on its own, torch-free, for sm_90; exits
# non-zero if any fails. Needs nvcc only (no GPU, no torch).
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC="${NVCC:-nvcc}"
command -v "$NVCC" >/dev/null 2>&1 || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
shopt -s nullglob
srcs=(csrc/cuda/*.cu)
[ ${#srcs[@]} -gt 0 ] || { echo "no csrc/cuda/*.cu found" >&2; exit 1; }
for f in "${srcs[@]}"; do
  obj="$tmp/$(basename "$f" .cu).o"
  if "$NVCC" -c -arch=sm_90 -std=c++17 -O3 -Werror all-warnings -o "$obj" "$f"; then
    echo "ok   $f"
  else
    echo "FAIL $f" >&2
    status=1
  fi
done
exit $status
