"""Objects put into a management cluster before a test or the demo, from dicts or YAML.

Seeding is the administrator's server-side apply (field manager ``standin-seed``, forced):
it creates an object or updates it in place, and creates missing namespaces first, so a
folder of manifests needs no ordering. Everything goes through the store's normal write
path, so seeded objects are validated and watches see them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from fleetwatch.standin.management.kinds import BY_API_KIND, NAMESPACES
from fleetwatch.standin.management.store import ObjectStore

SEED_MANAGER = "standin-seed"


def seed_objects(store: ObjectStore, docs: Iterable[Any]) -> list[dict[str, Any]]:
    """Apply each object; ``ValueError`` names the first one of a kind not served."""
    stored: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"an object must be a mapping, not {type(doc).__name__}")
        kind = BY_API_KIND.get((str(doc.get("apiVersion")), str(doc.get("kind"))))
        if kind is None:
            raise ValueError(
                f"not served here: apiVersion {doc.get('apiVersion')!r} kind {doc.get('kind')!r}"
            )
        meta = doc.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {kind.kind} without metadata.name")
        namespace = str(meta.get("namespace") or "default") if kind.namespaced else ""
        if namespace and not store.exists(NAMESPACES, "", namespace):
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            store.apply(NAMESPACES, "", namespace, ns, SEED_MANAGER, True)
        stored.append(store.apply(kind, namespace, name, doc, SEED_MANAGER, True))
    return stored


def load_folder(folder: Path) -> list[Any]:
    """Every document of every ``*.yaml``, ``*.yml`` and ``*.json`` file under ``folder``,
    files in path order."""
    docs: list[Any] = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml", ".json")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d is not None)
    return docs
