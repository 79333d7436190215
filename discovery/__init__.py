"""Where the clusters of the fleet come from, read alike by the exporter and the reactor.

Kubeconfig files (the main one, kubectl's ``KUBECONFIG`` list merged as kubectl merges it,
every file under ``KUBECONFIG_DIR``, Secret volumes among them) become :class:`Cluster`
records and :class:`DiscoveryProblem` records: plain data, no credential in either.

- ``discovery.scan``: :class:`Discoverer`, the scan, each file parsed once per change;
- ``discovery.clusters``: what a scan returns (pure);
- ``discovery.kubeconfig``: one kubeconfig's parse and kubectl's merge (pure);
- ``discovery.entries``: a kubeconfig's cluster and user entries reduced as they are
  parsed, and each context's credentials made of them (pure);
- ``discovery.contextauth``: what resolving a context's credentials needs (pure);
- ``discovery.files``: which files, read within bounds;
- ``discovery.boundedyaml``: YAML within bounds (pure);
- ``discovery.shard``: which shard probes which cluster (pure);
- ``discovery.secrets``: one Secret of the management cluster's API -> its clusters (pure),
  ``discovery.argocd`` for Argo CD's cluster config, ``discovery.labels`` for the user's
  label selector;
- ``discovery.merge``: the file scan and the Secrets -> one fleet (pure);
- ``discovery.apimetrics``: the list+watch's health as Prometheus series (pure).

The I/O edge, imported by name and never re-exported here: ``discovery.apisource``
(``--discovery.kubernetes``: its flags and settings, the informer built, each Secret read
once per version), over ``discovery.informer`` (list+watch), ``discovery.kubeapi`` (HTTP)
and ``discovery.kubeauth`` (credentials).

This module re-exports what the exporter and the reactor use.
"""

from discovery.clusters import Cluster, ContextConfig, Discovery, DiscoveryProblem, probeable
from discovery.files import (
    MAX_FILE_BYTES,
    FileVersion,
    KubeconfigList,
    MainKubeconfig,
    main_kubeconfig,
)
from discovery.labels import LabelSelector, SelectorError
from discovery.merge import Merged, merge
from discovery.scan import Discoverer
from discovery.secrets import (
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
