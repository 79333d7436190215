#!/usr/bin/env bash
# Every benchmark of bench/RESULTS.md, at the sizes reported there, one after the other
# (never two at once: they would share the two cores). Results: bench/out/*.json.
# Takes about 25 minutes on a 2-core machine. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
$PY -m bench.aiohttp_baseline --duration 5 --runs 3
$PY -m bench.genlatest --series 10000 100000 --runs 5
$PY -m bench.probe_cycle --clusters 1000 10000 --runs 3 --steady 2
$PY -m bench.probe_cycle --clusters 10000 --hang-fraction 0.1 --timeout 5 --runs 2 --steady 1
$PY -m bench.probe_cycle --clusters 10000 --hang-fraction 0.1 --timeout 5 --runs 2 --steady 1 \
    --concurrency 2000 --out bench/out/probe_cycle_hang_c2000.json
$PY -m bench.probe_cycle --clusters 10000 --variant close --runs 1 --steady 1
$PY -m bench.vs_blackbox --clusters 1000 --runs 3
$PY -m bench.scrape --clusters 10000 --scrapes 50
$PY -m bench.reactor --duration 10 --runs 3
$PY -m bench.e2e --runs 5 --threshold 2 --interval 1
$PY -m bench.e2e --runs 3 --threshold 3 --interval 1
