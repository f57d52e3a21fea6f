#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the main demo: encrypted computation on the GPU with
# a 128-bit secure preset when one is present, else a reduced insecure CPU configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -d .venv ] && . .venv/bin/activate
exec python3 -m fhetorch.demo "$@"
