"""The status contract as the dashboards draw it: colours, words for codes, firing alerts.

The statuses, their codes in ``cluster:fleetwatch_status:code`` and the alert names come
from :mod:`fleetwatch.common.contract`, so a renamed alert or a new code reaches the dashboards with
the rules and the reactor. What is decided here is only how they look: one colour per
status, the same on every panel.
"""

from __future__ import annotations

from dashboards.panels import Json, column
from fleetwatch.common.contract import STATUS_CODES, Status
from fleetwatch.common.metricnames import CLUSTER_PROBE_LAST_FAILURE_REASON

COLOR_ONLINE = "green"
COLOR_OFFLINE = "red"
COLOR_UNKNOWN = "#8e8e8e"  # grey: "we cannot tell", neither good nor bad
COLOR_FAILING = "orange"

#: Series and columns named after a status get its colour (in the order of ``Status``).
STATUS_COLORS: dict[Status, str] = {
    Status.ONLINE: COLOR_ONLINE,
    Status.OFFLINE: COLOR_OFFLINE,
    Status.UNKNOWN: COLOR_UNKNOWN,
}

#: Value mappings of ``cluster:fleetwatch_status:code``: the code back to its word, and
#: "NO DATA" when the rules have not recorded it (not loaded, or the exporter not scraped).
STATUS_MAPPINGS: list[Json] = [
    {
        "type": "value",
        "options": {
            str(code): {"text": status, "color": STATUS_COLORS[status], "index": i}
            for i, (status, code) in enumerate(
                sorted(STATUS_CODES.items(), key=lambda item: item[1])
            )
        },
    },
    {
        "type": "special",
        "options": {"match": "null", "result": {"text": "NO DATA", "color": COLOR_UNKNOWN}},
    },
]


#: The class of a last failure (``fleetwatch_cluster_probe_last_failure_reason``): a
#: refused credential is a person's task (orange), the rest an outage (red).
CLASS_MAPPINGS: list[Json] = [
    {
        "type": "value",
        "options": {
            "credentials": {"text": "credentials", "color": COLOR_FAILING, "index": 0},
            "unreachable": {"text": "unreachable", "color": COLOR_OFFLINE, "index": 1},
        },
    }
]

#: The table column of that class, coloured.
CLASS_COLUMN = column(
    "Class", ("mappings", CLASS_MAPPINGS), ("custom.cellOptions", {"type": "color-text"})
)


def last_failure(*matchers: str) -> str:
    """Each cluster's last failure reason and class: one series per cluster (of replicas
    that disagree, one), so a table shows one row per cluster."""
    selector = f"{CLUSTER_PROBE_LAST_FAILURE_REASON}{{{', '.join(matchers)}}}"
    return f"topk by (cluster) (1, max by (cluster, reason, class) ({selector}))"


def firing(alert: str, *matchers: str) -> str:
    """The ``ALERTS`` series of ``alert`` while it fires, narrowed by label ``matchers``."""
    extra = "".join(f", {m}" for m in matchers)
    return f'ALERTS{{alertname="{alert}", alertstate="firing"{extra}}}'
