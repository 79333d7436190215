"""The OpenAPI 3.1 document of the reactor API (served at ``/openapi.json``), generated.

The bodies' schemas come from reactor/models.py, the models the handlers validate and
write with; this module adds what only the routes know: each operation, its parameters,
its answers with their status codes, and who may call it. Every status code an operation
can answer is in :data:`OPERATIONS`, with its body's schema, once.

Auth: a mutating call needs the bearer token (``security: bearer``); reading calls need
nothing, unless ``--web.config.file`` has basic-auth users: then every path needs basic
auth or the bearer token (``openapi_document(basic=True)``). tests/reactor/test_openapi.py
checks it against the routes, openapi-spec-validator and (schemathesis) a live reactor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from fleetwatch.common.version import __version__
from reactor import fields, models

REF = "#/components/schemas/{model}"

#: Schemas named once in the document and referred to wherever a field has them.
SHARED = {
    fields.NAME_PATTERN: "Name",
    fields.TEXT_PATTERN: "Text",
    fields.ENDPOINT_PATTERN: "Endpoint",
    fields.TIMESTAMP_PATTERN: "Timestamp",
    fields.START_PATTERN: "Start",
}

JSON = "application/json"
TEXT = "text/plain"
HTML = "text/html"
METRICS = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    """One status code of an operation: what it means and its body's schema (or media)."""

    description: str
    schema: str | None = None  #: a name of reactor.models.SCHEMAS
    array: bool = False
    media: str = JSON
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    operation_id: str
    summary: str
    answers: dict[int, Reply]
    description: str = ""
    body: str | None = None
    mutating: bool = False
    query: tuple[dict[str, Any], ...] = ()
    links: dict[str, dict[str, Any]] = field(default_factory=dict)


# -- the error answers, said once -----------------------------------------------------
E400 = Reply("Bad input (not JSON, a missing or invalid field); nothing changed.", "Error")
E401 = Reply(
    "Missing or wrong bearer token (only when the reactor has one).",
    "Error",
    headers=("WWW-Authenticate",),
)
E404 = Reply("No cluster or app of that name.", "Error")
E413 = Reply("Body larger than --web.max-body-bytes (after decoding gzip or deflate).", "Error")
E503 = Reply(
    "The database is busy or unavailable; retry (Retry-After is set).",
    "Error",
    headers=("Retry-After",),
)
GATED = Reply(
    "Gated: the cluster is OFFLINE (Refusal); or Flux or Argo CD deploys the app (Error).",
    "Conflict",
)
WRITE = {400: E400, 401: E401, 413: E413, 503: E503}

NAME_IN_PATH: dict[str, Any] = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "A name holding '/' is sent percent-encoded (%2F).",
    "schema": {"$ref": "#/components/schemas/Name"},
}


def _link(operation_id: str, **parameters: str) -> dict[str, Any]:
    return {"operationId": operation_id, "parameters": parameters}


def _body_link(operation_id: str, body: dict[str, str]) -> dict[str, Any]:
    return {"operationId": operation_id, "requestBody": body}


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/alerts",
        "postAlerts",
        "Alertmanager webhook (FleetClusterOnline / FleetClusterOffline)",
        description=(
            "400 only for a body that is not a v4 webhook (see the Webhook schema: what is "
            "required, what is checked when present, what is ignored). Inside a valid "
            "webhook, alerts with other names, without a usable cluster label, resolved "
            "without endsAt, ending before they start or starting more than "
            "--alerts.max-future-skew ahead are skipped and the rest is applied. An "
            "unknown cluster named by a status alert is created (source alerts)."
        ),
        body="Webhook",
        mutating=True,
        answers={200: Reply("Applied, in one transaction.", "NotificationResult"), **WRITE},
    ),
    Operation(
        "get",
        "/clusters",
        "listClusters",
        "All clusters with their status",
        answers={200: Reply("Clusters by name.", "Cluster", array=True)},
    ),
    Operation(
        "post",
        "/clusters",
        "createCluster",
        "Add a cluster by hand (UNKNOWN until status alerts arrive)",
        body="NewCluster",
        mutating=True,
        answers={
            201: Reply("Created.", "Cluster"),
            **WRITE,
            409: Reply("A cluster of that name exists.", "Error"),
        },
        links={
            "GetCluster": _link("getCluster", name="$response.body#/name"),
            "AddAppToCluster": _body_link(
                "createApp", {"name": "$response.body#/name", "cluster": "$response.body#/name"}
            ),
            "ClearAlerts": _link("clearClusterAlerts", name="$response.body#/name"),
            "DeleteCluster": _link("deleteCluster", name="$response.body#/name"),
        },
    ),
    Operation(
        "get",
        "/clusters/{name}",
        "getCluster",
        "One cluster, with its latest outages",
        answers={200: Reply("The cluster, its outages and apps.", "ClusterDetail"), 404: E404},
    ),
    Operation(
        "delete",
        "/clusters/{name}",
        "deleteCluster",
        "Forget a decommissioned cluster",
        description=(
            "Deletes the cluster, its alert state and its outages. Refused (409) while apps "
            "are on it, so none is deleted by surprise; with force=true its apps are deleted "
            "with it. A cluster still in a kubeconfig comes back at the next start-up scan, "
            "and one still named by a status alert comes back with the next notification."
        ),
        mutating=True,
        query=(
            {
                "name": "force",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "enum": ["true", "false"], "default": "false"},
                "description": "true: delete the apps on the cluster too",
            },
        ),
        answers={
            200: Reply("Deleted.", "DeletedCluster"),
            400: E400,
            401: E401,
            404: E404,
            409: Reply("Apps are on the cluster (and force is not true).", "Error"),
            503: E503,
        },
    ),
    Operation(
        "delete",
        "/clusters/{name}/alerts",
        "clearClusterAlerts",
        "Clear a cluster's alert state (it reads UNKNOWN again)",
        description=(
            "The repair path for a state no later alert can fix. Both status alerts are "
            "forgotten; an open outage is closed and the apps it degraded are restored. The "
            "cluster keeps 'had been ONLINE', so a real OFFLINE that arrives next (a repeat, "
            "or reconciliation) cascades again."
        ),
        mutating=True,
        answers={200: Reply("Cleared.", "ClusterReset"), 401: E401, 404: E404, 503: E503},
    ),
    Operation(
        "get",
        "/apps",
        "listApps",
        "All apps",
        answers={200: Reply("Apps by name.", "App", array=True)},
    ),
    Operation(
        "post",
        "/apps",
        "createApp",
        "Add an app (PENDING)",
        body="NewApp",
        mutating=True,
        answers={
            201: Reply("Created, PENDING.", "App"),
            **WRITE,
            404: Reply("No cluster of that name.", "Error"),
            409: Reply("An app of that name exists.", "Error"),
        },
        links={
            "GetApp": _link("getApp", name="$response.body#/name"),
            # With the body: a reassignment to its own cluster, so a 404 the link reaches
            # is about the app, never about a cluster the generator made up.
            "ReassignApp": {
                **_link("patchApp", name="$response.body#/name"),
                "requestBody": {"cluster": "$response.body#/cluster"},
            },
            "DeployApp": _body_link(
                "createDeployment",
                {"app": "$response.body#/name", "cluster": "$response.body#/cluster"},
            ),
        },
    ),
    Operation(
        "get",
        "/apps/{name}",
        "getApp",
        "One app",
        answers={200: Reply("The app.", "App"), 404: E404},
    ),
    Operation(
        "patch",
        "/apps/{name}",
        "patchApp",
        "Reassign an app, or report its health",
        description=(
            "{cluster}: a reassignment, PENDING on the new cluster (gated). "
            "{status: DEGRADED, reason}: a health report. {status: DEPLOYED}: healthy again "
            "(gated)."
        ),
        body="AppPatch",
        mutating=True,
        answers={
            200: Reply("The app after the change.", "App"),
            **WRITE,
            404: E404,
            409: GATED,
        },
    ),
    Operation(
        "post",
        "/deployments",
        "createDeployment",
        "Record a deployment: the app is DEPLOYED on that cluster",
        body="Deployment",
        mutating=True,
        answers={
            201: Reply("The app, DEPLOYED on the cluster.", "App"),
            **WRITE,
            404: E404,
            409: GATED,
        },
        links={"GetApp": _link("getApp", name="$response.body#/name")},
    ),
    Operation("get", "/", "index", "Landing page", answers={200: Reply("Links.", media=HTML)}),
    Operation(
        "get", "/healthz", "healthz", "Liveness (JSON)", answers={200: Reply("Alive.", "Liveness")}
    ),
    Operation(
        "get",
        "/-/healthy",
        "healthy",
        "Liveness, as Prometheus' own servers answer it",
        answers={200: Reply("The process serves.", media=TEXT)},
    ),
    Operation(
        "get",
        "/-/ready",
        "ready",
        "Readiness: can the database answer; are the management cluster's lists done?",
        answers={
            200: Reply("Ready.", media=TEXT),
            503: Reply("Not yet (the text says why).", media=TEXT, headers=("Retry-After",)),
        },
    ),
    Operation(
        "get",
        "/metrics",
        "metrics",
        "Prometheus metrics of the reactor",
        answers={200: Reply("Text exposition format.", media=METRICS)},
    ),
    Operation(
        "get",
        "/openapi.json",
        "openapi",
        "This document",
        answers={200: Reply("OpenAPI 3.1 document.", media=JSON)},
    ),
)

HEADERS: dict[str, dict[str, Any]] = {
    "WWW-Authenticate": {
        "description": "Bearer (or Basic, with --web.config.file users)",
        "schema": {"type": "string"},
    },
    "Retry-After": {"description": "seconds", "schema": {"type": "string"}},
}


def _content(answer: Reply) -> dict[str, Any]:
    if answer.schema is None:
        return {answer.media: {"schema": {"type": "string"}}}
    schema: dict[str, Any] = {"$ref": REF.format(model=answer.schema)}
    if answer.array:
        schema = {"type": "array", "items": schema}
    return {answer.media: {"schema": schema}}


def _answer(answer: Reply, basic: bool, code: int) -> dict[str, Any]:
    out: dict[str, Any] = {"description": answer.description, "content": _content(answer)}
    if answer.headers:
        out["headers"] = {h: HEADERS[h] for h in answer.headers}
    if code == 401 and basic:  # the basic-auth guard answers in plain text
        out["content"][TEXT] = {"schema": {"type": "string"}}
    return out


def _operation(op: Operation, basic: bool) -> dict[str, Any]:
    answers = dict(op.answers)
    if basic and 401 not in answers:
        answers[401] = Reply("Missing or wrong basic auth (or bearer token).", "Error")
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary}
    if op.description:
        out["description"] = op.description
    if op.mutating:
        out["security"] = [{"bearer": []}]
    else:
        out["security"] = [{"basic": []}, {"bearer": []}] if basic else []
    parameters = [NAME_IN_PATH] if "{name}" in op.path else []
    parameters.extend(op.query)
    if parameters:
        out["parameters"] = parameters
    if op.body is not None:
        out["requestBody"] = {
            "required": True,
            "content": {JSON: {"schema": {"$ref": REF.format(model=op.body)}}},
        }
    out["responses"] = {str(code): _answer(answers[code], basic, code) for code in sorted(answers)}
    if op.links:
        first = min(c for c in answers if c < 300)
        out["responses"][str(first)]["links"] = op.links
    return out


def _share(node: Any, shared: dict[str, Any]) -> Any:
    """Replace each inline copy of a shared schema (found by its pattern) by a $ref."""
    if isinstance(node, dict):
        name = SHARED.get(node.get("pattern", ""))
        if name is not None:
            shared[name] = {k: v for k, v in node.items() if k != "title"}
            return {"$ref": REF.format(model=name)}
        return {k: _share(v, shared) for k, v in node.items()}
    if isinstance(node, list):
        return [_share(v, shared) for v in node]
    return node


def _named(node: Any, names: dict[str, str]) -> Any:
    """Each class name of ``names`` replaced by its schema's name, as a title and in $refs."""
    if isinstance(node, list):
        return [_named(v, names) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _named(v, names) for k, v in node.items()}
    if isinstance(out.get("title"), str):
        out["title"] = names.get(out["title"], out["title"])
    if isinstance(out.get("$ref"), str):
        prefix, _, model = out["$ref"].rpartition("/")
        out["$ref"] = f"{prefix}/{names.get(model, model)}"
    return out


def components() -> dict[str, Any]:
    """Every schema of reactor.models, named by its key in SCHEMAS (``ClusterBody`` is
    ``Cluster``, in the document and every generated client), the shared ones once."""
    names = {
        kind.__name__: name
        for name, kind in models.SCHEMAS.items()
        if isinstance(kind, type) and kind.__name__ != name
    }
    schemas: dict[str, Any] = {}
    for name, kind in models.SCHEMAS.items():
        schema = TypeAdapter(kind).json_schema(ref_template=REF)
        for model, nested in schema.pop("$defs", {}).items():
            schemas[names.get(model, model)] = nested
        schema.setdefault("title", name)
        schemas[name] = schema
    shared: dict[str, Any] = {}
    schemas = _share(_named(schemas, names), shared)
    return {**schemas, **shared}


@cache
def openapi_document(basic: bool = False) -> dict[str, Any]:
    """The document; ``basic``: the reactor has --web.config.file basic-auth users."""
    schemes: dict[str, Any] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "--web.token-file; required on POST, PATCH and DELETE when set",
        }
    }
    if basic:
        schemes["basic"] = {
            "type": "http",
            "scheme": "basic",
            "description": "--web.config.file basic_auth_users; on every path",
        }
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op, basic)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fleetwatch reactor",
            "version": __version__,
            "description": (
                "Receives Alertmanager notifications about cluster status, degrades the apps "
                "of a cluster that went OFFLINE and restores them when it is ONLINE again, "
                "and gates deployments: 409 when the target cluster is OFFLINE."
            ),
        },
        "components": {"securitySchemes": schemes, "schemas": components()},
        "paths": paths,
    }
