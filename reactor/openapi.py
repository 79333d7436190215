"""The OpenAPI 3 document of the reactor API, written by hand (served at ``/openapi.json``).

Kept next to the handlers and checked by ``test_openapi_document_matches_the_routes`` in
tests/reactor/test_api.py: every route of the app is in it and every path in it is a route.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from common.version import __version__
from reactor.service import SOURCE_ALERTS, SOURCE_API, SOURCE_DISCOVERY
from reactor.statemachine import AppStatus, Status

NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 253,
    "pattern": r"^\S(.*\S)?$",
    "description": "printable characters; inner spaces allowed (kubeconfig context names)",
}
TIME = {"type": "string", "format": "date-time", "nullable": True}
# Enumerations come from the code, so the document cannot drift from it.
CLUSTER_STATUSES = [s.value for s in Status]
APP_STATUSES = [s.value for s in AppStatus]
SOURCES = [SOURCE_DISCOVERY, SOURCE_API, SOURCE_ALERTS]
REPORTED = [AppStatus.DEGRADED.value, AppStatus.DEPLOYED.value]


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _json(ref: str, description: str, array: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"$ref": f"#/components/schemas/{ref}"}
    if array:
        schema = {"type": "array", "items": schema}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(ref: str) -> dict[str, Any]:
    return {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
    }


NAME_PARAM = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
SECURED: list[dict[str, list[str]]] = [{"bearer": []}]
E400 = _error("Bad input (not JSON, a missing or invalid field); nothing changed.")
E401 = _error("Missing or wrong bearer token (only when the reactor has one).")
E404 = _error("Unknown cluster or app name.")
E413 = _error("Body larger than --web.max-body-bytes.")
E503 = _error("The database is busy or unavailable; retry (Retry-After is set).")


@cache
def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "fleetwatch reactor",
            "version": __version__,
            "description": (
                "Receives Alertmanager notifications about cluster status, degrades the apps "
                "of a cluster that went OFFLINE and restores them when it is ONLINE again, "
                "and gates deployments: 409 when the target cluster is OFFLINE."
            ),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {"type": "string"},
                        "cluster": {"type": "string", "description": "409 of the gate"},
                        "status": {"type": "string", "description": "409 of the gate"},
                    },
                },
                "Cluster": {
                    "type": "object",
                    "required": ["name", "status", "source"],
                    "properties": {
                        "name": {"type": "string"},
                        "endpoint": {"type": "string", "nullable": True},
                        "kubeconfig_secret_ref": {"type": "string", "nullable": True},
                        "status": {"type": "string", "enum": CLUSTER_STATUSES},
                        "status_since": TIME,
                        "source": {"type": "string", "enum": SOURCES},
                        "outage_since": {
                            **TIME,
                            "description": "start of the open outage, null when none is open",
                        },
                    },
                },
                "ClusterWithOutages": {
                    "allOf": [
                        {"$ref": "#/components/schemas/Cluster"},
                        {
                            "type": "object",
                            "properties": {
                                "outages": {
                                    "type": "array",
                                    "description": "the latest outages, newest first (at "
                                    "most 10; closed ones are kept for --db.retention)",
                                    "items": {"$ref": "#/components/schemas/Outage"},
                                }
                            },
                        },
                    ]
                },
                "Outage": {
                    "type": "object",
                    "required": ["started_at", "apps_degraded", "apps_restored"],
                    "properties": {
                        "started_at": TIME,
                        "closed_at": {**TIME, "description": "null while the outage is open"},
                        "apps_degraded": {"type": "integer"},
                        "apps_restored": {"type": "integer"},
                    },
                },
                "NewCluster": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name", "endpoint", "kubeconfig_secret_ref"],
                    "properties": {
                        "name": NAME,
                        "endpoint": {
                            "type": "string",
                            "format": "uri",
                            "example": "https://10.0.0.1:6443",
                        },
                        "kubeconfig_secret_ref": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 4096,
                        },
                    },
                },
                "App": {
                    "type": "object",
                    "required": ["name", "cluster", "status", "reason"],
                    "properties": {
                        "name": {"type": "string"},
                        "cluster": {"type": "string"},
                        "status": {"type": "string", "enum": APP_STATUSES},
                        "reason": {"type": "string", "nullable": True},
                    },
                },
                "NewApp": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name", "cluster"],
                    "properties": {"name": NAME, "cluster": NAME},
                },
                "AppPatch": {
                    "description": (
                        "Either {cluster} (a reassignment: PENDING on the new cluster, gated) "
                        "or {status, reason} (a health report: DEGRADED with a reason, or "
                        "DEPLOYED again, gated)."
                    ),
                    "oneOf": [
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["cluster"],
                            "properties": {"cluster": NAME},
                        },
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["status"],
                            "properties": {
                                "status": {"type": "string", "enum": REPORTED},
                                "reason": {"type": "string", "nullable": True, "maxLength": 4096},
                            },
                        },
                    ],
                },
                "Deployment": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["app", "cluster"],
                    "properties": {"app": NAME, "cluster": NAME},
                },
                "Webhook": {
                    "type": "object",
                    "description": "Alertmanager webhook payload, version 4.",
                    "required": ["alerts"],
                    "properties": {
                        "version": {"type": "string", "enum": ["4"]},
                        "groupKey": {"type": "string"},
                        "truncatedAlerts": {"type": "integer"},
                        "status": {"type": "string"},
                        "receiver": {"type": "string"},
                        "groupLabels": {"type": "object"},
                        "commonLabels": {"type": "object"},
                        "commonAnnotations": {"type": "object"},
                        "externalURL": {"type": "string"},
                        "alerts": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Alert"},
                        },
                    },
                },
                "Alert": {
                    "type": "object",
                    "required": ["status", "labels", "startsAt"],
                    "properties": {
                        "status": {"type": "string", "enum": ["firing", "resolved"]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "annotations": {"type": "object"},
                        "startsAt": {"type": "string", "format": "date-time"},
                        "endsAt": {
                            "type": "string",
                            "format": "date-time",
                            "description": "0001-01-01T00:00:00Z while firing",
                        },
                        "generatorURL": {"type": "string"},
                        "fingerprint": {"type": "string"},
                    },
                },
                "DeletedCluster": {
                    "type": "object",
                    "required": ["deleted", "apps_deleted"],
                    "properties": {
                        "deleted": {"type": "string", "description": "the cluster's name"},
                        "apps_deleted": {"type": "integer"},
                    },
                },
                "ClusterReset": {
                    "type": "object",
                    "required": ["cluster", "outages_closed", "apps_restored"],
                    "properties": {
                        "cluster": {"$ref": "#/components/schemas/Cluster"},
                        "outages_closed": {"type": "integer"},
                        "apps_restored": {"type": "integer"},
                    },
                },
                "NotificationResult": {
                    "type": "object",
                    "properties": {
                        k: {"type": "integer"}
                        for k in (
                            "applied",
                            "skipped",
                            "clusters_changed",
                            "outages_opened",
                            "outages_closed",
                            "apps_degraded",
                            "apps_restored",
                        )
                    },
                },
            },
        },
        "paths": {
            "/alerts": {
                "post": {
                    "summary": "Alertmanager webhook (FleetClusterOnline / FleetClusterOffline)",
                    "description": (
                        "400 only for a body that is not a v4 webhook; alerts with other names "
                        "or without a cluster label are skipped and the rest is applied. An "
                        "unknown cluster named by a status alert is created (source alerts)."
                    ),
                    "security": SECURED,
                    "requestBody": _body("Webhook"),
                    "responses": {
                        "200": _json("NotificationResult", "Applied (one transaction)."),
                        "400": E400,
                        "401": E401,
                        "413": E413,
                        "503": E503,
                    },
                }
            },
            "/clusters": {
                "get": {
                    "summary": "All clusters with their status",
                    "responses": {"200": _json("Cluster", "Clusters by name.", array=True)},
                },
                "post": {
                    "summary": "Add a cluster by hand (UNKNOWN until status alerts arrive)",
                    "security": SECURED,
                    "requestBody": _body("NewCluster"),
                    "responses": {
                        "201": _json("Cluster", "Created."),
                        "400": E400,
                        "401": E401,
                        "409": _error("A cluster of that name exists."),
                        "413": E413,
                        "503": E503,
                    },
                },
            },
            "/clusters/{name}": {
                "get": {
                    "summary": "One cluster",
                    "parameters": [NAME_PARAM],
                    "responses": {
                        "200": _json("ClusterWithOutages", "The cluster and its latest outages."),
                        "404": E404,
                    },
                },
                "delete": {
                    "summary": "Forget a decommissioned cluster",
                    "description": (
                        "Deletes the cluster, its alert state and its outages. Refused (409) "
                        "while apps are on it, so none is deleted by surprise; with "
                        "force=true its apps are deleted with it. A cluster still in a "
                        "kubeconfig comes back at the next start-up scan, and one still named "
                        "by a status alert comes back with the next notification."
                    ),
                    "security": SECURED,
                    "parameters": [
                        NAME_PARAM,
                        {
                            "name": "force",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "enum": ["true", "false"]},
                            "description": "true: delete the apps on the cluster too",
                        },
                    ],
                    "responses": {
                        "200": _json("DeletedCluster", "Deleted."),
                        "400": E400,
                        "401": E401,
                        "404": E404,
                        "409": _error("Apps are on the cluster (and force is not true)."),
                        "503": E503,
                    },
                },
            },
            "/clusters/{name}/alerts": {
                "delete": {
                    "summary": "Clear a cluster's alert state (it reads UNKNOWN again)",
                    "description": (
                        "The repair path for a state no later alert can fix. Both status "
                        "alerts are forgotten; an open outage is closed and the apps it "
                        "degraded are restored. The cluster keeps 'had been ONLINE', so a "
                        "real OFFLINE that arrives next (a repeat, or reconciliation) "
                        "cascades again. A name holding '/' is sent as %2F."
                    ),
                    "security": SECURED,
                    "parameters": [NAME_PARAM],
                    "responses": {
                        "200": _json("ClusterReset", "Cleared."),
                        "401": E401,
                        "404": E404,
                        "503": E503,
                    },
                }
            },
            "/apps": {
                "get": {
                    "summary": "All apps",
                    "responses": {"200": _json("App", "Apps by name.", array=True)},
                },
                "post": {
                    "summary": "Add an app (PENDING)",
                    "security": SECURED,
                    "requestBody": _body("NewApp"),
                    "responses": {
                        "201": _json("App", "Created, PENDING."),
                        "400": E400,
                        "401": E401,
                        "404": E404,
                        "409": _error("An app of that name exists."),
                        "413": E413,
                        "503": E503,
                    },
                },
            },
            "/apps/{name}": {
                "get": {
                    "summary": "One app",
                    "parameters": [NAME_PARAM],
                    "responses": {"200": _json("App", "The app."), "404": E404},
                },
                "patch": {
                    "summary": "Reassign an app, or report its health",
                    "security": SECURED,
                    "parameters": [NAME_PARAM],
                    "requestBody": _body("AppPatch"),
                    "responses": {
                        "200": _json("App", "The app after the change."),
                        "400": E400,
                        "401": E401,
                        "404": E404,
                        "409": _error("Gated: the target cluster is OFFLINE."),
                        "413": E413,
                        "503": E503,
                    },
                },
            },
            "/deployments": {
                "post": {
                    "summary": "Record a deployment: the app is DEPLOYED on that cluster",
                    "security": SECURED,
                    "requestBody": _body("Deployment"),
                    "responses": {
                        "201": _json("App", "The app, DEPLOYED on the cluster."),
                        "400": E400,
                        "401": E401,
                        "404": E404,
                        "409": _error("Gated: the cluster is OFFLINE."),
                        "413": E413,
                        "503": E503,
                    },
                }
            },
            "/healthz": {
                "get": {"summary": "Liveness", "responses": {"200": {"description": "Alive."}}}
            },
            "/-/healthy": {
                "get": {
                    "summary": "Liveness, as Prometheus' own servers answer it (plain text)",
                    "responses": {"200": {"description": "The process serves."}},
                }
            },
            "/-/ready": {
                "get": {
                    "summary": "Readiness: can the database answer a query? (plain text)",
                    "responses": {
                        "200": {"description": "Ready."},
                        "503": {"description": "The database is unreachable (Retry-After)."},
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (fleetwatch_reactor_...)",
                    "responses": {"200": {"description": "Text exposition format."}},
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI 3 document."}},
                }
            },
        },
    }
