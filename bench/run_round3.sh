#!/usr/bin/env bash
# Rounds 3 and 4 of bench/RESULTS.md (issue 13: the exporter at 10,000 clusters), one
# benchmark at a time on a quiet machine, then its peers and the code before the round in
# the same pass. Results: bench/out/$R_*.json (R: r3 by default; round 4 ran R=r4
# BEFORE_REV=1538843); about 40 minutes on 2 cores. BEFORE is a checkout of the code before
# the round (default: a worktree of BEFORE_REV, 8a3e263 unless set, made here), run with
# its own benchmark harness and its own stand-in.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$PWD/.venv/bin/python
OUT=$PWD/bench/out
BEFORE=${BEFORE:-}
BEFORE_REV=${BEFORE_REV:-8a3e263}
R=${R:-r3}
run() { echo "=== $(date -u +%H:%M:%S) $*"; "$@" > /dev/null || echo "!!! failed: $*"; }
if [ -z "$BEFORE" ]; then
  BEFORE=$(mktemp -d /tmp/fleetwatch-before-XXXXXX)
  git worktree add -q --detach "$BEFORE" "$BEFORE_REV"
fi
cycle() { run $PY -m bench.probe_cycle --clusters 10000 "$@"; }
# The exporter as built, and what each part of it costs.
cycle --runs 2 --steady 3 --out "$OUT/${R}_asbuilt_10k.json"
cycle --runs 1 --steady 3 --variant defaultgc --out "$OUT/${R}_defaultgc_10k.json"
cycle --runs 1 --steady 3 --no-checks --out "$OUT/${R}_nochecks_10k.json"
cycle --runs 1 --steady 3 --credential client_cert_data_each --out "$OUT/${R}_each_10k.json"
cycle --runs 1 --steady 2 --no-checks --max-idle 0 --out "$OUT/${R}_nochecks_maxidle0_10k.json"
cycle --runs 1 --steady 2 --max-idle 2000 --out "$OUT/${R}_maxidle2000_10k.json"
# 1,000 of them hung (TLS accepted, never an answer), 5 s timeout, on the exporter's schedule.
cycle --hang-fraction 0.1 --timeout 5 --runs 1 --steady 3 --out "$OUT/${R}_hang_backtoback_10k.json"
cycle --hang-fraction 0.1 --timeout 5 --interval 10 --runs 2 --steady 3 --out "$OUT/${R}_hang_10k.json"
cycle --hang-fraction 0.1 --timeout 5 --interval 10 --runs 2 --steady 3 --load 1 \
  --out "$OUT/${R}_hang_load1_10k.json"
run $PY -m bench.probe_cycle --clusters 1000 --runs 2 --steady 3 --out "$OUT/${R}_asbuilt_1k.json"
run $PY -m bench.two_processes --clusters 10000 --steady 2 --out "$OUT/${R}_two_processes.json"
# The peers and the parts, re-run in the same pass.
run $PY -m bench.vs_blackbox --clusters 1000 --runs 3 --out "$OUT/${R}_vs_blackbox.json"
run $PY -m bench.scrape --clusters 10000 --scrapes 50 --out "$OUT/${R}_scrape.json"
run $PY -m bench.genlatest --series 10000 100000 --runs 5 --out "$OUT/${R}_genlatest.json"
run $PY -m bench.discovery_credentials --contexts 1000 10000 --out "$OUT/${R}_discovery_credentials.json"
run $PY -m bench.connections --connections 1500 --runs 3 --baseline 8a3e263 --out "$OUT/${R}_connections.json"
run $PY -m bench.handshake_floor --seconds 8 --out "$OUT/${R}_handshake_floor.json"
run $PY -m bench.standin_cost --clusters 2000 --steady 3 --runs 2 --baseline "$BEFORE" --out "$OUT/${R}_standin_cost.json"
# The code before the round: same commands, same machine, same pass.
(cd "$BEFORE" && export PYTHONPATH=$BEFORE && run $PY -m bench.probe_cycle --clusters 10000 --runs 1 --steady 3 \
  --out "$OUT/${R}_before_asbuilt_10k.json")
(cd "$BEFORE" && export PYTHONPATH=$BEFORE && run $PY -m bench.probe_cycle --clusters 10000 --hang-fraction 0.1 \
  --timeout 5 --runs 1 --steady 3 --out "$OUT/${R}_before_hang_10k.json")
(cd "$BEFORE" && export PYTHONPATH=$BEFORE && run $PY -m bench.probe_cycle --clusters 10000 --hang-fraction 0.1 \
  --timeout 5 --interval 10 --runs 2 --steady 3 --load 1 --out "$OUT/${R}_before_hang_load1_10k.json")
echo "=== $(date -u +%H:%M:%S) done"
