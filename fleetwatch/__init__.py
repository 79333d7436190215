"""fleetwatch: the health of a fleet of Kubernetes clusters, for Prometheus and Alertmanager.

The namespace of everything shared, with the command on top: `fleetwatch.cli` (the
`fleetwatch` command and the demo), `fleetwatch.discovery` (where the clusters come from,
read by the exporter and the reactor alike), `fleetwatch.kube` (the Kubernetes API client),
`fleetwatch.common` (what every part shares, defined once), `fleetwatch.standin` (the
stand-in API servers shared by the tests and the demo) and `fleetwatch.procs` (local
servers run and stopped by pid). The work itself lives in the `exporter` and `reactor`
packages; the rules' and the dashboards' generators in `alerts` and `dashboards`.
"""

from fleetwatch.common.version import __version__

__all__ = ["__version__"]
