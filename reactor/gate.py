"""Deployment gating: may an app be deployed to (or moved to) a cluster in this status?

docs/reactor.md, "The deployment gate": ONLINE and UNKNOWN allow it (an outage that
cannot be proven does not block anyone); OFFLINE refuses it with HTTP 409. The store asks
this inside the same transaction that writes the app, so a cascade can never slip in
between: :data:`REFUSED` is what a store checks under the cluster's lock when it decides
in one statement, :func:`check` what the service asks with the status it read.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.statemachine import Status

#: The statuses whose clusters take no deployment.
REFUSED = frozenset({Status.OFFLINE})


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a deployment is refused; the API sends it as a 409."""

    cluster: str
    status: Status

    @property
    def message(self) -> str:
        return (
            f"cluster {self.cluster!r} is {self.status.value}: deployments to it are refused "
            "until it is ONLINE or UNKNOWN"
        )


def check(cluster: str, status: Status) -> Refusal | None:
    """None when a deployment to ``cluster`` is allowed, else the :class:`Refusal`."""
    if status in REFUSED:
        return Refusal(cluster=cluster, status=status)
    return None
