"""The exporter's network: one client for the API servers of the whole fleet.

What the rest of the exporter uses, and all it may import from here (``.importlinter``
keeps the modules of this package to the package):

- :class:`FleetClient`: probe a cluster (:meth:`~FleetClient.probe`, under the cycle's
  :class:`Slot`, giving :class:`Probed`), reconnect what timed out, forget the clusters
  gone, close everything.
- :class:`ApiClient`: one cluster's authenticated GETs (``get_json``), what a check is
  handed; it raises ``exporter.model.ClusterRequestError``.
- ``install_patches`` and ``remove_temp_files``: the kubernetes client's patches, installed
  once at start, and its temporary files, removed at shutdown.
- ``parse_proxy`` and ``ProxyError``: a ``proxy-url`` read as the probes read it (shown
  without its credentials by ``fleetwatch discover``).
- ``sliced``: a long pass of the cycle over every cluster, the loop given a turn every
  few milliseconds of the task's step; ``next_turn``: a turn given by hand, from which the
  next pass counts (``turns``, where the budget of probe work per turn is too: the
  handshake steps, the probe steps and the reconnection starts of one turn).

Inside: HTTP/1.1 (``http1``), TLS connections (``connection``, ``tcp``), the pool of
kept-alive connections and its deadlines (``pool``, ``deadlines``), proxies (``proxy``),
credentials and exec plugins (``credentials``, ``execplugin``, ``kubeclient``,
``workers``), the probe's request (``probe``), and the client (``client``).
"""

from exporter.net.client import FleetClient, Probed, Slot
from exporter.net.kubeclient import install_patches, remove_temp_files
from exporter.net.probe import ApiClient
from exporter.net.proxy import ProxyError, parse_proxy
from exporter.net.turns import next_turn, sliced

__all__ = [
    "ApiClient",
    "FleetClient",
    "Probed",
    "ProxyError",
    "Slot",
    "install_patches",
    "next_turn",
    "parse_proxy",
    "remove_temp_files",
    "sliced",
]
