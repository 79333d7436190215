"""``/openapi/v3``: just enough OpenAPI for kubectl to leave validation to the server.

Before ``apply``, ``create -f`` and ``replace``, kubectl 1.32 asks whether the server
validates fields itself: it reads the group-version's OpenAPI v3 document and looks for a
PATCH operation whose ``x-kubernetes-group-version-kind`` is the object's and whose query
parameters include ``fieldValidation`` (cli-runtime's ``queryParamVerifierV3``). Found, it
sends ``fieldValidation=Strict`` and validates nothing client-side; without OpenAPI it
fails with "failed to download openapi" unless given ``--validate=false``. These documents
hold the operations with their parameters and a schema per kind that declares only the
top-level fields; ``kubectl explain`` would need the real schemas and is not served.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fleetwatch.standin.management.kinds import KINDS, Kind, group_versions

_QUERY_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _operation(kind: Kind, verb: str, params: tuple[str, ...]) -> dict[str, Any]:
    return {
        "operationId": f"{verb}{kind.kind}",
        "parameters": [
            {"name": p, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
            for p in params
        ],
        "responses": {
            "200": {
                "content": {
                    "application/json": {
                        "schema": {"$ref": f"#/components/schemas/{_schema_name(kind)}"}
                    }
                }
            }
        },
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": {
            "group": kind.group,
            "version": kind.version,
            "kind": kind.kind,
        },
    }


def _schema_name(kind: Kind) -> str:
    group = ".".join(reversed(kind.group.split("."))) if kind.group else "io.k8s.api.core"
    return f"{group}.{kind.version}.{kind.kind}"


def group_version_document(group: str, version: str) -> dict[str, Any] | None:
    """The OpenAPI v3 document of one group-version, or None when it is not served."""
    kinds = [k for k in KINDS if k.group == group and k.version == version]
    if not kinds:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for kind in kinds:
        base = f"/{_gv_path(group, version)}"
        scope = f"{base}/namespaces/{{namespace}}" if kind.namespaced else base
        paths[f"{scope}/{kind.plural}"] = {
            "get": _operation(kind, "list", ("labelSelector", "fieldSelector", "watch")),
            "post": _operation(kind, "post", _QUERY_PARAMS),
        }
        paths[f"{scope}/{kind.plural}/{{name}}"] = {
            "get": _operation(kind, "get", ("pretty",)),
            "put": _operation(kind, "put", _QUERY_PARAMS),
            "patch": _operation(kind, "patch", _QUERY_PARAMS),
            "delete": _operation(kind, "delete", ("dryRun", "propagationPolicy")),
        }
        schemas[_schema_name(kind)] = {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object"},
                "status": {"type": "object"},
            },
            "x-kubernetes-group-version-kind": [
                {"group": kind.group, "version": kind.version, "kind": kind.kind}
            ],
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.30.2"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def index() -> dict[str, Any]:
    """``/openapi/v3``: each group-version's document, named with a hash of its content."""
    paths: dict[str, Any] = {}
    for group, versions in group_versions().items():
        for version in versions:
            document = json.dumps(group_version_document(group, version), sort_keys=True)
            digest = hashlib.sha512(document.encode()).hexdigest()[:128].upper()
            relative = _gv_path(group, version)
            paths[relative] = {"serverRelativeURL": f"/openapi/v3/{relative}?hash={digest}"}
    return {"paths": paths}
