"""Kubeconfig documents as the exporter's discovery tests write them.

``kubeconfig`` is the everyday file: one cluster, user (a token) and context per name;
``config_doc`` the bare document whose lists a test fills itself (exec plugins, shared
users). Files the stand-in fleet serves come from ``StandinFleet.write_kubeconfig``.
"""

from __future__ import annotations

from typing import Any

import yaml


def config_doc(**extra: Any) -> dict[str, Any]:
    """A kubeconfig with empty ``clusters``, ``users`` and ``contexts``, plus ``extra``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [],
        "users": [],
        "contexts": [],
        **extra,
    }


def kubeconfig(*contexts: str, server: str = "https://127.0.0.1:6443", **extra: Any) -> str:
    """A kubeconfig with one cluster (at ``server``/name), user and context per name."""
    doc = config_doc(**extra)
    for c in contexts:
        doc["clusters"].append({"name": c, "cluster": {"server": f"{server}/{c}"}})
        doc["users"].append({"name": c, "user": {"token": f"secret-{c}"}})
        doc["contexts"].append({"name": c, "context": {"cluster": c, "user": c}})
    return yaml.dump(doc, Dumper=yaml.CSafeDumper)
