#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -d .venv ] && . .venv/bin/activate
exec python3 -m pytest -q -p no:cacheprovider "$@"
