"""``fleetwatch explain CLUSTER``: why a cluster has its status, and what happens next.

It asks three sources, each optional and each read-only, and says which one it could not
reach; a partial answer still explains what it can:

- the reactor (``GET /clusters/{name}``): the status and since when, the last failure
  reason it was told, what holds an OFFLINE back, the open outage, the apps and the Flux
  and Argo CD objects on the cluster (``paused``: by an outage, or by a person);
- Prometheus: the exporter's series of the cluster by ``instance`` (one vantage point
  each: last probe success, consecutive failures, refusals among them, last failure
  reason and class, last success), one instant query; and the failure threshold, read
  from the loaded rules (``/api/v1/rules``): the ``>= bool N`` of the per-replica status
  record (``cluster_instance:...``, where ``fleetwatch rules`` writes N), whether that
  record takes refused credentials off the count, and the storm guard's share from
  ``FleetProbeStorm``'s expression;
- Alertmanager (API v2 ``/api/v2/alerts?filter=cluster="X"``): the alerts firing,
  inhibited (by the storm guard: named when ``FleetProbeStorm`` is among the inhibitors)
  or silenced for it.

Then :func:`fleetwatch.cli.explain_next.what_next` turns the facts into sentences. Exit 0 when
the cluster was explained, 1 when no source that answered knows it, 2 when no source
could be asked. A URL's credentials are never printed: a source is named by host:port.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetwatch.cli.explain_next import Facts, what_next
from fleetwatch.cli.status import (
    DEFAULT_REACTOR_URL,
    add_client_flags,
    client_token,
    error_message,
    paused_by,
    reason_text,
)
from fleetwatch.common import contract, metricnames
from reactor.api.auth import TokenFileError

#: Exit codes. PARTIAL: explained from the sources that answered, but one asked was not
#: reached: a script (or a person reading ``$?``) must not take a half answer for a whole.
EXPLAINED, UNKNOWN_CLUSTER, NOTHING_ASKED, PARTIAL = 0, 1, 2, 3

#: The series read per vantage point, and their short names in the answer.
SERIES = {
    metricnames.CLUSTER_PROBE_SUCCESS: "success",
    metricnames.CLUSTER_PROBE_CONSECUTIVE_FAILURES: "consecutive_failures",
    metricnames.CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES: "credential_failures",
    metricnames.CLUSTER_PROBE_LAST_SUCCESS: "last_success",
    metricnames.CLUSTER_PROBE_LAST_FAILURE_REASON: "last_failure",
    metricnames.CLUSTER_INFO: "info",
}


def add_parsers(subparsers: Any) -> None:
    """``fleetwatch explain CLUSTER``."""
    e: argparse.ArgumentParser = subparsers.add_parser(
        "explain",
        help="why CLUSTER has its status, and what happens next",
        description=(
            "Ask the reactor, Prometheus and Alertmanager (each optional) about CLUSTER: its "
            "status and since when, each vantage point's last probes and reason, the failure "
            "threshold, the alerts firing, inhibited or silenced for it, the open outage, the "
            "apps and CD objects paused, and what happens next. Exits 0 when explained, 1 when "
            "no source knows the cluster, 2 when no source could be asked, 3 when explained "
            "from the sources that answered while one asked was not reached."
        ),
    )
    e.add_argument("cluster", metavar="CLUSTER", help="the cluster's name")
    add_client_flags(e, token_default="(default: $FLEETWATCH_TOKEN)", timeout_s=10.0)
    e.set_defaults(reactor=None)
    e.add_argument("--prometheus", metavar="URL", help="base URL of Prometheus (optional)")
    e.add_argument("--alertmanager", metavar="URL", help="base URL of Alertmanager (optional)")
    e.add_argument("--output", choices=("text", "json"), default="text", help="(default: text)")
    e.set_defaults(func=run_explain)


def where(url: str) -> str:
    """``host:port`` of a URL: how a source is named (never its credentials)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    return f"{host}:{parts.port}" if parts.port else host


def _ask(url: str, timeout: float, token: str | None = None) -> Any:
    """GET JSON; :class:`SourceError` with a line safe to print. Credentials in the URL
    (``http://user:password@host``) are sent as basic auth, never printed."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if parts.username is not None:
        pair = (
            f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        )
        headers = {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode("ascii")}
        netloc = parts.netloc.rpartition("@")[2]
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:
        raise SourceError(f"answered {exc.code}: {error_message(exc)}", exc.code) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SourceError(f"cannot be reached: {reason}") from None


class SourceError(Exception):
    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Gathered:
    """Everything the sources said; ``problems``: one line per source not reached."""

    cluster: str
    asked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    reactor: dict[str, Any] | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    threshold: int | None = None
    count_rejected: bool | None = None
    storm_fraction: float | None = None
    rules_note: str | None = None
    alerts: list[dict[str, Any]] = field(default_factory=list)
    known_by: list[str] = field(default_factory=list)


def gather(
    cluster: str,
    *,
    reactor: str | None,
    prometheus: str | None,
    alertmanager: str | None,
    timeout: float,
    token: str | None = None,
) -> Gathered:
    """Ask each source given; a source down is a line in ``problems``, never an error."""
    g = Gathered(cluster)
    if reactor:
        g.asked.append("reactor")
        base = reactor.rstrip("/")
        try:
            g.reactor = _ask(
                f"{base}/clusters/{urllib.parse.quote(cluster, safe='')}", timeout, token
            )
            g.known_by.append("reactor")
        except SourceError as exc:
            if exc.code != 404:
                g.problems.append(f"reactor {where(base)} {exc}")
    if prometheus:
        g.asked.append("prometheus")
        try:
            _prometheus(g, prometheus.rstrip("/"), timeout)
        except SourceError as exc:
            g.problems.append(f"Prometheus {where(prometheus)} {exc}")
    if alertmanager:
        g.asked.append("alertmanager")
        try:
            _alertmanager(g, alertmanager.rstrip("/"), timeout)
        except SourceError as exc:
            g.problems.append(f"Alertmanager {where(alertmanager)} {exc}")
    return g


def _prometheus(g: Gathered, base: str, timeout: float) -> None:
    names = "|".join(re.escape(name) for name in SERIES)
    selector = f'{{__name__=~"{names}",cluster="{_escape(g.cluster)}"}}'
    answer = _ask(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": selector}), timeout)
    by_instance: dict[str, dict[str, Any]] = {}
    for series in answer.get("data", {}).get("result", []):
        labels, value = series.get("metric", {}), float(series.get("value", [0, "nan"])[1])
        short = SERIES.get(labels.get("__name__", ""))
        if short is None or short == "info":
            if short == "info" and "prometheus" not in g.known_by:
                g.known_by.append("prometheus")
            continue
        probe = by_instance.setdefault(
            labels.get("instance", "?"), {"instance": labels.get("instance", "?")}
        )
        if short == "last_failure":
            probe["reason"], probe["reason_class"] = labels.get("reason"), labels.get("class")
        elif short == "last_success":
            probe[short] = _moment(value) if value > 0 else None
        else:
            probe[short] = int(value)
    g.probes = sorted(by_instance.values(), key=lambda p: str(p["instance"]))
    if g.probes and "prometheus" not in g.known_by:
        g.known_by.append("prometheus")
    try:
        rules = _ask(f"{base}/api/v1/rules", timeout)
    except SourceError as exc:  # the probes are still worth showing
        g.rules_note = f"the rules could not be read ({exc})"
        return
    for group in rules.get("data", {}).get("groups", []):
        for rule in group.get("rules", []):
            query = str(rule.get("query", ""))
            if rule.get("name") == contract.REPLICA_STATUS_RECORD:
                found = re.search(r">=\s*bool\s+(\d+)", query)
                g.threshold = int(found.group(1)) if found else None
                creds = metricnames.CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES
                g.count_rejected = creds not in query
            elif rule.get("name") == contract.STORM_ALERT:
                found = re.search(r">=\s*([0-9.]+)", query)
                g.storm_fraction = float(found.group(1)) if found else None
    if g.threshold is None and g.rules_note is None:
        g.rules_note = "the failure threshold is not in Prometheus's loaded rules"


def _alertmanager(g: Gathered, base: str, timeout: float) -> None:
    query = {"filter": f'cluster="{_escape(g.cluster)}"', "active": "true"}
    query |= {"silenced": "true", "inhibited": "true"}
    listed = _ask(f"{base}/api/v2/alerts?" + urllib.parse.urlencode(query), timeout)
    storm = _ask(
        f"{base}/api/v2/alerts?"
        + urllib.parse.urlencode({"filter": f'alertname="{contract.STORM_ALERT}"'}),
        timeout,
    )
    storm_prints = {a.get("fingerprint") for a in storm if isinstance(a, dict)}
    for raw in listed if isinstance(listed, list) else []:
        status = raw.get("status") or {}
        inhibitors = status.get("inhibitedBy") or []
        state = "firing" if status.get("state") == "active" else "suppressed"
        if inhibitors:
            state = "inhibited by " + (
                f"the storm guard ({contract.STORM_ALERT})"
                if storm_prints & set(inhibitors)
                else f"{len(inhibitors)} alert(s)"
            )
        elif status.get("silencedBy"):
            state = "silenced"
        g.alerts.append(
            {
                "alertname": raw.get("labels", {}).get("alertname"),
                "state": state,
                "since": raw.get("startsAt"),
                "storm_guard": bool(storm_prints & set(inhibitors)),
            }
        )
    if g.alerts and "alertmanager" not in g.known_by:
        g.known_by.append("alertmanager")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _moment(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def facts(g: Gathered) -> Facts:
    """The facts :func:`what_next` reads, from what was gathered."""
    r = g.reactor or {}
    apps = r.get("apps") or []
    api = [a for a in apps if a.get("source") == "api"]
    pauses = [paused_by(a.get("paused")) for a in apps if a.get("source") != "api"]
    counted = [
        p.get("consecutive_failures", 0)
        - (0 if g.count_rejected is not False else p.get("credential_failures", 0))
        for p in g.probes
        if "consecutive_failures" in p
    ]
    classes = {p.get("reason_class") for p in g.probes if p.get("reason_class")}
    reason_class = classes.pop() if len(classes) == 1 else r.get("reason_class")
    held = r.get("offline_held_by")
    if any(a["storm_guard"] for a in g.alerts):  # its Offline, or the grace warning before it
        held = "storm_guard"
    return Facts(
        known=bool(g.known_by),
        status=r.get("status"),
        threshold=g.threshold,
        failures=min(counted) if counted else None,
        reason_class=reason_class,
        count_rejected=g.count_rejected,
        held=held,
        storm_fraction=g.storm_fraction,
        outage_open=bool(r.get("outage_since")),
        apps_deployed=sum(1 for a in api if a.get("status") == "DEPLOYED"),
        apps_degraded_by_outage=sum(1 for a in api if a.get("reason") == "cluster_offline"),
        objects_active=sum(1 for by in pauses if by is None),
        objects_paused_by_outage=pauses.count("outage"),
        objects_paused_by_person=pauses.count("person"),
    )


def run_explain(args: argparse.Namespace) -> int:
    try:
        token = client_token(args.token_file)
    except TokenFileError as exc:
        print(f"fleetwatch explain: --web.token-file {exc}", file=sys.stderr)
        return NOTHING_ASKED
    if not (args.reactor or args.prometheus or args.alertmanager):
        args.reactor = DEFAULT_REACTOR_URL  # asked alone, as status and gate do
    g = gather(
        args.cluster,
        reactor=args.reactor,
        prometheus=args.prometheus,
        alertmanager=args.alertmanager,
        timeout=args.timeout,
        token=token,
    )
    for line in g.problems:
        print(f"fleetwatch explain: {line}", file=sys.stderr)
    if len(g.problems) == len(g.asked):
        print("fleetwatch explain: no source could be asked", file=sys.stderr)
        return NOTHING_ASKED
    if not g.known_by:
        print(f"fleetwatch explain: no source knows a cluster {args.cluster!r}", file=sys.stderr)
        return UNKNOWN_CLUSTER
    next_steps = what_next(facts(g))
    if args.output == "json":
        print(json.dumps({**asdict(g), "next": next_steps}, sort_keys=True, indent=2))
    else:
        print(render(g, next_steps))
    return PARTIAL if g.problems else EXPLAINED


def render(g: Gathered, next_steps: list[str]) -> str:
    """The text answer: one section per question, a line each."""
    r = g.reactor
    out = [f"cluster {g.cluster}"]
    if r is not None:
        out.append(f"  status: {r['status']} since {r.get('status_since') or '-'} (the reactor)")
        out.append(f"  last failure reason: {reason_text(r)}")
        if r.get("note"):
            out.append(f"  held back: {r['note']}")
    else:
        out.append("  status: the reactor was not asked or does not know it")
    out.append("probes (by vantage point):")
    for p in g.probes or [{"instance": "(none)"}]:
        out.append(
            f"  {p['instance']}: success={p.get('success', '-')} "
            f"consecutive_failures={p.get('consecutive_failures', '-')} "
            f"reason={reason_text(p)} last_success={p.get('last_success') or '-'}"
        )
    if g.threshold is not None:
        counted = "counted" if g.count_rejected else "not counted"
        out.append(
            f"threshold: OFFLINE at {g.threshold} failures in a row (from the loaded rules; "
            f"refused credentials {counted})"
        )
    elif g.rules_note:
        out.append(f"threshold: {g.rules_note}")
    out.append("alerts:")
    out += [f"  {a['alertname']}: {a['state']} since {a['since']}" for a in g.alerts] or [
        "  (none)"
    ]
    if r is not None:
        out.append(
            f"outage: {'open since ' + r['outage_since'] if r.get('outage_since') else 'none open'}"
        )
        for a in r.get("apps") or []:
            by = paused_by(a.get("paused"))
            paused = f" paused by {by}" if by else ""
            out.append(f"  app {a['name']} ({a.get('source')}): {a['status']}{paused}")
    if g.problems:
        out.append("not reached: " + "; ".join(g.problems))
    out.append("next:")
    out += [f"  {line}" for line in next_steps]
    return "\n".join(out)
