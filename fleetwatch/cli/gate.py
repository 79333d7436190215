"""``fleetwatch gate CLUSTER``: may a pipeline deploy to this cluster now?

A CI job's step before its deploy, for teams whose deployments are not ``POST
/deployments`` (a ``kubectl apply``, a Helm upgrade, a push that Flux or Argo CD picks up).
It asks a running reactor for the cluster (``GET /clusters/{name}``) and applies the rule
``POST /deployments`` applies (``reactor.gate.check``: one definition of "refused"):

- exit 0: allowed (ONLINE, or UNKNOWN: an outage that cannot be proven blocks nothing);
- exit 1: refused, with the status, since when and the open outage on stderr (OFFLINE),
  or a cluster the reactor does not know (``POST /deployments`` would answer 404 too);
- exit 2: the gate could not ask (reactor unreachable, a 401/503, a bad token file). The
  pipeline decides whether that blocks: ``fleetwatch gate prod-eu || [ $? -eq 2 ]`` fails
  open, the bare command fails closed.

The answer is printed on stdout as one line (``prod-eu ONLINE: deployments allowed``) for
the job's log; ``--output json`` prints the cluster as the API gave it, with ``allowed``.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
from typing import Any
from urllib.parse import quote

from fleetwatch.cli.status import (
    add_client_flags,
    client_token,
    error_message,
    get_json,
    reason_text,
)
from reactor.api.auth import TokenFileError
from reactor.gate import check
from reactor.statemachine import Status

ALLOWED, REFUSED, CANNOT_ASK = 0, 1, 2


def add_parsers(subparsers: Any) -> None:
    """``fleetwatch gate CLUSTER``."""
    g: argparse.ArgumentParser = subparsers.add_parser(
        "gate",
        help="exit 0 when a deployment to CLUSTER is allowed now, 1 when it is refused",
        description=(
            "For a CI step before a deploy: asks a running reactor for CLUSTER and exits 0 "
            "when a deployment there is allowed (ONLINE or UNKNOWN), 1 when it is refused "
            "(OFFLINE, or a cluster the reactor does not know), with the status and reason "
            "on stderr, and 2 when the reactor could not be asked."
        ),
    )
    g.add_argument("cluster", metavar="CLUSTER", help="the cluster's name")
    add_client_flags(g, token_default="(default: $FLEETWATCH_TOKEN)", timeout_s=10.0)
    g.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text: one line; json: the cluster with 'allowed' (default: text)",
    )
    g.set_defaults(func=run_gate)


def run_gate(args: argparse.Namespace) -> int:
    name = args.cluster
    try:
        token = client_token(args.token_file)
    except TokenFileError as exc:
        print(f"fleetwatch gate: --web.token-file {exc}", file=sys.stderr)
        return CANNOT_ASK
    url = f"{args.reactor.rstrip('/')}/clusters/{quote(name, safe='')}"
    try:
        cluster = get_json(url, args.timeout, token)
    except urllib.error.HTTPError as exc:
        message = error_message(exc)
        if exc.code == 404:
            print(f"{name}: refused: the reactor does not know it ({message})", file=sys.stderr)
            return _print(args, {"name": name, "allowed": False, "error": message}, REFUSED)
        print(f"fleetwatch gate: {url} answered {exc.code}: {message}", file=sys.stderr)
        return CANNOT_ASK
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"fleetwatch gate: cannot reach {args.reactor}: {reason}", file=sys.stderr)
        return CANNOT_ASK
    try:
        status = Status(cluster["status"])
    except (KeyError, TypeError, ValueError):
        print(f"fleetwatch gate: {url} gave no cluster status", file=sys.stderr)
        return CANNOT_ASK
    refusal = check(name, status)
    if refusal is not None:
        since = cluster.get("outage_since") or cluster.get("status_since")
        print(
            f"{name}: refused: {refusal.message}"
            + (f" (since {since})" if since else "")
            + f"; last failure reason: {reason_text(cluster)}",
            file=sys.stderr,
        )
        return _print(args, {**cluster, "allowed": False}, REFUSED)
    return _print(args, {**cluster, "allowed": True}, ALLOWED)


def _print(args: argparse.Namespace, cluster: dict[str, Any], code: int) -> int:
    if args.output == "json":
        print(json.dumps(cluster, sort_keys=True))
    elif code == ALLOWED:
        line = f"{cluster['name']} {cluster.get('status', '')}: deployments allowed"
        if cluster.get("reason"):
            line += f" (last failure reason: {reason_text(cluster)})"
        print(line + (f"; {cluster['note']}" if cluster.get("note") else ""))
    return code
