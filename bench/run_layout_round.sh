#!/usr/bin/env bash
# Round 12 of bench/RESULTS.md (issue 32 point 9): the steady probe cycle and the reactor
# benchmark on the code before the layout move (BEFORE_REV, the parent of the mechanical
# move 90343e1) and on main (AFTER_REV), alternating before, after, before, after in one
# pass so both see the same load. Each side runs from a temporary worktree of its commit
# with PYTHONPATH on that worktree: its own code and its own harness (the harness differs
# only in import paths). `uptime` is written beside every run. Results:
# $OUT/{cycle,reactor}_{before,after}_PASS.json and $OUT/log.txt; the worktrees are
# removed at the end.
#
#   CLUSTERS=10000 STEPS="cycle reactor" PASSES="1 2" bash bench/run_layout_round.sh
# Round 12 ran it three times, appending to the same log: PASSES="1 2", PASSES="3 4", and
# AFTER_REV=101783e PASSES="5 6" ORDER="after before" (main had moved on meanwhile; running
# second is no side's lot); then the move alone, OUT=bench/out/r12-move AFTER_REV=90343e1
# STEPS=cycle, PASSES=1 and 3 before first, 2 and 4 after first.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$PWD/.venv/bin/python}  # a worktree without .venv: PY=<checkout>/.venv/bin/python
BEFORE_REV=${BEFORE_REV:-90343e1^}
AFTER_REV=${AFTER_REV:-main}
CLUSTERS=${CLUSTERS:-10000}
STEPS=${STEPS:-cycle reactor}
PASSES=${PASSES:-1 2}
ORDER=${ORDER:-before after}  # which side runs first in each pass
OUT=${OUT:-$PWD/bench/out/r12}
mkdir -p "$OUT"
LOG=$OUT/log.txt
BEFORE=$(mktemp -d /tmp/fw-layout-before-XXXXXX)
AFTER=$(mktemp -d /tmp/fw-layout-after-XXXXXX)
git worktree add -q --detach "$BEFORE" "$BEFORE_REV"
git worktree add -q --detach "$AFTER" "$AFTER_REV"
cleanup() {
  git worktree remove --force "$BEFORE"
  git worktree remove --force "$AFTER"
}
trap cleanup EXIT
note() { echo "$*" | tee -a "$LOG"; }
note "before $(git -C "$BEFORE" rev-parse --short HEAD), after $(git -C "$AFTER" rev-parse --short HEAD)"
# one SIDE STEP PASS: the benchmark in the side's worktree, uptime before and after.
one() {
  local side=$1 step=$2 pass=$3 dir
  [ "$side" = before ] && dir=$BEFORE || dir=$AFTER
  local out=$OUT/${step}_${side}_${pass}.json
  note "=== $(date -u +%H:%M:%S) $step $side pass $pass; uptime:$(uptime | sed 's/.*average://')"
  local cmd
  case $step in
    cycle) cmd=(-m bench.probe_cycle --clusters "$CLUSTERS" --runs 1 --steady 3 --out "$out") ;;
    reactor) cmd=(-m bench.reactor --duration 10 --runs 3 --out "$out") ;;
  esac
  (cd "$dir" && PYTHONPATH=$dir "$PY" "${cmd[@]}" > "$OUT/${step}_${side}_${pass}.stdout" 2>&1) ||
    note "!!! failed: $step $side $pass (see ${step}_${side}_${pass}.stdout)"
  note "=== $(date -u +%H:%M:%S) done; uptime:$(uptime | sed 's/.*average://')"
}
for step in $STEPS; do
  for pass in $PASSES; do
    for side in $ORDER; do
      one "$side" "$step" "$pass"
    done
  done
done
