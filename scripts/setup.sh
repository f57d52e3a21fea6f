#!/usr/bin/env bash
# Creates .venv (if missing) with torch and builds fhetorch into it, editable; each step is
# announced before it starts. A rerun skips what is done: the packages once installed, and the
# build while the sources, the build flags and torch are the ones it was made from.
# Uses the torch already installed when run inside an environment that has one (the GPU
# machine); never lets pip download a second torch into a build environment.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "setup: $*"; }
if python3 -c "import torch" 2>/dev/null && [ -z "${FHETORCH_VENV:-}" ] && [ ! -d .venv ]; then
  PY=python3  # an environment that already has torch (e.g. the GPU machine)
else
  if [ ! -d .venv ]; then
    say "creating .venv (python3 -m venv)"
    python3 -m venv .venv
  fi
  . .venv/bin/activate
  PY=python
  if [ ! -f .venv/.fhetorch-packages ]; then
    say "installing torch 2.13, numpy, tqdm, pytest, scikit-learn, ninja into .venv (first run only, about a minute) ..."
    $PY -m pip install -q --disable-pip-version-check "setuptools>=70.1" wheel ninja
    $PY -c "import torch" 2>/dev/null || $PY -m pip install -q --disable-pip-version-check torch==2.13.0
    $PY -m pip install -q --disable-pip-version-check numpy tqdm pytest pytest-timeout scikit-learn
    touch .venv/.fhetorch-packages
  fi
fi
export MAX_JOBS="${MAX_JOBS:-4}"
# what the build depends on: sources, build files, flags, torch and the interpreter
stamp=$( { cat setup.py pyproject.toml; find csrc -type f | LC_ALL=C sort | xargs cat;
           echo "${FHETORCH_NO_CUDA:-} ${FHETORCH_PORTABLE:-}";
           $PY -c "import sys, torch; print(sys.executable, torch.__version__, torch.version.cuda)"; } | sha256sum | cut -c1-32)
ready() { (cd / && $PY -c "import fhetorch; print('setup: fhetorch', fhetorch.__version__, 'ready; CUDA kernels:', fhetorch._ops.has_cuda())"); }
if [ "$(cat build/.fhetorch-stamp 2>/dev/null)" = "$stamp" ] && ready 2>/dev/null; then
  exit 0
fi
what=$($PY -c "import torch; print('the C++ and CUDA kernels: several minutes' if torch.version.cuda else 'the C++ kernels: about a minute on 2 cores')")
say "building fhetorch ($what) ..."
rm -f build/.fhetorch-stamp
$PY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . >/dev/null
mkdir -p build && echo "$stamp" > build/.fhetorch-stamp
ready
