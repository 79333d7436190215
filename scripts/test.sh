#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian 12 machine (as root), then run
# the whole suite. The tests start real Prometheus, Alertmanager and etcd themselves.
# The suite runs in 4 pytest-xdist workers, each test module on one worker (its module-scoped
# servers are started once); FLEETWATCH_TEST_WORKERS=0 runs it in one process.
# Arguments go to pytest (docs/development.md#tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest -n "${FLEETWATCH_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder "$@"
