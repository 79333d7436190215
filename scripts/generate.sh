#!/usr/bin/env bash
# Regenerate every generated file of the repository from its source, in one command:
#   alerts/fleetwatch.rules.yml       <- fleetwatch rules
#   dashboards/*.json                 <- python -m dashboards
#   deploy/kubernetes/components/prometheus-operator/prometheusrule.yaml
#                                     <- fleetwatch rules --format prometheusrule
#   deploy/kubernetes/components/dashboards/*.json <- copies of dashboards/*.json
#
#   bash scripts/generate.sh          # rewrite the files in this checkout
#   bash scripts/generate.sh DIR      # write them under DIR instead (same relative paths)
#
# tests/deploy/test_generated.py runs the second form and fails when a committed file
# differs from its output.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
out=${1:-.}
mkdir -p "$out/alerts" "$out/dashboards" \
  "$out/deploy/kubernetes/components/prometheus-operator" \
  "$out/deploy/kubernetes/components/dashboards"
"$py" -m fleetwatch.cli rules > "$out/alerts/fleetwatch.rules.yml"
"$py" -m dashboards --out "$out/dashboards"
"$py" -m fleetwatch.cli rules --format prometheusrule --namespace fleetwatch \
  --label release=kube-prometheus-stack \
  > "$out/deploy/kubernetes/components/prometheus-operator/prometheusrule.yaml"
for name in fleet-overview cluster-detail reactor; do
  cp "$out/dashboards/$name.json" "$out/deploy/kubernetes/components/dashboards/$name.json"
done
