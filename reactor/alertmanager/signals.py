"""Alertmanager webhook (version 4) -> status signals for the state machine.

The body is parsed once, here, into dataclasses; its accepted shape (what is required,
checked when present, or ignored) is ``reactor.models.WebhookBody``, the model the OpenAPI
document shows. A body that is not a v4 webhook raises
:class:`PayloadError` whose message says what is wrong and where (the API answers 400:
Alertmanager does not retry 4xx). Inside a valid webhook, an alert that cannot be used
(another alertname, no ``cluster`` label, a "resolved" without ``endsAt`` or ending before
it starts, a time far in the future) is skipped and reported, never fatal: Alertmanager
would otherwise re-send the whole group forever. Timestamps are ASCII RFC 3339 with a T.

What Alertmanager 0.25 really sends (checked against a real one, see
tests/reactor/test_alertmanager.py): ``version "4"``, ``alerts[]`` each with its
own ``status``, ``labels``, ``startsAt``, ``endsAt`` (``0001-01-01T00:00:00Z`` while firing),
``fingerprint``. We go by each alert's own status, never the group's.

Every time is kept to the millisecond. Alertmanager's webhooks pass on the sender's full
precision (Go's RFC3339Nano, up to nine digits), its API v2 writes milliseconds: an alert
instance is named by its ``startsAt``, and it must have one name whichever path brought it,
or reconciliation (``reactor.reconcile``) takes the instance a webhook brought for one it
no longer lists.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reactor import models
from reactor.fields import Problem
from reactor.fields import clip as clip  # re-exported: the rules live in fields
from reactor.fields import is_name as is_name
from reactor.fields import kind as _kind
from reactor.models import validate
from reactor.reasons import Told, told
from reactor.statemachine import AlertState, StatusAlert


class PayloadError(ValueError):
    """The body is not an Alertmanager v4 webhook; the message is sent back with the 400."""


@dataclass(frozen=True, slots=True)
class Alert:
    status: str  #: "firing" or "resolved"
    labels: Mapping[str, str]
    starts_at: int  #: microseconds since the epoch
    ends_at: int | None  #: microseconds since the epoch; None for Go's zero time or when absent
    annotations: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Webhook:
    alerts: tuple[Alert, ...]


@dataclass(frozen=True, slots=True)
class Signal:
    """One usable status alert: what it says about which cluster."""

    cluster: str
    alert: StatusAlert
    state: AlertState
    #: the last failure reason its annotations tell (``reactor.reasons``); None: none
    told: Told | None = None


@dataclass(frozen=True, slots=True)
class Signals:
    signals: tuple[Signal, ...]
    #: one human line per skipped alert, e.g. "alerts[2]: alertname 'Foo' is not a status alert"
    skipped: tuple[str, ...]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: ASCII digits only: without re.ASCII, ``\d`` also matches fullwidth or Arabic-Indic digits,
#: and int() reads them.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def parse_time(value: object, where: str) -> int | None:
    """RFC 3339 -> microseconds since the epoch, to the millisecond; Go's zero time -> None.

    Alertmanager's webhooks carry nanoseconds, its API milliseconds: we keep what both
    carry (:data:`PRECISION_US`), counted in microseconds, which fit a 64-bit integer for
    any year a timestamp can spell (nanoseconds would overflow after 2262).
    """
    if not isinstance(value, str):
        raise PayloadError(f"{where} must be an RFC 3339 timestamp string, got {_kind(value)}")
    m = _RFC3339.fullmatch(value)
    if m is None:
        raise PayloadError(f"{where} is not an RFC 3339 timestamp: {clip(value)!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zone = m.group(7) or "", m.group(8)
    if (
        year == 1
        and (month, day, hour, minute, second) == (1, 1, 0, 0, 0)
        and not fraction.strip("0")
    ):
        return None
    try:
        offset = 0
        if zone not in ("Z", "z"):
            sign = 1 if zone[0] == "+" else -1
            zh, zm = int(zone[1:3]), int(zone[4:6])
            if zh > 23 or zm > 59:
                raise ValueError("zone offset out of range")
            offset = sign * (zh * 3600 + zm * 60)
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        moment -= timedelta(seconds=offset)
    except (ValueError, OverflowError) as exc:
        raise PayloadError(f"{where} is not a valid time: {clip(value)!r} ({exc})") from None
    millis = int(fraction.ljust(3, "0")[:3])
    return (moment - EPOCH) // timedelta(microseconds=1) + millis * 1000


def format_time(us: int | None) -> str | None:
    """Microseconds since the epoch -> RFC 3339 in UTC, as short as exact."""
    if us is None:
        return None
    moment = EPOCH + timedelta(microseconds=us)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += "." + f"{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def load_json_object(body: bytes, what: str = "") -> dict[str, Any]:
    """A request body -> its JSON object, or :class:`PayloadError` saying why not.

    Every body of the API goes through here (the handlers turn the error into a 400).
    ``what`` names the expected object in the message, e.g. " (a webhook)".
    """
    try:
        doc = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise PayloadError("body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PayloadError(f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise PayloadError("body is not valid JSON: nested too deeply") from None
    except ValueError:  # an integer longer than Python reads (4300 digits by default)
        raise PayloadError("body holds a number too long to read (thousands of digits)") from None
    if not isinstance(doc, dict):
        raise PayloadError(f"body must be a JSON object{what}, got {_kind(doc)}")
    return doc


def parse_webhook(body: bytes) -> Webhook:
    """Bytes of a POST /alerts -> :class:`Webhook`, or :class:`PayloadError` saying why not.

    The accepted shape is :class:`reactor.models.WebhookBody` (the document's ``Webhook``).
    """
    doc = load_json_object(body, " (a webhook)")
    try:
        model = validate(models.WebhookBody, doc)
    except Problem as exc:
        raise PayloadError(str(exc)) from None
    return Webhook(tuple(_alert(raw, f"alerts[{i}]") for i, raw in enumerate(model.alerts)))


def _alert(raw: models.WebhookAlert, where: str) -> Alert:
    starts_at = _checked_time(raw.startsAt, where, "startsAt")
    if starts_at is None:
        raise PayloadError(f"{where}.startsAt is the zero time")
    ends_at = _checked_time(raw.endsAt, where, "endsAt") if raw.endsAt is not None else None
    return Alert(raw.status, raw.labels, starts_at, ends_at, raw.annotations)


_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


def _checked_time(value: str, where: str, field: str) -> int | None:
    """:func:`parse_time` of a value the model's pattern has passed, faster for the form
    Alertmanager sends (UTC, ``Z``): ``datetime.fromisoformat`` reads that form the same
    way and takes a third of the time, which counts in a webhook of a thousand alerts.
    (Where it refuses a form, nine fractional digits on some Python versions, parse_time
    reads it.)"""
    if value[-1] == "Z":
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:  # 29 February of a year without one: parse_time says so
            pass
        else:
            if moment != _ZERO_TIME:  # the zero time, to the nanosecond: parse_time
                return (moment - EPOCH) // timedelta(milliseconds=1) * 1000
    return parse_time(value, f"{where}.{field}")


#: How far ahead of this reactor's clock a ``startsAt`` may be (clocks of Prometheus and
#: the reactor differ a little); beyond it the alert is skipped, never stored.
DEFAULT_MAX_FUTURE_SKEW_S = 600.0


def status_signals(
    webhook: Webhook,
    *,
    now: float | None = None,
    max_future_skew_s: float = DEFAULT_MAX_FUTURE_SKEW_S,
) -> Signals:
    """The usable status alerts of a webhook, and a line for each alert skipped.

    An alert is newer information when its ``startsAt`` is later, so one that starts far in
    the future would win over every real one for ever: an OFFLINE of year 9999 would open
    an outage no ONLINE could close. Alerts starting (or, resolved, ending) more than
    ``max_future_skew_s`` after ``now`` (seconds since the epoch, the clock by default)
    are skipped; so is a resolved alert that ends before it started.
    """
    clock = time.time() if now is None else now
    latest = int((clock + max_future_skew_s) * 1_000_000)
    signals: list[Signal] = []
    skipped: list[str] = []
    for i, alert in enumerate(webhook.alerts):
        name = alert.labels.get("alertname", "")
        try:
            kind = StatusAlert(name)
        except ValueError:
            skipped.append(f"alerts[{i}]: alertname {clip(str(name))!r} is not a status alert")
            continue
        cluster = alert.labels.get("cluster", "")
        if not cluster:
            skipped.append(f"alerts[{i}]: {kind.value} without a cluster label")
            continue
        if not is_name(cluster):
            skipped.append(f"alerts[{i}]: {kind.value} with an unusable cluster {clip(cluster)!r}")
            continue
        firing = alert.status == "firing"
        if not firing and alert.ends_at is None:
            skipped.append(f"alerts[{i}]: resolved {kind.value} of {cluster!r} without endsAt")
            continue
        ends_at = None if firing else alert.ends_at
        late = [
            (field, moment)
            for field, moment in (("startsAt", alert.starts_at), ("endsAt", ends_at))
            if moment is not None and moment > latest
        ]
        if late:
            field, moment = late[0]
            skipped.append(
                f"alerts[{i}]: {kind.value} of {cluster!r} has {field} {format_time(moment)}, "
                f"in the future by more than {max_future_skew_s:g}s "
                "(--alerts.max-future-skew; is the clock of Prometheus or Alertmanager right?)"
            )
            continue
        if ends_at is not None and ends_at < alert.starts_at:
            skipped.append(
                f"alerts[{i}]: resolved {kind.value} of {cluster!r} ends before it starts "
                f"(endsAt {format_time(ends_at)}, startsAt {format_time(alert.starts_at)})"
            )
            continue
        state = AlertState(firing=firing, starts_at=alert.starts_at, ends_at=ends_at)
        signals.append(Signal(cluster, kind, state, told(alert.annotations)))
    return Signals(signals=tuple(signals), skipped=tuple(skipped))
