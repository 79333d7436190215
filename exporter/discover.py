"""``fleetwatch discover``: the clusters the exporter would probe, and the problems, once.

The same discovery as the exporter's, without probing: the kubeconfig files and, with
``--discovery.kubernetes``, one complete list of the management cluster's Secrets (the
exporter's informer, stopped once every watch has listed), merged by discovery's rules
(``fleetwatch.discovery.merge``: files first, then Secrets by namespace and name) and filtered by
the
shard flags. Each cluster once: name, endpoint, source (a file's path, or
``secret://NAMESPACE/NAME[#KEY]``), whether it can be probed and, when not, why
(``Cluster.not_probeable``: an Argo CD ``awsAuthConfig``, an exec plugin refused, ...).

Problems are part of the answer, not errors: a broken file, a Secret that cannot be read,
and the management cluster's API failing (a namespace forbidden, no answer within
:data:`LIST_TIMEOUT_S`, credentials that cannot be loaded) are printed, and the command
exits 0. Nothing read from a kubeconfig or a Secret is printed but names, endpoints and
references: no token, password or key, and a proxy only as ``http://host:port``.

Nothing is printed raw either: a context or cluster name with a control character or a
bidi override is a problem (``fleetwatch.common.names``), and every field of both outputs (a path
holds what its file system allows) is shown with such characters escaped
(``fleetwatch.common.names.escaped``: ``\\x1b``, ``\\u202e``), so the table cannot drive the
terminal that shows it, and ``jq -r`` on the JSON cannot either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

from exporter.net import ProxyError, parse_proxy
from exporter.settings import SettingsError, resolve
from fleetwatch.common.logs import setup_logging
from fleetwatch.common.names import escaped
from fleetwatch.discovery import (
    Cluster,
    Discoverer,
    DiscoveryProblem,
    SecretClusters,
    merge,
    probeable,
)
from fleetwatch.discovery.apisource import (
    KubernetesDiscovery,
    SecretReads,
    api_problems,
    build_informer,
    from_args,
)
from fleetwatch.kube.kubeauth import KubeAuthError

#: Seconds ``discover`` waits for the first complete list of the management cluster's Secrets.
LIST_TIMEOUT_S = 20.0
#: Failures in a row after which a watch that has not listed yet is reported, not awaited.
GIVE_UP_AFTER = 3


def run_discover(args: argparse.Namespace) -> int:
    setup_logging(args.log_level, args.log_format)
    try:
        settings = resolve(
            kubeconfig=args.kubeconfig,
            kubeconfig_dir=args.kubeconfig_dir,
            shard_count=args.shard_count,
            shard_index=args.shard_index,
            shard_index_from_hostname=args.shard_index_from_hostname,
            kubernetes=from_args(args),
        )
    except (SettingsError, ValueError) as exc:
        print(f"fleetwatch discover: {exc}", file=sys.stderr)
        return 2
    # Files unsharded (fleet_size counts the whole fleet); the merge applies the shard.
    files = Discoverer(settings.kubeconfig_path, settings.kubeconfig_dir).scan()
    secrets: list[SecretClusters] = []
    problems_api: list[DiscoveryProblem] = []
    if settings.kubernetes is not None:
        objects, problems_api = asyncio.run(list_secrets(settings.kubernetes, LIST_TIMEOUT_S))
        secrets = SecretReads(settings.kubernetes).read(objects)
    merged = merge(files, secrets, shard=settings.shard)
    found = merged.discovery
    clusters = [_shown(c, merged.held) for c in found.clusters]
    problems = [*found.problems, *problems_api]
    problem_docs = [
        {
            "source": escaped(p.source),
            "context": None if p.context is None else escaped(p.context),
            "reason": escaped(p.reason),
        }
        for p in problems
    ]
    if args.output == "json":
        answer: dict[str, Any] = {"clusters": clusters, "problems": problem_docs}
        if settings.shard is not None:
            index, count = settings.shard.index, settings.shard.count
            answer["shard"] = {"index": index, "count": count, "fleet_size": found.fleet_size}
        json.dump(answer, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _print_table(clusters)
    shard = f" in {settings.shard} ({found.fleet_size} in the fleet)" if settings.shard else ""
    print(f"\n{len(clusters)} cluster(s){shard}, {len(problems)} problem(s)")
    for c in clusters:
        if c["not_probeable"]:
            print(f"  not probeable: {c['name']} ({c['source']}): {c['not_probeable']}")
    for p in problems:
        print(f"  problem: {p}")
    if not clusters and not problems:
        print(f"  hint: {_nothing_found(settings.kubeconfig_path, settings.kubeconfig_dir)}")
    return 0


def _nothing_found(main: object, folder: object) -> str:
    """What a newcomer needs when nothing was found: what was looked at, and the flags."""
    looked = f"main kubeconfig {main}" if main is not None else "no main kubeconfig"
    looked += f", folder {folder}" if folder is not None else ", no kubeconfig folder"
    return (
        f"nothing found ({looked}, no management cluster); name kubeconfigs with "
        "--kubeconfig or KUBECONFIG_PATH, a folder of them with --kubeconfig.dir or "
        "KUBECONFIG_DIR, or read Secrets with --discovery.kubernetes"
    )


async def list_secrets(
    settings: KubernetesDiscovery,
    timeout: float,  # noqa: ASYNC109 (how long to wait for a first list, not a call's timeout)
) -> tuple[Mapping[str, Mapping[str, Any]], list[DiscoveryProblem]]:
    """The Secrets of one complete list (by uid), and the API's problems, if any.

    The informer runs until every watch has listed, or each one that has not has failed
    :data:`GIVE_UP_AFTER` times in a row, or ``timeout``: the watches that listed count,
    the others are problems.
    """
    try:
        api, informer = build_informer(settings)
    except KubeAuthError as exc:
        return {}, [DiscoveryProblem("--discovery.kubernetes", None, str(exc))]
    async with api, informer:
        listed = await informer.wait_synced(timeout, give_up_after=GIVE_UP_AFTER)
        problems = api_problems(informer.problems(), api.credentials.server)
        if not listed and not problems:
            waiting = [str(r.spec) for r in informer.reflectors if not r.synced]
            problems = api_problems(
                (f"{spec}: no complete list within {timeout:g}s" for spec in waiting),
                api.credentials.server,
            )
        return informer.objects(), problems


def _shown(cluster: Cluster, held: frozenset[str]) -> dict[str, Any]:
    """One cluster as ``discover`` prints it: no credential in any field, nothing raw.

    Discovery refused every name and server with a character no name may hold; a path
    (the source) may still have one, and the escape costs nothing when there is none.
    """
    reason = cluster.not_probeable
    ok = reason is None and probeable(cluster.kubeconfig_secret_ref, held)
    if not ok and reason is None:
        reason = "its kubeconfig file cannot be read"
    proxy = _proxy_shown(cluster.proxy_url)
    return {
        "name": escaped(cluster.name),
        "endpoint": escaped(cluster.endpoint),
        "source": escaped(cluster.kubeconfig_secret_ref),
        "probeable": ok,
        "not_probeable": None if reason is None else escaped(reason),
        "proxy": None if proxy is None else escaped(proxy),
    }


def _proxy_shown(url: str | None) -> str | None:
    """The kubeconfig's ``proxy-url`` as ``http://host:port``: never its credentials."""
    if not url:
        return None
    try:
        return parse_proxy(url).label
    except ProxyError as exc:
        return f"unusable ({exc})"


def _print_table(clusters: list[dict[str, Any]]) -> None:
    # The PROXY column only when some cluster names one: most fleets have none.
    with_proxy = any(c["proxy"] for c in clusters)
    rows = [("NAME", "ENDPOINT", "PROBEABLE", *(("PROXY",) if with_proxy else ()), "SOURCE")]
    for c in clusters:
        proxy = (c["proxy"] or "-",) if with_proxy else ()
        rows.append(
            (c["name"], c["endpoint"], "yes" if c["probeable"] else "no", *proxy, c["source"])
        )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [str(v).ljust(w) for v, w in zip(row[:-1], widths, strict=True)]
        print("  ".join([*cells, str(row[-1])]))
