"""``fleetwatch status`` and ``fleetwatch cluster delete|reset``: a running reactor's clients.

They talk to a reactor over HTTP (its API, with the bearer token when one is given) and
never open its database: an operator runs them from any machine that reaches the API. The
server command itself (``fleetwatch reactor``) is ``reactor.cli``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fleetwatch.common.flags import add_old_spelling
from reactor.api.auth import TokenFileError, read_token
from reactor.context import DEFAULT_LISTEN_ADDRESS

DEFAULT_REACTOR_URL = f"http://{DEFAULT_LISTEN_ADDRESS}"


def add_parsers(subparsers: Any) -> None:
    """``fleetwatch status`` and ``fleetwatch cluster``."""

    s: argparse.ArgumentParser = subparsers.add_parser(
        "status",
        help="print the reactor's clusters and apps as a table",
        description=(
            "Ask a running reactor (GET /clusters and GET /apps; no token needed) for its "
            "clusters (status, since when, source, open outage, last failure reason, and a line "
            "for each whose OFFLINE the storm guard or a silence holds back) and apps (cluster, "
            "status, paused: outage:ID when fleetwatch paused its Flux or Argo CD object for "
            "that outage, person when someone else did, - otherwise; source: api, flux or "
            "argocd; reason) as two tables. Exits 1 when the reactor "
            "cannot be read. A reactor whose --web.config.file requires basic auth accepts "
            "its bearer token instead: it is sent when one is given; $SSL_CERT_FILE names a "
            "private CA for https."
        ),
    )
    add_client_flags(
        s,
        token_default="(default: $FLEETWATCH_TOKEN; none: no Authorization header)",
        timeout_s=10.0,
        per="per request",
    )
    s.set_defaults(func=run_status)
    add_cluster_parsers(subparsers)


def add_cluster_parsers(subparsers: Any) -> None:
    """``fleetwatch cluster delete|reset NAME``: the operator's repair path."""
    c: argparse.ArgumentParser = subparsers.add_parser(
        "cluster",
        help="delete a cluster from a running reactor, or clear its alert state",
        description=(
            "Repair what no alert can: 'delete' forgets a decommissioned cluster "
            "(DELETE /clusters/NAME; refused while apps are on it unless --force, which "
            "deletes them too); 'reset' clears its alert state (DELETE /clusters/NAME/alerts: "
            "it reads UNKNOWN, an open outage is closed and its apps restored). "
            "Exits 1 when the reactor refuses or cannot be reached."
        ),
    )
    actions = c.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, summary in (
        ("delete", "forget a decommissioned cluster (its apps too only with --force)"),
        ("reset", "clear the cluster's alert state: UNKNOWN, open outage closed, apps restored"),
    ):
        a: argparse.ArgumentParser = actions.add_parser(action, help=summary, description=summary)
        a.add_argument("name", metavar="NAME", help="the cluster's name")
        if action == "delete":
            a.add_argument(
                "--force",
                action="store_true",
                help="delete the apps on the cluster with it (without: 409 while apps are on it)",
            )
        add_client_flags(a, token_default="(default: $FLEETWATCH_TOKEN)", timeout_s=30.0)
        a.set_defaults(func=run_cluster)


def add_client_flags(
    parser: argparse.ArgumentParser,
    *,
    token_default: str,
    timeout_s: float,
    per: str = "for the request",
) -> None:
    """How a command reaches a running reactor: ``--reactor``, ``--web.token-file`` (spelled
    as the reactor's own flag, its old spelling ``--token-file`` a hidden alias: one name
    for the token file on both sides) and ``--timeout``."""
    parser.add_argument(
        "--reactor",
        metavar="URL",
        default=DEFAULT_REACTOR_URL,
        help=f"base URL of the reactor (default: {DEFAULT_REACTOR_URL})",
    )
    parser.add_argument(
        "--web.token-file",
        dest="token_file",
        metavar="FILE",
        type=Path,
        help=f"file holding the reactor's bearer token {token_default}",
    )
    add_old_spelling(parser, "--token-file", "--web.token-file")
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=timeout_s,
        help=f"seconds {per} (default: {timeout_s:g})",
    )


# -- fleetwatch status ----------------------------------------------------------------


def get_json(url: str, timeout: float, token: str | None = None) -> Any:
    """GET ``url``'s JSON; raises ``urllib.error.HTTPError`` for an error status."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
        return json.load(r)


def error_message(exc: urllib.error.HTTPError) -> str:
    """The reactor's own words for an error answer (its JSON ``error``), else the HTTP
    reason: "database unavailable, retry" says more at 3 a.m. than "Service Unavailable"."""
    try:
        message = json.load(exc)["error"]
    except (ValueError, KeyError, TypeError, OSError):
        return str(exc.reason)
    return str(message) if message else str(exc.reason)


def client_token(token_file: Path | None) -> str | None:
    """The token a client command sends: ``--web.token-file``, else $FLEETWATCH_TOKEN, else none.

    Raises :class:`TokenFileError` when the file gives no token.
    """
    if token_file is not None:
        return read_token(token_file)
    return os.environ.get("FLEETWATCH_TOKEN", "").strip() or None


def run_status(args: argparse.Namespace) -> int:
    base = args.reactor.rstrip("/")
    try:
        token = client_token(args.token_file)
    except TokenFileError as exc:
        print(f"fleetwatch status: --web.token-file {exc}", file=sys.stderr)
        return 2
    try:
        clusters = get_json(f"{base}/clusters", args.timeout, token)
        apps = get_json(f"{base}/apps", args.timeout, token)
    except urllib.error.HTTPError as exc:
        print(
            f"fleetwatch status: {base} answered {exc.code}: {error_message(exc)}",
            file=sys.stderr,
        )
        return 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"fleetwatch status: cannot read {base}: {reason}", file=sys.stderr)
        return 1
    print(render_status(clusters, apps, datetime.now(UTC)))
    return 0


# -- fleetwatch cluster ---------------------------------------------------------------


def run_cluster(args: argparse.Namespace) -> int:
    """DELETE /clusters/NAME (``delete``) or /clusters/NAME/alerts (``reset``); say what changed."""
    command = f"fleetwatch cluster {args.action}"
    try:
        token = client_token(args.token_file)
    except TokenFileError as exc:
        print(f"{command}: --web.token-file {exc}", file=sys.stderr)
        return 2
    path = f"/clusters/{quote(args.name, safe='')}"
    if args.action == "reset":
        path += "/alerts"
    elif args.force:
        path += "?force=true"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        args.reactor.rstrip("/") + path, method="DELETE", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as resp:
            answer = json.load(resp)
    except urllib.error.HTTPError as exc:
        print(f"{command}: refused ({exc.code}): {error_message(exc)}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"{command}: cannot reach {args.reactor}: {reason}", file=sys.stderr)
        return 1
    if args.action == "delete":
        print(f"cluster {args.name} deleted, with {answer['apps_deleted']} app(s)")
    else:
        print(
            f"cluster {args.name}: alert state cleared, now {answer['cluster']['status']}; "
            f"{answer['outages_closed']} outage(s) closed, "
            f"{answer['apps_restored']} app(s) restored"
        )
    return 0


def render_status(clusters: list[dict[str, Any]], apps: list[dict[str, Any]], now: datetime) -> str:
    """Two plain-text tables: clusters (status, since, open outage, last failure reason)
    and apps (status, source: ``api``, or ``flux``/``argocd`` for the objects those tools
    deploy, reason), and below the clusters a line for each one whose OFFLINE the storm
    guard or a silence holds back.

        The OUTAGE column is there for the reader at 3 a.m.: a cluster can read ONLINE while
        its outage is still open (the ONLINE that closes it has not been delivered yet), and
        that is why its apps are still DEGRADED. REASON is the last failed probe's reason
        and its class (``credentials``: the API server refused fleetwatch's credential).

        The PAUSED column says who paused a Flux or Argo CD object (:func:`paused_cell`): an
        app whose object a person suspended reads DEPLOYED in the store (nothing of its
        deployment failed), and without the column it would look as if it were delivering.
    """
    cluster_rows = [
        [
            c["name"],
            c["status"] + ("*" if c.get("note") else ""),
            _since(c.get("status_since"), now),
            c.get("source") or "",
            _since(c.get("outage_since"), now),
            reason_text(c),
        ]
        for c in clusters
    ]
    held = [f"* {c['name']}: {c['note']}" for c in clusters if c.get("note")]
    app_rows = [
        [
            a["name"],
            a["cluster"],
            a["status"],
            paused_cell(a.get("paused")),
            a.get("source") or "",
            a.get("reason") or "",
        ]
        for a in apps
    ]
    parts = [
        _table(
            ["CLUSTER", "STATUS", "SINCE", "SOURCE", "OUTAGE", "REASON"],
            cluster_rows,
            "no clusters",
        ),
        *held,
        "",
        _table(["APP", "CLUSTER", "STATUS", "PAUSED", "SOURCE", "REASON"], app_rows, "no apps"),
    ]
    return "\n".join(parts)


def reason_text(cluster: dict[str, Any]) -> str:
    """``timeout (unreachable)``, ``-`` when no failure is told: one definition for
    ``status``, ``gate`` and ``explain``."""
    reason = cluster.get("reason")
    if not reason:
        return "-"
    kind = cluster.get("reason_class")
    return f"{reason} ({kind})" if kind else str(reason)


def paused_by(paused: Any) -> str | None:
    """``outage``, ``person`` or None, from an app's ``paused`` (``GET /apps``): one reading
    for ``status`` and ``explain``."""
    by = paused.get("by") if isinstance(paused, dict) else None
    return by if by in ("outage", "person") else None


def paused_cell(paused: Any) -> str:
    """``outage:ID`` (fleetwatch paused it for that outage and resumes it when the outage
    closes), ``person`` (paused without fleetwatch's mark: it stays paused until someone
    resumes it), ``-`` (running, or an app of the API). One word, for ``awk``."""
    by = paused_by(paused)
    if by == "outage":
        return f"outage:{paused.get('outage', '?')}"
    return by or "-"


def _since(value: str | None, now: datetime) -> str:
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    seconds = int((now - moment).total_seconds())
    stamp = moment.strftime("%Y-%m-%d %H:%M:%SZ")
    if seconds < 0:
        return stamp
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{stamp} ({seconds // size}{unit} ago)"
    return f"{stamp} ({seconds}s ago)"


def _table(header: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f"({empty})"
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines)
