"""What the client knows of every Kubernetes object, whatever its kind.

An object is its JSON (:data:`KubeObject`): the client lists, watches, keeps and hands it
on as the API server sent it (less what a transform drops), and the caller, which knows
the kind (discovery's Secrets, the CD integration's Flux and Argo CD objects), reads it.
Names the API conventions give every object are spelled here, once.

Pure: no I/O, so that pure parsers (``reactor.cd.clustersecrets``) may import it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LAST_APPLIED", "KubeObject"]

#: One object as the API server sends it, decoded from JSON.
KubeObject = dict[str, Any]

#: ``kubectl apply``'s copy of the whole object in an annotation, ``data`` included (a
#: Secret's credentials a second time): never kept.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
