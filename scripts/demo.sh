#!/usr/bin/env bash
# One command for a newcomer: install what the demo needs (Debian packages for Prometheus
# and Alertmanager, a virtualenv with fleetwatch), then run `fleetwatch demo`.
# Extra arguments go to the demo, e.g. `bash scripts/demo.sh --clusters 6`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh demo
echo "fleetwatch install: starting the demo (.venv/bin/fleetwatch demo $*)" >&2
exec .venv/bin/fleetwatch demo "$@"
