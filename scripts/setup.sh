#!/usr/bin/env bash
# Creates .venv (if missing) with torch and builds fhetorch into it, editable.
# Uses the torch already installed when run inside an environment that has one (the GPU
# machine); never lets pip download a second torch into a build environment.
set -euo pipefail
cd "$(dirname "$0")/.."
if python3 -c "import torch" 2>/dev/null && [ -z "${FHETORCH_VENV:-}" ] && [ ! -d .venv ]; then
  PY=python3  # an environment that already has torch (e.g. the GPU machine)
else
  [ -d .venv ] || python3 -m venv .venv
  . .venv/bin/activate
  PY=python
  $PY -m pip install -q --disable-pip-version-check "setuptools>=70.1" wheel ninja
  $PY -c "import torch" 2>/dev/null || $PY -m pip install -q --disable-pip-version-check torch==2.13.0
  $PY -m pip install -q --disable-pip-version-check numpy tqdm pytest pytest-timeout scikit-learn
fi
export MAX_JOBS="${MAX_JOBS:-4}"
$PY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . >/dev/null
$PY -c "import fhetorch; print('fhetorch', fhetorch.__version__, 'built; CUDA kernels:', fhetorch._ops.has_cuda())"
