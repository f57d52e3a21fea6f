#!/usr/bin/env bash
# Compiles every CUDA source (csrc/cuda/*.cu) on its own, torch-free, for sm_90, warnings as
# errors; then, where a torch is importable (a CPU-only one will do), syntax-checks the CUDA
# binding csrc/bind/cuda.cpp against its headers. Exits non-zero if anything fails. Needs
# nvcc only (no GPU).
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
PY="${PYTHON:-python}"
[ -x .venv/bin/python ] && PY=.venv/bin/python
if torch_dir="$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)"; then
  cuda_inc="${CUDA_HOME:-/usr/local/cuda}/include"
  py_inc="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  if "${CXX:-g++}" -fsyntax-only -std=c++17 -DFHETORCH_CUDA -I"$torch_dir/include" \
      -I"$torch_dir/include/torch/csrc/api/include" -I"$cuda_inc" -I"$py_inc" csrc/bind/cuda.cpp 2>"$tmp/bind.log"; then
    echo "ok   csrc/bind/cuda.cpp (syntax)"
  else
    cat "$tmp/bind.log" >&2
    echo "FAIL csrc/bind/cuda.cpp (syntax)" >&2
    status=1
  fi
else
  echo "no torch importable: skipping the syntax check of csrc/bind/cuda.cpp"
fi
exit $status
