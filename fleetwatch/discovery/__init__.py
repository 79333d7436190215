"""Where the clusters of the fleet come from, read alike by the exporter and the reactor.

Kubeconfig files (the main one, kubectl's ``KUBECONFIG`` list merged as kubectl merges it,
every file under ``KUBECONFIG_DIR``, Secret volumes among them) become :class:`Cluster`
records and :class:`DiscoveryProblem` records: plain data, no credential in either.

- ``fleetwatch.discovery.scan``: :class:`Discoverer`, the scan, each file parsed once per change;
- ``fleetwatch.discovery.clusters``: what a scan returns (pure);
- ``fleetwatch.discovery.kubeconfig``: one kubeconfig's parse and kubectl's merge (pure);
- ``fleetwatch.discovery.entries``: a kubeconfig's cluster and user entries reduced as they are
  parsed, and each context's credentials made of them (pure);
- ``fleetwatch.discovery.contextauth``: what resolving a context's credentials needs (pure);
- ``fleetwatch.discovery.files``: which files, read within bounds;
- ``fleetwatch.discovery.boundedyaml``: YAML within bounds (pure);
- ``fleetwatch.discovery.shard``: which shard probes which cluster (pure);
- ``fleetwatch.discovery.secrets``: one Secret of the management cluster's API -> its clusters
(pure),
  ``fleetwatch.discovery.argocd`` for Argo CD's cluster config, ``fleetwatch.discovery.labels`` for
  the user's
  label selector;
- ``fleetwatch.discovery.merge``: the file scan and the Secrets -> one fleet (pure);
- ``fleetwatch.discovery.apimetrics``: the list+watch's health as Prometheus series (pure).

The I/O edge, imported by name and never re-exported here: ``fleetwatch.discovery.apisource``
(``--discovery.kubernetes``: its flags and settings, the informer built, each Secret read
once per version), over ``fleetwatch.kube.informer`` (list+watch), ``fleetwatch.kube.kubeapi``
(HTTP)
and ``fleetwatch.kube.kubeauth`` (credentials, from a kubeconfig by
``fleetwatch.discovery.kubecreds``); ``fleetwatch.discovery.secretwatch`` names the
list+watches of the three kinds.

This module re-exports what the exporter and the reactor use.
"""

from fleetwatch.discovery.clusters import (
    Cluster,
    ContextConfig,
    Discovery,
    DiscoveryProblem,
    probeable,
)
from fleetwatch.discovery.files import (
    MAX_FILE_BYTES,
    FileVersion,
    KubeconfigList,
    MainKubeconfig,
    main_kubeconfig,
)
from fleetwatch.discovery.labels import LabelSelector, SelectorError
from fleetwatch.discovery.merge import Merged, merge
from fleetwatch.discovery.scan import Discoverer
from fleetwatch.discovery.secrets import (
    DEFAULT_SELECTOR,
    SecretCluster,
    SecretClusters,
    parse_secret_ref,
    read_secret,
    secret_ref,
)

__all__ = [
    "DEFAULT_SELECTOR",
    "MAX_FILE_BYTES",
    "Cluster",
    "ContextConfig",
    "Discoverer",
    "Discovery",
    "DiscoveryProblem",
    "FileVersion",
    "KubeconfigList",
    "LabelSelector",
    "MainKubeconfig",
    "Merged",
    "SecretCluster",
    "SecretClusters",
    "SelectorError",
    "main_kubeconfig",
    "merge",
    "parse_secret_ref",
    "probeable",
    "read_secret",
    "secret_ref",
]
