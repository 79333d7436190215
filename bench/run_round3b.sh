#!/usr/bin/env bash
# Round 3b of bench/RESULTS.md (issue 13, the hung-cluster cycle): the hung cases idle and
# at load, the steady cycle as built, and the code before the change (default 1538843,
# round 3's code) at load, in one pass on a quiet machine. Results: bench/out/r3b_*.json;
# about 15 minutes on 2 cores. BEFORE: a checkout of the code before (default: a worktree).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$PWD/.venv/bin/python
OUT=$PWD/bench/out
BEFORE=${BEFORE:-}
run() { echo "=== $(date -u +%H:%M:%S) $*"; "$@" > /dev/null || echo "!!! failed: $*"; }
if [ -z "$BEFORE" ]; then
  BEFORE=$(mktemp -d /tmp/fleetwatch-before-XXXXXX)
  git worktree add -q --detach "$BEFORE" 1538843
fi
cycle() { run $PY -m bench.probe_cycle --clusters 10000 "$@"; }
hang=(--hang-fraction 0.1 --timeout 5)
cycle "${hang[@]}" --interval 10 --runs 2 --steady 3 --out "$OUT/r3b_hang_10k.json"
cycle "${hang[@]}" --interval 10 --runs 2 --steady 3 --load 1 --out "$OUT/r3b_hang_load1_10k.json"
cycle "${hang[@]}" --runs 1 --steady 3 --out "$OUT/r3b_hang_backtoback_10k.json"
cycle --runs 1 --steady 3 --out "$OUT/r3b_asbuilt_10k.json"
(cd "$BEFORE" && export PYTHONPATH=$BEFORE && run $PY -m bench.probe_cycle --clusters 10000 \
  "${hang[@]}" --interval 10 --runs 2 --steady 3 --load 1 --out "$OUT/r3b_before_hang_load1_10k.json")
echo "=== $(date -u +%H:%M:%S) done"
