#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian 12 machine (as root), then run
# the whole suite. The tests start real Prometheus, Alertmanager and etcd themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest "$@"
