"""The reactor API's bodies, as models: what validates a request, what an answer looks like,
and what reactor/openapi.py turns into the OpenAPI document. One statement of each rule.

Requests are pydantic models in strict mode (a JSON ``true`` is not an integer, ``5`` is not
a string), checked after the body is read as a JSON object (reactor.signals.load_json_object
says what is wrong with a body that is not one). A model's ``ValidationError`` becomes the
400's message with :func:`problem`, in the words the API has always used (``missing
"endpoint"``, ``alerts[0].startsAt is not an RFC 3339 timestamp``). Answers are TypedDicts:
the handlers build plain dicts, as cheap as before, and :data:`ENCODERS` write them with
pydantic's serialiser, which the document describes from the same types.

The rules that cannot be said with a JSON Schema keyword alone are regular expressions
here, and the server checks values with the very pattern the document carries:

- a name (cluster, app) is 1 to 253 printable characters without a space at either end
  (printable as Python says: :data:`NAME_PATTERN` is built from ``str.isprintable`` over
  every code point, so a client sees the exact set);
- a text (``kubeconfig_secret_ref``, a ``reason``) is 1 to 4096 printable characters, not
  only spaces;
- an endpoint is an http(s) URL with a host name, an IPv4 or an IPv6 address, and a port
  from 0 to 65535 when it has one;
- a webhook's timestamps are ASCII RFC 3339 with a real month, day, hour, minute and second.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

MAX_NAME = 253
MAX_TEXT = 4096


# -- the patterns ------------------------------------------------------------------------


def _printable_class() -> str:
    """The characters ``str.isprintable`` accepts but the space, as the inside of a class.

    A positive class, not "anything but the unprintable": generators (schemathesis,
    Hypothesis) draw from its ranges quickly, where a negated class of the same size made
    them take half a second per value. Literal characters, not escapes, so Python's ``re``,
    ECMAScript's (with the ``u`` flag) and Rust's read it alike.
    """
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if code != 0x20 and chr(code).isprintable():
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])

    def char(code: int) -> str:
        return "\\" + chr(code) if chr(code) in "\\]^-[" else chr(code)

    return "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges)


_P = _printable_class()

#: 1+ printable characters, none a space at either end (the length is maxLength's).
NAME_PATTERN = f"^[{_P}](?:[{_P} ]*[{_P}])?$"
#: printable characters, at least one not a space.
TEXT_PATTERN = f"^[{_P} ]*[{_P}][{_P} ]*$"

_H16 = "[0-9A-Fa-f]{1,4}"
_IPV6 = "|".join(
    [
        f"(?:{_H16}:){{7}}{_H16}",
        f"(?:{_H16}:){{1,7}}:",
        f"(?:{_H16}:){{1,6}}:{_H16}",
        f"(?:{_H16}:){{1,5}}(?::{_H16}){{1,2}}",
        f"(?:{_H16}:){{1,4}}(?::{_H16}){{1,3}}",
        f"(?:{_H16}:){{1,3}}(?::{_H16}){{1,4}}",
        f"(?:{_H16}:){{1,2}}(?::{_H16}){{1,5}}",
        f"{_H16}:(?::{_H16}){{1,6}}",
        f":(?:(?::{_H16}){{1,7}}|:)",
    ]
)
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
#: http(s)://host[:port][/path?query#fragment], the path printable.
ENDPOINT_PATTERN = (
    f"^[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9._~%-]+|\\[(?:{_IPV6})\\])(?::{_PORT})?"
    f"(?:[/?#][{_P} ]*)?$"
)

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
#: From year 2: year 1 holds Go's zero time, which Alertmanager sends for "no time".
_YEAR_FROM_2 = "(?:[0-9]{3}[2-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
_DAY = (
    "-"
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-9]))"
)
_CLOCK = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?"
#: RFC 3339 in ASCII digits, with a real month, day and time (29 February of any year: the
#: server refuses it in a year that has none), and a "T" between date and time (the form
#: the format date-time names; Alertmanager sends it).
_ZONE = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIMESTAMP_PATTERN = f"^{_YEAR}{_DAY}[Tt]{_CLOCK}{_ZONE}$"
#: A ``startsAt``: a timestamp from year 2 (the zero time is no start).
START_PATTERN = f"^{_YEAR_FROM_2}{_DAY}[Tt]{_CLOCK}{_ZONE}$"

TIME_PATTERNS = (TIMESTAMP_PATTERN, START_PATTERN)
_NAME_RE = re.compile(NAME_PATTERN)
_TEXT_RE = re.compile(TEXT_PATTERN)
_ENDPOINT_RE = re.compile(ENDPOINT_PATTERN)
TIMESTAMP_RE = re.compile(TIMESTAMP_PATTERN)
#: The shape alone (any two digits for a month), to tell "not a valid time" apart.
_LOOSE_TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def is_name(text: str) -> bool:
    """A usable cluster or app name: 1 to 253 printable characters, no space at either end.

    A cluster's name is its kubeconfig context name, and kubeconfigs allow inner spaces
    ("prod east"): refusing them would leave such a cluster UNKNOWN for ever. Printable
    excludes tabs, newlines and every other whitespace but the plain space.
    """
    return 0 < len(text) <= MAX_NAME and _NAME_RE.fullmatch(text) is not None


# -- checks, raising the message that follows the field's name ----------------------------


class Problem(ValueError):
    """A value a field cannot take; :func:`problem` puts the field's name before it."""


def _check_name(value: object) -> str:
    if not isinstance(value, str):
        raise Problem("must be a string")
    if not 0 < len(value) <= MAX_NAME:
        raise Problem(f"must have 1 to {MAX_NAME} characters")
    if _NAME_RE.fullmatch(value) is None:
        raise Problem("must be printable characters, without a space at either end")
    return value


def _check_text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Problem("must be a non-empty string")
    if len(value) > MAX_TEXT or _TEXT_RE.fullmatch(value) is None:
        raise Problem(f"must be at most {MAX_TEXT} printable characters")
    return value


def _check_endpoint(value: object) -> str:
    value = _check_text(value)
    try:
        parts = urlsplit(value)
        usable = parts.scheme in ("https", "http") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:  # e.g. "https://[::1": an unclosed IPv6 bracket
        usable = False
    if not usable or _ENDPOINT_RE.fullmatch(value) is None:
        raise Problem("must be an http(s) URL such as https://10.0.0.1:6443")
    return value


def _check_version(value: object) -> str:
    if value != "4":
        raise Problem(f'unsupported webhook version {clip(str(value))!r}; expected "4"')
    return "4"


def _check_alert_status(value: object) -> str:
    if value not in ("firing", "resolved"):
        raise Problem(f'must be "firing" or "resolved", got {clip(repr(value))}')
    return str(value)


Name = Annotated[
    str,
    BeforeValidator(_check_name),
    Field(
        min_length=1,
        max_length=MAX_NAME,
        json_schema_extra={"pattern": NAME_PATTERN},
        description=(
            "1 to 253 printable characters, no space at either end (inner spaces are "
            "allowed: kubeconfig context names have them)"
        ),
    ),
]
Text = Annotated[
    str,
    BeforeValidator(_check_text),
    Field(
        min_length=1,
        max_length=MAX_TEXT,
        json_schema_extra={"pattern": TEXT_PATTERN},
        description="1 to 4096 printable characters, not only spaces",
    ),
]
Endpoint = Annotated[
    str,
    BeforeValidator(_check_endpoint),
    Field(
        min_length=1,
        max_length=MAX_TEXT,
        json_schema_extra={"pattern": ENDPOINT_PATTERN, "format": "uri"},
        description="the API server's http(s) URL",
        examples=["https://10.0.0.1:6443"],
    ),
]
#: Checked by pydantic's own (Rust) regex: a webhook carries thousands of them.
Timestamp = Annotated[
    str, Field(pattern=TIMESTAMP_PATTERN, json_schema_extra={"format": "date-time"})
]
Start = Annotated[str, Field(pattern=START_PATTERN, json_schema_extra={"format": "date-time"})]
Labels = dict[str, str]

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


class Outage(TypedDict):
    started_at: Time
    #: null while the outage is open
    closed_at: Time
    apps_degraded: int
    apps_restored: int


class ClusterWithOutages(ClusterBody):
    """One cluster, with its latest outages, newest first (at most 10; closed ones are
    kept for --db.retention)."""

    outages: list[Outage]


class App(TypedDict):
    name: str
    cluster: str
    status: AppStatus
    reason: str | None


class Error(TypedDict):
    """Every error answer: what is wrong, in words."""

    error: str


class RefusalBody(TypedDict):
    """409 of the deployment gate: the cluster and its status beside the message."""

    error: str
    cluster: str
    status: ClusterStatus


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
    "Cluster": ClusterBody,
    "ClusterWithOutages": ClusterWithOutages,
    "Outage": Outage,
    "App": App,
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


def kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def clip(text: str, limit: int = 80) -> str:
    """Echo at most ``limit`` characters of the caller's input back in a message or a log."""
    return text if len(text) <= limit else text[:limit] + "..."
