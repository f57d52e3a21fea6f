#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "fhetorch tests: setting up first (scripts/setup.sh: .venv, torch, the C++ build; the first run only)"
bash scripts/setup.sh
[ -d .venv ] && . .venv/bin/activate
echo "fhetorch tests: pytest (the whole suite takes about 15 minutes on 2 CPU cores)"
exec python3 -m pytest -q -p no:cacheprovider "$@"
