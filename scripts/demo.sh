#!/usr/bin/env bash
# README's main command: sets up (scripts/setup.sh: .venv, torch, the build; a rerun skips
# what is done) and runs encrypted ResNet-20 inference (models/demo_resnet20.py): on a GPU
# with a 128-bit secure preset, else a reduced, clearly labelled insecure CPU configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "fhetorch demo: encrypted ResNet-20 inference on the GPU with a 128-bit secure preset"
else
  echo "fhetorch demo: no GPU found, so encrypted ResNet-20 runs in a REDUCED, INSECURE CPU configuration" \
       "(a toy preset that is NOT secure; about 1.5 minutes on 2 cores, 3 the first time)"
fi
echo "fhetorch demo: setting up first (scripts/setup.sh: .venv, torch, the C++ build; the first run only)"
bash scripts/setup.sh
[ -d .venv ] && . .venv/bin/activate
exec python3 -m models.demo_resnet20 "$@"
