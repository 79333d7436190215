"""The reactor API's bodies, as models: what validates a request, what an answer looks like,
and what reactor/api/openapi.py turns into the OpenAPI document. One statement of each rule.

Requests are pydantic models in strict mode (a JSON ``true`` is not an integer, ``5`` is not
a string), checked after the body is read as a JSON object
(reactor.alertmanager.signals.load_json_object
says what is wrong with a body that is not one); their fields' types, patterns and checks
are ``reactor.fields``. A model's ``ValidationError`` becomes the 400's message with
:func:`problem`, in the API's words (``missing "endpoint"``, ``alerts[0].startsAt is not an
RFC 3339 timestamp``). Answers are TypedDicts: the handlers build plain dicts, and
:func:`encode` writes them with pydantic's serialiser, which the document describes from
the same types.

A body's class is named by its role (``ClusterBody``); its name in the document, and so in
generated clients, is its key in :data:`SCHEMAS` (``Cluster``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from reactor.fields import (
    START_PATTERN,
    TIME_PATTERNS,
    Endpoint,
    Labels,
    Name,
    Problem,
    Start,
    Text,
    Timestamp,
    clip,
    is_name,
    kind,
)

#: The shape alone (any two digits for a month), to tell "not a valid time" apart.
_LOOSE_TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def _check_version(value: object) -> str:
    if value != "4":
        raise Problem(f'unsupported webhook version {clip(str(value))!r}; expected "4"')
    return "4"


def _check_alert_status(value: object) -> str:
    if value not in ("firing", "resolved"):
        raise Problem(f'must be "firing" or "resolved", got {clip(repr(value))}')
    return str(value)


_STRICT = ConfigDict(strict=True, extra="forbid", regex_engine="python-re")


# -- requests --------------------------------------------------------------------------


class NewCluster(BaseModel):
    """A cluster added by hand: UNKNOWN until status alerts name it."""

    model_config = _STRICT
    name: Name
    endpoint: Endpoint
    kubeconfig_secret_ref: Text


class NewApp(BaseModel):
    """An app on a cluster, PENDING until deployed."""

    model_config = _STRICT
    name: Name
    cluster: Name


class Reassignment(BaseModel):
    """Move the app to another cluster: PENDING there (gated: 409 if it is OFFLINE)."""

    model_config = _STRICT
    cluster: Name


class DegradedReport(BaseModel):
    """The deployment reports the app unhealthy, and says why."""

    model_config = _STRICT
    status: Literal["DEGRADED"]
    reason: Text


def _no_reason(value: object) -> None:
    if value is not None:
        raise Problem("goes only with status DEGRADED")
    return None


class DeployedReport(BaseModel):
    """The deployment reports the app healthy again (gated: 409 if its cluster is OFFLINE)."""

    model_config = _STRICT
    status: Literal["DEPLOYED"]
    reason: Annotated[None, BeforeValidator(_no_reason)] = None


#: ``PATCH /apps/{name}``: exactly one of these shapes.
AppPatch = Reassignment | DegradedReport | DeployedReport


class Deployment(BaseModel):
    """A deployment of ``app`` on ``cluster`` (moving the app there if it was elsewhere)."""

    model_config = _STRICT
    app: Name
    cluster: Name


def deployment(doc: dict[str, Any]) -> tuple[str, str]:
    """``doc`` as a :class:`Deployment`: its (app, cluster), or :class:`Problem`.

    The hot path of the API (every CD pipeline asks it): the usual body, two names and
    nothing else, is accepted here by the rule the model's fields apply
    (:func:`reactor.fields.is_name`) in about a microsecond, against 10 to 13 through
    pydantic; any other body goes to the model, which accepts or refuses it in its words.
    """
    if len(doc) == 2:
        app, cluster = doc.get("app"), doc.get("cluster")
        if type(app) is str and type(cluster) is str and is_name(app) and is_name(cluster):
            return app, cluster
    model = validate(Deployment, doc)
    return model.app, model.cluster


_IGNORE = ConfigDict(strict=True, extra="ignore")


class WebhookAlert(BaseModel):
    """One alert of a webhook. Fields not named here are ignored; these are checked when
    present. Alerts that cannot be used (another alertname, no ``cluster`` label, a
    ``resolved`` without ``endsAt``, a time far in the future) are skipped, not refused."""

    model_config = _IGNORE
    status: Annotated[Literal["firing", "resolved"], BeforeValidator(_check_alert_status)] = Field(
        description="this alert's own status (the group's is not used)"
    )
    labels: Labels = Field(description="alertname and cluster are read; the rest is ignored")
    startsAt: Start
    endsAt: Timestamp | None = Field(default=None, description="0001-01-01T00:00:00Z while firing")
    annotations: Labels | None = None
    generatorURL: str | None = None
    fingerprint: str | None = None


class WebhookBody(BaseModel):
    """Alertmanager's webhook payload, version 4. Only ``alerts`` is used; the other fields
    are checked when present and otherwise ignored, and so is any field not named here."""

    model_config = _IGNORE
    version: Annotated[Literal["4"], BeforeValidator(_check_version)] = "4"
    alerts: list[WebhookAlert]
    groupKey: str | None = None
    truncatedAlerts: int | None = None
    status: str | None = None
    receiver: str | None = None
    groupLabels: Labels | None = None
    commonLabels: Labels | None = None
    commonAnnotations: Labels | None = None
    externalURL: str | None = None


# -- answers ---------------------------------------------------------------------------

ClusterStatus = Literal["UNKNOWN", "ONLINE", "OFFLINE"]
AppStatus = Literal["PENDING", "DEPLOYED", "DEGRADED"]
Source = Literal["discovery", "api", "alerts"]
#: "api": made through the API; "flux", "argocd": mirrored from that object (reactor.cd)
AppSource = Literal["api", "flux", "argocd"]
Time = Annotated[str | None, Field(json_schema_extra={"format": "date-time"})]


class ClusterBody(TypedDict):
    name: str
    endpoint: str | None
    kubeconfig_secret_ref: str | None
    status: ClusterStatus
    status_since: Time
    source: Source
    #: start of the open outage, null when none is open
    outage_since: Time
    #: the last probe failure's reason as the status alerts told it (the exporter's words,
    #: comma-separated when vantage points differ: "timeout", "unauthorized"...); null when
    #: its last probe succeeded or none was told
    reason: str | None
    #: the class of that reason: "unreachable" or "credentials" (refused: 401, 403, TLS)
    reason_class: str | None
    #: what holds its FleetClusterOffline back in Alertmanager while the reactor does not
    #: read it OFFLINE: "storm_guard" (inhibited by FleetProbeStorm) or "silence"; else null
    offline_held_by: Literal["storm_guard", "silence"] | None
    #: that hold in words (nothing is paused, deployments are allowed), null when none
    note: str | None


class Outage(TypedDict):
    started_at: Time
    #: null while the outage is open
    closed_at: Time
    apps_degraded: int
    apps_restored: int


class PausedByOutage(TypedDict):
    """Paused by fleetwatch: ``outage`` is its mark, the id of the outage it is for."""

    by: Literal["outage"]
    outage: str


class PausedByPerson(TypedDict):
    """Paused without fleetwatch's mark (by a person, as a rule): never resumed by it."""

    by: Literal["person"]


class App(TypedDict):
    name: str
    cluster: str
    status: AppStatus
    reason: str | None
    #: "api", or the Flux or Argo CD object it mirrors (named SOURCE:KIND/NAMESPACE/NAME)
    source: AppSource
    #: who paused its Flux or Argo CD object, as last seen; null: running (or an API app)
    paused: PausedByOutage | PausedByPerson | None


class ClusterDetail(ClusterBody):
    """One cluster, with its latest outages, newest first (at most 10; closed ones are
    kept for --db.retention), and its apps by name, each with its source."""

    outages: list[Outage]
    apps: list[App]


class Error(TypedDict):
    """Every error answer: what is wrong, in words."""

    error: str


class RefusalBody(TypedDict):
    """409 of the deployment gate: the cluster and its status beside the message."""

    error: str
    cluster: str
    status: ClusterStatus


#: 409 of a deployment or an app's change: the gate's refusal, or an app that Flux or Argo
#: CD deploys (reactor.managed), refused with the words only
Conflict = RefusalBody | Error


class NotificationResultBody(TypedDict):
    applied: int
    skipped: int
    clusters_changed: int
    outages_opened: int
    outages_closed: int
    apps_degraded: int
    apps_restored: int


class DeletedCluster(TypedDict):
    deleted: str
    apps_deleted: int


class ClusterReset(TypedDict):
    cluster: ClusterBody
    outages_closed: int
    apps_restored: int


class Liveness(TypedDict):
    status: Literal["ok"]


#: Every named type of the document, and the adapter that writes it.
SCHEMAS: dict[str, Any] = {
    "Error": Error,
    "Refusal": RefusalBody,
    "Conflict": Conflict,
    "Cluster": ClusterBody,
    "ClusterDetail": ClusterDetail,
    "Outage": Outage,
    "App": App,
    "PausedByOutage": PausedByOutage,
    "PausedByPerson": PausedByPerson,
    "NewCluster": NewCluster,
    "NewApp": NewApp,
    "AppPatch": AppPatch,
    "Deployment": Deployment,
    "Webhook": WebhookBody,
    "NotificationResult": NotificationResultBody,
    "DeletedCluster": DeletedCluster,
    "ClusterReset": ClusterReset,
    "Liveness": Liveness,
}


@cache
def adapter(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(SCHEMAS[name])


def encode(name: str, value: Any) -> bytes:
    """``value`` written as JSON by the schema ``name`` (a list of them when a list)."""
    if isinstance(value, list):
        return list_adapter(name).dump_json(value)
    return adapter(name).dump_json(value)


@cache
def list_adapter(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(list[SCHEMAS[name]])  # type: ignore[valid-type]


def build_adapters() -> None:
    """Build every adapter now (the app does at its creation): each is 1-5 ms of
    pydantic's schema building, which the first answer of its kind would otherwise pay,
    as the first webhook after a start did (12 ms at p99's end in bench/reactor_lists)."""
    for name in SCHEMAS:
        adapter(name)
        list_adapter(name)


# -- errors in words -------------------------------------------------------------------

_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "an array",
    "none_required": "null",
}


def where(loc: tuple[int | str, ...]) -> str:
    """``("alerts", 0, "startsAt")`` -> ``alerts[0].startsAt``; a top field is quoted."""
    if len(loc) == 1:
        return f'"{clip(str(loc[0]))}"'
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{clip(part)}" if text else clip(part)
    return text


def problem(exc: ValidationError, model: Any) -> str:
    """The first error of ``exc`` in the API's words (the 400's message)."""
    err = exc.errors(include_url=False)[0]
    loc: tuple[int | str, ...] = tuple(err["loc"])
    kind_ = err["type"]
    if kind_ == "missing":
        *parent, key = loc
        if not parent:
            return f'missing "{key}"' + (
                ": not an Alertmanager webhook" if model is WebhookBody else ""
            )
        return f'{where(tuple(parent))} has no "{key}"'
    if kind_ == "extra_forbidden":
        allowed = ", ".join(sorted(model.model_fields))
        return f"unknown field {clip(str(loc[-1]))!r}; allowed: {allowed}"
    if kind_ == "value_error":
        cause = err.get("ctx", {}).get("error")
        message = str(cause) if cause is not None else err["msg"]
        if loc == ("version",):
            return message
        return f"{where(loc)} {message}"
    if kind_ == "string_pattern_mismatch" and err["ctx"]["pattern"] in TIME_PATTERNS:
        value = str(err["input"])
        if value.startswith("0001-") and err["ctx"]["pattern"] == START_PATTERN:
            return f"{where(loc)} is in year 1, Go's zero time: not a start"
        if _LOOSE_TIMESTAMP_RE.fullmatch(value) is not None:  # e.g. 30 February
            return f"{where(loc)} is not a valid time: {clip(value)!r}"
        return f"{where(loc)} is not an RFC 3339 timestamp: {clip(value)!r}"
    if kind_ == "string_type" and loc[-1] in ("startsAt", "endsAt"):
        return f"{where(loc)} must be an RFC 3339 timestamp string, got {kind(err['input'])}"
    if kind_ in _KINDS:
        return f"{where(loc)} must be {_KINDS[kind_]}, got {kind(err.get('input'))}"
    return f"{where(loc)}: {err['msg']}"


def validate(model: Callable[..., Any], doc: dict[str, Any]) -> Any:
    """``doc`` as ``model``; :class:`Problem` with the 400's message if it is not one."""
    try:
        return model.model_validate(doc)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise Problem(problem(exc, model)) from None
