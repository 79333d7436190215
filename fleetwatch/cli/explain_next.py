"""``fleetwatch explain``'s last part: what will happen next to a cluster, in sentences.

Pure: :func:`what_next` reads the facts ``fleetwatch.cli.explain`` gathered from the reactor,
Prometheus and Alertmanager (:class:`Facts`) and says what comes next. The table is the
specification; the rows are tried in order, the first that matches speaks (and the
credentials row adds its sentence before the others when refusals are not counted):

=====================================================  ========================================
facts                                                  next
=====================================================  ========================================
no source knows it                                     nothing: fleetwatch does not know it
last failure class ``credentials``, refusals not       "refused credentials are not counted:
counted (``--no-failure.count-rejected``)              stays UNKNOWN; nothing is paused..."
FleetClusterOffline inhibited (storm guard)            "the storm guard holds it back: no
                                                       cascade until fewer than X% fail"
FleetClusterOffline silenced                           "silenced: no cascade while it lasts"
OFFLINE, an outage open                                "OFFLINE until one probe succeeds: then
                                                       N app(s) restored, M object(s) resumed;
                                                       K paused by a person stay paused"
OFFLINE, no outage (never seen ONLINE)                 "no cascade (never seen ONLINE);
                                                       deployments refused"
failing below the threshold                            "K more failed probe(s) -> OFFLINE: N
                                                       app(s) DEGRADED, M object(s) paused"
ONLINE, no failure                                     "nothing pending: one failure starts
                                                       the count toward OFFLINE (at N)"
anything else (UNKNOWN, no probe data)                 "UNKNOWN: nothing is paused; deployments
                                                       allowed"
=====================================================  ========================================

"Objects" are the Flux and Argo CD objects the reactor mirrors for the cluster; those a
person paused are never paused or resumed by fleetwatch (``reactor.cd.rules``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Facts:
    """What the sources said about one cluster; None: that source did not say."""

    known: bool  #: some source knows the cluster
    status: str | None  #: the reactor's status (ONLINE, OFFLINE, UNKNOWN)
    threshold: int | None  #: failures in a row that make it OFFLINE (from the rules)
    #: counted consecutive failures: the fewest among the vantage points (the rules' min)
    failures: int | None
    reason_class: str | None  #: the last failure's class ("unreachable", "credentials")
    count_rejected: bool | None  #: refused credentials count toward OFFLINE (the rules)
    held: str | None  #: "storm_guard" or "silence": what holds FleetClusterOffline back
    storm_fraction: float | None  #: the storm guard's threshold share, from the rules
    outage_open: bool
    apps_deployed: int  #: apps of the API DEPLOYED there (degraded by an outage)
    apps_degraded_by_outage: int  #: apps the open outage degraded (restored at its end)
    objects_active: int  #: CD objects not paused (paused by an outage)
    objects_paused_by_outage: int  #: resumed when the outage closes
    objects_paused_by_person: int  #: never touched by fleetwatch


def _n(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def what_next(f: Facts) -> list[str]:
    """Sentences, most important first (the module docstring's table)."""
    if not f.known:
        return ["nothing: no source knows this cluster"]
    said: list[str] = []
    if f.reason_class == "credentials" and f.count_rejected is False:
        said.append(
            "refused credentials are not counted (--no-failure.count-rejected): it stays "
            "UNKNOWN, nothing is paused and deployments are allowed until the credential "
            "is fixed or other failures make it OFFLINE"
        )
    if f.held == "storm_guard":
        share = f"{f.storm_fraction:.0%}" if f.storm_fraction is not None else "the storm share"
        said.append(
            "the storm guard holds it back: no cascade (nothing paused, deployments allowed) "
            f"until fewer than {share} of the fleet fail; then, if it is still down, it turns "
            "OFFLINE and cascades"
        )
        return said
    if f.held == "silence":
        said.append("FleetClusterOffline is silenced: no cascade while the silence lasts")
        return said
    if f.status == "OFFLINE":
        if f.outage_open:
            line = (
                "stays OFFLINE (deployments refused) until one probe succeeds: then "
                f"{_n(f.apps_degraded_by_outage, 'app')} restored, "
                f"{_n(f.objects_paused_by_outage, 'object')} resumed"
            )
            if f.objects_paused_by_person:
                line += (
                    f"; {_n(f.objects_paused_by_person, 'object')} paused by a person stay paused"
                )
            said.append(line)
        else:
            said.append(
                "OFFLINE but never seen ONLINE: no cascade, deployments refused until a "
                "probe succeeds"
            )
        return said
    if said:
        return said
    if f.failures and f.threshold is not None and f.failures < f.threshold:
        left = f.threshold - f.failures
        said.append(
            f"{_n(left, 'more failed probe')} -> OFFLINE: {_n(f.apps_deployed, 'app')} "
            f"DEGRADED, {_n(f.objects_active, 'CD object')} paused, deployments refused"
        )
    elif f.status == "ONLINE" and f.failures == 0:
        at = f" (at {f.threshold})" if f.threshold is not None else ""
        said.append(f"nothing pending: one failed probe starts the count toward OFFLINE{at}")
    else:
        said.append("UNKNOWN: nothing is paused and deployments are allowed")
    return said
