"""``fleetwatch reactor``: the webhook receiver and API, its flags and its start-up.

Every setting has a flag; flags win over the environment (``FLEETWATCH_TOKEN``,
``KUBECONFIG_PATH``, ``KUBECONFIG_DIR``). The commands that ask a running reactor over
HTTP (``fleetwatch status``, ``fleetwatch cluster``) are ``fleetwatch.cli.status``.

Longer than most modules (about 400 lines) because half of it is the fifteen flags with
their help text; the checks that turn them into :class:`ReactorSettings` sit next to them,
so a flag and the rule that refuses its bad values are read together.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fleetwatch.common import backgroundpool
from fleetwatch.common.flags import add_old_spelling
from fleetwatch.common.foreground import favour_requests
from fleetwatch.common.logs import add_log_flags, setup_logging
from fleetwatch.common.web import bind_sockets, display_address, parse_listen_addresses
from fleetwatch.common.webconfig import WEB_CONFIG_HELP, WebConfigError, load_web_config, server_tls
from fleetwatch.discovery import main_kubeconfig
from fleetwatch.discovery.apisource import add_flags as add_kubernetes_flags
from fleetwatch.discovery.apisource import from_args as kubernetes_from_args
from fleetwatch.kube.informer import BESIDE_REQUESTS
from fleetwatch.kube.kubeauth import KubeAuthError
from reactor.alertmanager.http import add_flags as add_alertmanager_http_flags
from reactor.alertmanager.http import from_args as alertmanager_http_from
from reactor.alertmanager.signals import DEFAULT_MAX_FUTURE_SKEW_S
from reactor.api.auth import TokenFileError, read_token, reload_token_on_sighup
from reactor.cd.settings import add_cd_flags, cd_settings_from
from reactor.context import (
    DEFAULT_DB_PATH,
    DEFAULT_DB_RETENTION_S,
    DEFAULT_DB_WRITERS,
    DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MAX_BODY_BYTES,
    ReactorSettings,
)
from reactor.store.database import POSTGRESQL, open_store, parse_db_url, sqlite_url

log = logging.getLogger("reactor")


REACTOR_DESCRIPTION = """\
The reactor: an Alertmanager webhook receiver (POST /alerts) that keeps each cluster's
status (ONLINE, OFFLINE, UNKNOWN), degrades the apps DEPLOYED on a cluster that goes OFFLINE
(reason cluster_offline), restores exactly those when it is ONLINE again, and answers 409
to deployments to an OFFLINE cluster. State lives in a SQLite file (a restart loses nothing)
or in PostgreSQL, which several replicas share.
Endpoints: /alerts, /clusters, /apps, /deployments, /healthz, /-/healthy, /-/ready,
/metrics, /openapi.json. With --alertmanager.url it also reads the alerts Alertmanager lists
every interval, so a lost notification costs at most one interval.
The kubeconfigs are scanned once, at start-up; a cluster first named later by an alert is
added then (source alerts, no endpoint until the next start-up scan). With
--discovery.kubernetes the clusters of the management cluster's Secrets are upserted
whenever those change (a Secret deleted leaves its cluster in the store)."""

REACTOR_ENVIRONMENT = """\
environment (flags win over it):
  FLEETWATCH_TOKEN  the bearer token itself (when --web.token-file is not given)
  KUBECONFIG_PATH   main kubeconfig (default: $KUBECONFIG's list, else ~/.kube/config)
  KUBECONFIG        kubectl's colon-separated list, when KUBECONFIG_PATH is unset
  KUBECONFIG_DIR    folder of extra kubeconfigs: every visible file, sub-folders included
  PGPASSWORD        the PostgreSQL password (when --db.password-file is not given)
"""


def add_parsers(subparsers: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p: argparse.ArgumentParser = subparsers.add_parser(
        "reactor",
        help="receive Alertmanager notifications, degrade/restore apps, gate deployments",
        description=REACTOR_DESCRIPTION,
        epilog=REACTOR_ENVIRONMENT,
        formatter_class=fmt,
    )
    p.add_argument(
        "--web.listen-address",
        dest="listen_address",
        metavar="HOST:PORT",
        action="append",
        default=None,
        help="address of the API, repeatable: one server on each; :PORT listens on every "
        f"interface (default: {DEFAULT_LISTEN_ADDRESS})",
    )
    p.add_argument(
        "--db.path",
        dest="db_path",
        metavar="FILE",
        type=Path,
        help="SQLite file of the state, created if missing: short for --db.url sqlite:///FILE "
        f"(default: ./{DEFAULT_DB_PATH})",
    )
    p.add_argument(
        "--db.url",
        dest="db_url",
        metavar="URL",
        help="database of the state: sqlite:///PATH (sqlite:////ABSOLUTE/PATH) or "
        "postgresql://USER@HOST:PORT/DB, which several replicas may share "
        f"(default: sqlite:///{DEFAULT_DB_PATH})",
    )
    p.add_argument(
        "--db.password-file",
        dest="db_password_file",
        metavar="FILE",
        type=Path,
        help="file holding the PostgreSQL password; surrounding whitespace is ignored; "
        "read again when it changes and when the database refuses a connection "
        "(default: $PGPASSWORD, else the password in --db.url, if any)",
    )
    p.add_argument(
        "--db.writers",
        dest="db_writers",
        metavar="N",
        type=int,
        default=DEFAULT_DB_WRITERS,
        help="PostgreSQL: write transactions this replica runs at once, each on its own "
        "connection, and at most as many connections for deployments, pipelined (plus one "
        f"for reads); SQLite: always 1 (default: {DEFAULT_DB_WRITERS})",
    )
    p.add_argument(
        "--db.retention",
        dest="db_retention",
        metavar="DURATION",
        type=retention_s,
        default=DEFAULT_DB_RETENTION_S,
        help="closed outages older than this are deleted (a sweep at start and every minute, "
        "in small batches); 0 keeps everything; seconds or 30s, 10m, 12h, 30d (default: 30d)",
    )
    p.add_argument(
        "--db.migrate-only",
        dest="db_migrate_only",
        action="store_true",
        help="bring the database's schema up to date, then exit (0 when done): a pipeline "
        "step before the replicas of a new release start (they migrate at start anyway)",
    )
    p.add_argument(
        "--web.token-file",
        dest="token_file",
        metavar="FILE",
        type=Path,
        help="file holding the bearer token required on POST /alerts and every mutating call; "
        "surrounding whitespace is ignored; re-read when it changes and on SIGHUP, with a "
        "warning when other users may read it (default: the token in $FLEETWATCH_TOKEN; "
        "neither: no authentication)",
    )
    p.add_argument(
        "--alerts.max-future-skew",
        dest="max_future_skew",
        metavar="DURATION",
        type=duration_s,
        default=DEFAULT_MAX_FUTURE_SKEW_S,
        help="a status alert that starts (or ends) later than the reactor's clock plus this "
        "is skipped with a log line, never stored; seconds, or 30s, 10m, 1h (default: 10m)",
    )
    p.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        type=Path,
        help=WEB_CONFIG_HELP,
    )
    p.add_argument(
        "--web.max-body-bytes",
        dest="max_body_bytes",
        metavar="BYTES",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"bigger request bodies get 413; at least 1024 (default: {DEFAULT_MAX_BODY_BYTES})",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",  # a str, not a Path: an empty value means "no main kubeconfig"
        help="main kubeconfig scanned at start-up; empty: none (default: $KUBECONFIG_PATH, "
        "else $KUBECONFIG's list, else ~/.kube/config when it exists)",
    )
    p.add_argument(
        "--kubeconfig.dir",
        dest="kubeconfig_dir",
        metavar="DIR",
        type=Path,
        help="folder of extra kubeconfigs (every visible file, sub-folders included), "
        "scanned at start-up (default: $KUBECONFIG_DIR)",
    )
    p.add_argument(
        "--alertmanager.url",
        dest="alertmanager_urls",
        metavar="URL",
        action="append",
        default=[],
        help="an Alertmanager to reconcile with, e.g. http://127.0.0.1:9093; repeat it for "
        "each peer of an HA cluster (default: none, webhooks only)",
    )
    p.add_argument(
        "--alertmanager.reconcile-interval",
        dest="reconcile_interval",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="seconds between two reconciliations with Alertmanager; 0: none (default: 60)",
    )
    p.add_argument(
        "--alertmanager.min-uptime",
        dest="min_uptime",
        metavar="SECONDS",
        type=float,
        default=300.0,
        help="an alert the reactor holds as firing and no Alertmanager lists any more is "
        "resolved only once one of them has been up this long (default: 300)",
    )
    add_alertmanager_http_flags(p)
    add_kubernetes_flags(p)
    p.add_argument(
        "--discovery.kubernetes.process",
        dest="discovery_process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="list and read those Secrets in a process of the reactor's own, so that its "
        "requests never share the interpreter with them (default: on)",
    )
    add_cd_flags(p)
    add_log_flags(p)
    add_old_spelling(p, "--kubeconfig-dir", "--kubeconfig.dir")  # hidden: older releases'
    p.set_defaults(func=run_reactor)


def duration_s(text: str) -> float:
    """A duration flag: seconds (``600``), or a number with s, m or h (``10m``)."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1.0)
    try:
        value = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 600, 30s, 10m)") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 600, 30s, 10m)")
    return value


def retention_s(text: str) -> float:
    """``--db.retention``: a duration as :func:`duration_s` takes, or days (``30d``)."""
    if text.endswith("d"):
        try:
            days = float(text[:-1])
        except ValueError:
            days = -1.0
        if not 0 <= days < float("inf"):
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30d, 12h, 0)")
        return days * 86400.0
    return duration_s(text)


def settings_from(args: argparse.Namespace, env: dict[str, str]) -> ReactorSettings:
    """Flags and environment -> :class:`ReactorSettings` (ValueError with a clear message)."""
    token: str | None = None
    if args.token_file is not None:
        try:
            token = read_token(args.token_file)
        except TokenFileError as exc:
            raise ValueError(f"--web.token-file {exc}") from None
    elif env.get("FLEETWATCH_TOKEN", "").strip():
        token = env["FLEETWATCH_TOKEN"].strip()
    if args.max_body_bytes < 1024:
        raise ValueError("--web.max-body-bytes must be at least 1024")
    # As the exporter finds it: a named file must exist, kubectl's KUBECONFIG list (or
    # ~/.kube/config) is merged and a missing file in it skipped.
    kubeconfig = main_kubeconfig(args.kubeconfig, env)
    kubeconfig_dir = args.kubeconfig_dir
    if kubeconfig_dir is None and env.get("KUBECONFIG_DIR"):
        kubeconfig_dir = Path(env["KUBECONFIG_DIR"])
    db_url, db_password = database_from(args, env)
    if not 1 <= args.db_writers <= 64:
        raise ValueError("--db.writers must be between 1 and 64")
    alertmanager_urls = tuple(check_alertmanager_url(url) for url in args.alertmanager_urls)
    alertmanager_auth, max_listing_bytes = alertmanager_http_from(args, alertmanager_urls)
    if args.reconcile_interval < 0:
        raise ValueError("--alertmanager.reconcile-interval must be 0 (off) or more seconds")
    if args.min_uptime < 0:
        raise ValueError("--alertmanager.min-uptime must be 0 or more seconds")
    kubernetes = kubernetes_from_args(args)
    if kubernetes is not None:  # discovery's Secrets listed beside requests, as the CD's
        kubernetes = dataclasses.replace(kubernetes, informer=BESIDE_REQUESTS)
    return ReactorSettings(
        db_path=args.db_path or DEFAULT_DB_PATH,
        db_url=db_url,
        db_password=db_password,
        db_password_file=args.db_password_file if db_password is not None else None,
        db_writers=args.db_writers,
        db_retention_s=args.db_retention,
        token=token,
        token_file=args.token_file,
        max_future_skew_s=args.max_future_skew,
        max_body_bytes=args.max_body_bytes,
        kubeconfig_path=kubeconfig,
        kubeconfig_dir=kubeconfig_dir,
        alertmanager_urls=alertmanager_urls,
        alertmanager_auth=alertmanager_auth,
        alertmanager_max_listing_bytes=max_listing_bytes,
        reconcile_interval_s=args.reconcile_interval,
        min_uptime_s=args.min_uptime,
        kubernetes=kubernetes,
        discovery_process=bool(args.discovery_process),
    )


def check_alertmanager_url(url: str) -> str:
    """An http(s) URL with a host; the message never repeats it (it may hold a password)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("--alertmanager.url must be an http(s) URL such as http://127.0.0.1:9093")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError("--alertmanager.url has a port that is not a number") from None
    return url


def database_from(args: argparse.Namespace, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(--db.url checked, the PostgreSQL password: --db.password-file, else $PGPASSWORD)."""
    if args.db_url is None:
        return None, None
    if args.db_path is not None:
        raise ValueError("--db.path and --db.url both name the database: give one")
    url = parse_db_url(args.db_url)  # ValueError with a message free of the password
    if url.kind != POSTGRESQL:
        return args.db_url, None
    if args.db_password_file is not None:
        try:
            password = args.db_password_file.read_text().strip()
        except OSError as exc:
            raise ValueError(
                f"--db.password-file {args.db_password_file}: {exc.strerror}"
            ) from None
        if not password:
            raise ValueError(f"--db.password-file {args.db_password_file} is empty")
        return args.db_url, password
    return args.db_url, env.get("PGPASSWORD") or None


def shown_database(settings: ReactorSettings) -> str:
    """The database for a log line: its URL, any password replaced by xxxxx."""
    if settings.db_url is None:
        return sqlite_url(settings.db_path).shown()
    return parse_db_url(settings.db_url).shown()


def migrate_only(settings: ReactorSettings) -> int:
    """``--db.migrate-only``: open the database (which migrates it) and close it."""
    from reactor.store import StoreUnavailable

    url = parse_db_url(settings.db_url) if settings.db_url else sqlite_url(settings.db_path)
    try:
        store = open_store(
            url, password=settings.db_password, busy_timeout_s=settings.db_busy_timeout_s
        )
    except StoreUnavailable as exc:
        print(f"fleetwatch reactor: cannot migrate the database: {exc}", file=sys.stderr)
        return 1
    store.close()
    log.info("database %s: schema up to date", shown_database(settings))
    return 0


def run_reactor(args: argparse.Namespace) -> int:
    setup_logging(args.log_level, args.log_format)
    try:
        addresses = parse_listen_addresses(args.listen_address or [DEFAULT_LISTEN_ADDRESS])
        settings = settings_from(args, dict(os.environ))
        cd = cd_settings_from(args)
    except ValueError as exc:  # fleetwatch.common.web.ListenAddressError is one
        print(f"fleetwatch reactor: {exc}", file=sys.stderr)
        return 2
    if args.db_migrate_only:
        return migrate_only(settings)
    try:
        web_config = load_web_config(args.web_config_file) if args.web_config_file else None
    except WebConfigError as exc:
        print(f"fleetwatch reactor: --web.config.file {exc}", file=sys.stderr)
        return 2
    tls = web_config.tls if web_config is not None else None
    ssl_context = server_tls(tls, str(args.web_config_file)) if tls is not None else None

    from aiohttp import web

    from reactor.app import create_app
    from reactor.collector import collector_policy
    from reactor.store import StoreUnavailable

    # Bind first: a busy port must fail before the database is opened and written to.
    try:
        socks = bind_sockets(addresses)
    except OSError as exc:
        print(f"fleetwatch reactor: cannot listen on {exc.strerror or exc}", file=sys.stderr)
        return 1
    where = ", ".join(display_address(host, port) for host, port in addresses)
    log.info(
        "reactor on %s://%s, database %s, token %s%s%s",
        "https" if ssl_context else "http",
        where,
        shown_database(settings),
        "required" if settings.token else "not configured",
        ", basic auth on" if web_config is not None and web_config.users else "",
        ", clusters from the management cluster's Secrets" if settings.kubernetes else "",
    )
    try:
        app = create_app(settings, web_config=web_config, cd=cd)
    except KubeAuthError as exc:  # --discovery.kubernetes: no credentials for its API
        print(f"fleetwatch reactor: --discovery.kubernetes: {exc}", file=sys.stderr)
        return 2
    app.cleanup_ctx.append(collector_policy())  # after the store and discovery: process-wide
    app.on_startup.append(reload_token_on_sighup)  # process-wide, so installed here
    favour_requests()  # process-wide: the interpreter to a waiting request sooner
    pool = backgroundpool.BackgroundPool()
    backgroundpool.install(pool)  # process-wide: background work off asyncio's executor
    # access_log=None: one line per request would dominate the cost of a deployment call.
    try:
        web.run_app(
            app,
            sock=socks,
            ssl_context=ssl_context,
            access_log=None,
            print=None,
            shutdown_timeout=10,
        )
    except StoreUnavailable as exc:
        print(f"fleetwatch reactor: cannot open the database: {exc}", file=sys.stderr)
        return 1
    except KubeAuthError as exc:  # --cd.*: the management cluster's credentials
        print(f"fleetwatch reactor: the management cluster: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"fleetwatch reactor: cannot listen on {where}: {exc}", file=sys.stderr)
        return 1
    finally:
        backgroundpool.install(None)
        pool.shutdown()
    log.info("stopped (database closed)")  # as the exporter says it: a clean stop is visible
    return 0
