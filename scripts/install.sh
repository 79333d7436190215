#!/usr/bin/env bash
# Debian packages for the real peers (skipped when already there) and a virtualenv in .venv
# with fleetwatch and its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for bin in prometheus promtool prometheus-alertmanager amtool etcd etcdctl \
           prometheus-blackbox-exporter wrk; do
  command -v "$bin" >/dev/null 2>&1 || need+=("$bin")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing Debian packages (missing: ${need[*]})" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -qq \
    prometheus prometheus-alertmanager etcd-server etcd-client \
    prometheus-blackbox-exporter wrk >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 \
  | grep -v '^WARNING: Location' >&2 || true
.venv/bin/python -c 'import fleetwatch, exporter, reactor' 
