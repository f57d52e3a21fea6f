#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the main demo: encrypted ResNet-20 inference
# (models/demo_resnet20.py) on the GPU with a 128-bit secure preset when one is present, else
# a reduced, clearly labelled insecure CPU configuration that finishes in minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -d .venv ] && . .venv/bin/activate
exec python3 -m models.demo_resnet20 "$@"
