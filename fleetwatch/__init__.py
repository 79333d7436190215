"""fleetwatch: the health of a fleet of Kubernetes clusters, for Prometheus and Alertmanager.

This package is the product's face: the `fleetwatch` command, the demo, the stand-in API
server shared by the tests and the demo, and the helpers that run local servers. The
work itself lives in the `exporter` and `reactor` packages; where the clusters come from,
read by both, in `discovery`; what all of them share, in `common`.
"""

from fleetwatch.common.version import __version__

__all__ = ["__version__"]
