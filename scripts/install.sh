#!/usr/bin/env bash
# Debian packages for the real peers (skipped when already there) and a virtualenv in .venv
# with fleetwatch and its test tools. Safe to run again.
#   bash scripts/install.sh         everything the test suite needs
#   bash scripts/install.sh demo    only what `fleetwatch demo` needs (Prometheus, Alertmanager)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
# A line per step on stderr, so a newcomer running the demo sees what is going on.
step() { echo "fleetwatch install: $*" >&2; }
# What each test needs from Debian, as "file-that-proves-it:package"; one apt-get run
# installs whatever is missing.
wanted=(
  /usr/bin/prometheus:prometheus
  /usr/bin/prometheus-alertmanager:prometheus-alertmanager
)
[ "$mode" = demo ] || wanted+=(
  /usr/bin/etcd:etcd-server
  /usr/bin/etcdctl:etcd-client
  /usr/bin/prometheus-blackbox-exporter:prometheus-blackbox-exporter
  /usr/bin/wrk:wrk
  /usr/lib/postgresql/15/bin/initdb:postgresql
  /usr/bin/tinyproxy:tinyproxy
  /usr/bin/podman:podman
  /usr/sbin/runc:runc
  /usr/sbin/debootstrap:debootstrap
)
need=()
for entry in "${wanted[@]}"; do
  [ -e "${entry%%:*}" ] || need+=("${entry##*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  step "Debian packages: ${need[*]} (apt-get update, then install)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -qq \
    "${need[@]}" >/dev/null
else
  step "Debian packages: all present"
fi
if [ ! -x .venv/bin/python ]; then
  step "virtualenv .venv"
  python3 -m venv .venv
fi
if [ "$mode" = demo ]; then
  # The demo needs fleetwatch and its run-time dependencies only: the test tools (pytest,
  # mypy, schemathesis, ...) took about 1 min 50 s more. pip's progress stays visible.
  step "fleetwatch and its dependencies into .venv (pip)"
  .venv/bin/python -m pip install --disable-pip-version-check -e . >&2
  .venv/bin/python -c 'import fleetwatch, exporter, reactor'
  step "done"
  exit 0
fi
step "fleetwatch with its test tools into .venv (pip)"
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 \
  | grep -v '^WARNING: Location' >&2 || true
.venv/bin/python -c 'import fleetwatch, exporter, reactor'
# kubectl (for `kubectl kustomize`) comes with the machine, not from Debian's archive.
command -v kubectl >/dev/null 2>&1 \
  || echo "warning: kubectl is not on the PATH; tests/deploy render the manifests with it" >&2
# Tools of the deployment tests, each in a virtualenv of its own: checkov pins many
# packages that would fight ours (about 80 s to install), and cloudcoil (the Prometheus
# Operator's CRD models) registers a pytest plugin that must not load in .venv.
if [ ! -x .venv-checkov/bin/checkov ]; then
  python3 -m venv .venv-checkov
  .venv-checkov/bin/python -m pip install -q --disable-pip-version-check 'checkov>=3.2' 2>&1 \
    | grep -v '^WARNING: Location' >&2 || true
fi
if [ ! -x .venv-crd/bin/python ] || ! .venv-crd/bin/python -c 'import cloudcoil.models.prometheus_operator' 2>/dev/null; then
  python3 -m venv .venv-crd
  .venv-crd/bin/python -m pip install -q --disable-pip-version-check \
    'cloudcoil-models-prometheus-operator>=0.80' pyyaml 2>&1 \
    | grep -v '^WARNING: Location' >&2 || true
fi
