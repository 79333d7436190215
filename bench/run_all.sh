#!/usr/bin/env bash
# Every benchmark of bench/RESULTS.md, at the sizes reported there, one after the other
# (never two at once: they would share the two cores). Results: bench/out/*.json; then
# `.venv/bin/python -m bench.report` prints RESULTS.md's tables. About 30 minutes on a
# 2-core machine. Run from anywhere; it works from the repository root.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
run() { echo "=== $(date -u +%H:%M:%S) $*"; "$@" > /dev/null || echo "!!! failed: $*"; }
run $PY -m bench.aiohttp_baseline --duration 5 --runs 3
run $PY -m bench.auth_flood --threads 40 --scrapes 10
run $PY -m bench.genlatest --series 10000 100000 --runs 5
run $PY -m bench.e2e --runs 5 --threshold 2 --interval 1
run $PY -m bench.e2e --runs 3 --threshold 3 --interval 1
run $PY -m bench.reactor --duration 10 --runs 3
run $PY -m bench.reactor --postgres --duration 10 --runs 3
run $PY -m bench.cd
run $PY -m bench.vs_blackbox --clusters 1000 --runs 3
run $PY -m bench.probe_cycle --clusters 1000 10000 --runs 2 --steady 2 --no-checks
run $PY -m bench.probe_cycle --clusters 10000 --hang-fraction 0.1 --timeout 5 --runs 2 --steady 1 --no-checks
run $PY -m bench.probe_cycle --clusters 10000 --runs 1 --steady 2 --no-checks --max-idle 1000
run $PY -m bench.scrape --clusters 10000 --scrapes 50
run $PY -m bench.probe_cycle --clusters 1000 --runs 2 --steady 2
run $PY -m bench.probe_cycle --clusters 10000 --runs 1 --steady 2 --out bench/out/probe_cycle_asbuilt_10k.json
run $PY -m bench.probe_cycle --clusters 10000 --runs 1 --steady 2 --controlplane-every 4
run $PY -m bench.tls_resume --clusters 1000 --runs 2
run $PY -m bench.two_processes --clusters 10000 --steady 2
