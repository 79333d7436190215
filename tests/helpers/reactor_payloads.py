"""Webhook payloads shaped exactly like Alertmanager 0.25's, for the reactor tests.

What Alertmanager sends is summed up in docs/development.md, "What we rely on from the
components".
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

ZERO_TIME = "0001-01-01T00:00:00Z"
ONLINE = "FleetClusterOnline"
OFFLINE = "FleetClusterOffline"
T0 = datetime(2026, 11, 30, 2, 0, 0, tzinfo=UTC)


def at(minutes: float) -> str:
    """T0 + minutes, as Alertmanager writes it (nanoseconds, Z)."""
    moment = T0 + timedelta(minutes=minutes)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}123Z"


def alert(
    name: str,
    cluster: str | None,
    starts: float,
    ends: float | None = None,
    **labels: str,
) -> dict[str, Any]:
    """One alert: firing when ``ends`` is None, else resolved at ``ends`` (minutes after T0)."""
    all_labels = {"alertname": name, **labels}
    if cluster is not None:
        all_labels["cluster"] = cluster
    if name == ONLINE:
        all_labels.setdefault("severity", "none")
    elif name == OFFLINE:
        all_labels.setdefault("severity", "critical")
    fingerprint = hashlib.sha256(json.dumps(all_labels, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "status": "firing" if ends is None else "resolved",
        "labels": all_labels,
        "annotations": {"summary": f"{name} for {cluster}"},
        "startsAt": at(starts),
        "endsAt": ZERO_TIME if ends is None else at(ends),
        "generatorURL": "http://127.0.0.1:9090/graph?g0.expr=fleetwatch",
        "fingerprint": fingerprint,
    }


def webhook(*alerts: dict[str, Any], receiver: str = "fleetwatch-reactor") -> dict[str, Any]:
    """A v4 notification of one group carrying ``alerts``."""
    names = {a["labels"].get("alertname") for a in alerts}
    group_labels = {"alertname": names.pop()} if len(names) == 1 else {}
    common = dict(alerts[0]["labels"]) if alerts else {}
    for a in alerts[1:]:
        common = {k: v for k, v in common.items() if a["labels"].get(k) == v}
    firing = any(a["status"] == "firing" for a in alerts)
    return {
        "receiver": receiver,
        "status": "firing" if firing else "resolved",
        "alerts": list(alerts),
        "groupLabels": group_labels,
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "version": "4",
        "groupKey": '{}/{severity="critical"}:{alertname="'
        + "".join(sorted(map(str, names)))
        + '"}',
        "truncatedAlerts": 0,
    }
