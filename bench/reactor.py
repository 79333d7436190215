"""Reactor benchmarks: POST /deployments under wrk vs a bare aiohttp handler, big webhooks,
a 100,000-app cascade, and the database size per 100,000 apps; on SQLite and on PostgreSQL.

The reactor is the real ``fleetwatch reactor`` process on a SQLite file seeded through
its own store (``reactor.store.SQLiteStore``), so setup does not take 100,000 HTTP calls.
``POST /deployments`` is driven by wrk (2 threads, 50 connections, a Lua script rotating
over 1,000 apps on 1,000 clusters, with the bearer token) and, in the same run,
alternating with it, the bare aiohttp server of ``bench.bare_server`` with the same body.

PostgreSQL (``--postgres``; PostgreSQL 15 from Debian): a server of its own
in a temporary folder with its default durability (``fsync``, ``synchronous_commit`` on),
seeded like the SQLite file, and two ``fleetwatch reactor`` replicas on it. Each round
runs, one after the other: the bare handler, the SQLite reactor, one PostgreSQL replica,
and both replicas at once (two wrk processes of one thread and 25 connections each, their
requests summed and the worse p99 kept). The webhooks and the cascade then run on one
PostgreSQL replica too.

Run: ``.venv/bin/python -m bench.reactor --duration 10 --runs 3`` (SQLite), and
``.venv/bin/python -m bench.reactor --postgres --duration 10 --runs 3`` (the side-by-side
table of SQLite and PostgreSQL, written to ``reactor_postgres.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.aiohttp_baseline import start_bare, wrk_runs
from bench.common import ProcWatch, machine_load, run_wrk, summary, write_result
from fleetwatch.procs import ManagedProcess, free_port
from tests.helpers.reactor_postgres import PostgresServer

TOKEN = "bench-token-not-a-secret"
NEVER = "0001-01-01T00:00:00Z"


# --- seeding the store ------------------------------------------------------------------


def seed(db: Path, clusters: int, apps_per_cluster: int, prefix: str = "c") -> None:
    """Clusters (from the API, not probeable) with DEPLOYED apps, in one transaction."""
    from reactor.statemachine import AppStatus
    from reactor.store.sqlite import SQLiteStore

    store = SQLiteStore(db)
    try:
        width = len(str(clusters))
        with store.write() as tx:
            for c in range(clusters):
                name = f"{prefix}{c:0{width}d}"
                rec = tx.insert_cluster(name, "https://127.0.0.1:1", "bench-secret", "api")
                for a in range(apps_per_cluster):
                    app = tx.insert_app(f"{name}-app{a}", rec.id)
                    tx.set_app(app.id, rec.id, AppStatus.DEPLOYED, None)
        store.checkpoint()
    finally:
        store.close()


def seed_postgres(url: str, clusters: int, apps_per_cluster: int, prefix: str = "c") -> None:
    """As :func:`seed`, in set-based SQL (100,000 single inserts would take a minute)."""
    from reactor.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        width = len(str(clusters))
        with store.write() as tx:
            cur = tx.cur  # type: ignore[attr-defined]
            cur.execute(
                "INSERT INTO clusters (name, endpoint, kubeconfig_secret_ref, source) "
                "SELECT %s || lpad(i::text, %s, '0'), 'https://127.0.0.1:1', 'bench-secret', "
                "'api' FROM generate_series(0, %s) i",
                (prefix, width, clusters - 1),
            )
            cur.execute(
                "INSERT INTO apps (name, cluster_id, status) "
                "SELECT c.name || '-app' || a, c.id, 'DEPLOYED' FROM clusters c, "
                "generate_series(0, %s) a WHERE c.name LIKE %s",
                (apps_per_cluster - 1, f"{prefix}%"),
            )
        with store.write() as tx:
            tx.cur.execute("ANALYZE")  # type: ignore[attr-defined]
    finally:
        store.close()


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


# --- the reactor process ------------------------------------------------------------------


def start_reactor(
    tmp: Path,
    db: Path,
    switch_interval: float | None = None,
    db_url: str | None = None,
    name: str | None = None,
    writers: int | None = None,
    extra: Sequence[str] = (),
) -> tuple[ManagedProcess, str]:
    """``fleetwatch reactor`` on a free port; ``switch_interval`` is an experiment (below).

    ``db_url``: the database instead of the SQLite file ``db``; ``extra``: more flags.
    """
    port = free_port()
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    empty = tmp / "empty-kubeconfig.yaml"
    empty.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    args = [
        "reactor", f"--web.listen-address=127.0.0.1:{port}",
        f"--db.url={db_url}" if db_url else f"--db.path={db}",
        f"--web.token-file={token_file}", f"--kubeconfig={empty}", "--log.level=warning",
    ]  # fmt: skip
    if writers is not None:
        args.append(f"--db.writers={writers}")
    args.extend(extra)
    if switch_interval is None:
        argv = [str(Path(sys.executable).parent / "fleetwatch"), *args]
    else:
        # Experiment: the same command with a shorter GIL switch interval (default 5 ms),
        # to see how much of the tail latency is the event loop waiting for the GIL while
        # the store thread runs a batch.
        code = (
            f"import sys; sys.setswitchinterval({switch_interval}); "
            f"from fleetwatch.cli import main; sys.exit(main({args!r}))"
        )
        argv = [sys.executable, "-c", code]
    proc = ManagedProcess(
        argv, tmp / f"reactor-{name or db.stem}.log", ready_url=f"http://127.0.0.1:{port}/healthz"
    ).start(ready_timeout=60)
    return proc, f"http://127.0.0.1:{port}"


def post(url: str, doc: Any, timeout: float = 60.0) -> tuple[int, float, bytes]:
    """POST JSON with the token; status, seconds, body."""
    data = json.dumps(doc).encode()
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read(), exc.code
    return status, time.perf_counter() - t0, body


def apps_by_status(base: str) -> dict[str, float]:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("fleetwatch_reactor_apps{"):
            status = line.split('status="', 1)[1].split('"', 1)[0]
            out[status] = float(line.rsplit(" ", 1)[1])
    return out


# --- Alertmanager v4 webhooks ------------------------------------------------------------


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def webhook(names: list[str], alertname: str, starts_at: float) -> dict[str, Any]:
    """One Alertmanager v4 notification with one firing alert per cluster."""
    severity = "critical" if alertname == "FleetClusterOffline" else "none"
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "fleetwatch-reactor",
        "groupLabels": {"alertname": alertname},
        "commonLabels": {"alertname": alertname, "severity": severity},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": alertname, "cluster": n, "severity": severity},
                "annotations": {"summary": f"cluster {n}"},
                "startsAt": iso(starts_at),
                "endsAt": NEVER,
                "generatorURL": "http://127.0.0.1:9090/graph",
                "fingerprint": f"{abs(hash((alertname, n))):016x}",
            }
            for n in names
        ],
    }


def timed_webhook(base: str, doc: dict[str, Any]) -> float:
    status, seconds, body = post(base + "/alerts", doc)
    if status != 200:
        raise RuntimeError(f"POST /alerts answered {status}: {body[:300]!r}")
    return seconds


# --- the benchmarks -----------------------------------------------------------------------


def bench_deployments(
    tmp: Path, base: str, pid: int, names: list[str], duration: float, runs: int
) -> dict[str, Any]:
    """wrk POST /deployments on the reactor, alternating with the bare server, same run."""
    script = deployments_script(tmp, names)
    bare, bare_base = start_bare(tmp)
    pairs = []
    try:
        for _ in range(runs):
            b = wrk_runs(bare_base, "/deployments", bare.pid, duration, 1, script)
            r = wrk_runs(base, "/deployments", pid, duration, 1, script)
            pairs.append(
                {
                    "bare": b["runs"][0],
                    "reactor": r["runs"][0],
                    "rps_ratio": round(r["runs"][0]["rps"] / b["runs"][0]["rps"], 3),
                }
            )
    finally:
        bare.stop()
    return {
        "rps_ratio": summary([p["rps_ratio"] for p in pairs]),
        "reactor_rps": summary([p["reactor"]["rps"] for p in pairs]),
        "reactor_p99_ms": summary([p["reactor"]["p99_ms"] for p in pairs]),
        "bare_rps": summary([p["bare"]["rps"] for p in pairs]),
        "bare_p99_ms": summary([p["bare"]["p99_ms"] for p in pairs]),
        "runs": pairs,
    }


def deployments_script(tmp: Path, names: list[str], moving: bool = False, threads: int = 2) -> Path:
    """The wrk Lua script of the deployments: POST each app of ``names`` in turn.

    Each app is deployed again on its own cluster (settled: what a pipeline does most);
    ``moving``: each deployment moves its app, to the next cluster and back, each wrk
    thread (of ``threads``) on apps of its own, so that no deployment is settled and no
    two race for one app.
    """
    bodies = [json.dumps({"app": f"{n}-app0", "cluster": n}) for n in names]
    pick = "local mine = bodies"
    if moving:
        away = [
            json.dumps({"app": f"{n}-app0", "cluster": names[(k + 1) % len(names)]})
            for k, n in enumerate(names)
        ]
        bodies = away + bodies
        pick = f"""local mine = {{}}
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  for j = 1, #bodies do
    if ((j - 1) % {len(names)}) % {threads} == (tid or 0) then mine[#mine + 1] = bodies[j] end
  end
end"""
    script = tmp / ("moves.lua" if moving else "deployments.lua")
    lua_bodies = ",\n".join(json.dumps(b) for b in bodies)
    script.write_text(
        f"""local bodies = {{
{lua_bodies}
}}
{pick}
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {TOKEN}"
request = function()
  i = i % #mine + 1
  return wrk.format(nil, nil, nil, mine[i])
end
"""
    )
    return script


def wrk_on_replicas(bases: list[str], pids: list[int], duration: float, script: Path) -> dict:
    """wrk on several replicas at once: one wrk of 1 thread and 50/N connections each."""
    watches = [ProcWatch(pid).start() for pid in pids]
    results: list[Any] = [None] * len(bases)

    def one(i: int) -> None:
        results[i] = run_wrk(
            bases[i] + "/deployments",
            duration,
            threads=1,
            connections=50 // len(bases),
            script=script,
        )

    with machine_load() as load:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bases))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    cpu = [w.stop().cpu_s for w in watches]
    return {
        "rps": round(sum(r.rps for r in results), 2),
        "p50_ms": max(r.p50_ms for r in results),
        "p99_ms": max(r.p99_ms for r in results),
        "requests": sum(r.requests for r in results),
        "non_2xx": sum(r.non_2xx for r in results),
        "server_cpu_s": round(sum(cpu), 3),
        "load": load,
    }


def bench_stores(
    tmp: Path,
    sqlite: tuple[int, str],
    postgres: list[tuple[int, str]],
    names: list[str],
    duration: float,
    runs: int,
    postgres_async: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """POST /deployments side by side: bare, SQLite, 1 PostgreSQL replica, 2 replicas (and
    one replica on a database with ``synchronous_commit = off``)."""
    script = deployments_script(tmp, names)
    bare, bare_base = start_bare(tmp)
    rounds = []
    try:
        for _ in range(runs):

            def once(base: str, pid: int) -> dict[str, Any]:
                return dict(wrk_runs(base, "/deployments", pid, duration, 1, script)["runs"][0])

            row = {
                "bare": once(bare_base, bare.pid),
                "sqlite": once(sqlite[1], sqlite[0]),
                "postgres_1": once(postgres[0][1], postgres[0][0]),
                "postgres_2": wrk_on_replicas(
                    [b for _, b in postgres], [p for p, _ in postgres], duration, script
                ),
            }
            if postgres_async is not None:
                row["postgres_1_async_commit"] = once(postgres_async[1], postgres_async[0])
            for key in row:
                run = row[key]
                # CPU of the serving process(es) per request: what the goal counts.
                run["cpu_us_per_request"] = round(
                    run["server_cpu_s"] * 1e6 / max(run["requests"], 1), 1
                )
                if key != "bare":
                    run["rps_ratio"] = round(run["rps"] / row["bare"]["rps"], 3)
            rounds.append(row)
    finally:
        bare.stop()
    out: dict[str, Any] = {"runs": rounds}
    for key in rounds[0]:
        out[key] = {
            "rps": summary([r[key]["rps"] for r in rounds]),
            "p99_ms": summary([r[key]["p99_ms"] for r in rounds]),
            "cpu_us_per_request": summary([r[key]["cpu_us_per_request"] for r in rounds]),
            "non_2xx": sum(r[key]["non_2xx"] for r in rounds),
        }
        if key != "bare":
            out[key]["rps_ratio"] = summary([r[key]["rps_ratio"] for r in rounds])
    return out


def bench_webhooks(base: str, pid: int, names: list[str], runs: int) -> dict[str, Any]:
    """Webhooks of len(names) alerts: all ONLINE, a repeat, all OFFLINE (cascades), back."""
    kinds: dict[str, list[float]] = {"online": [], "repeat": [], "offline": [], "restore": []}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    t = time.time() - 3600
    after: dict[str, dict[str, float]] = {}
    for r in range(runs):
        base_t = t + r * 10
        steps = [
            ("online", webhook(names, "FleetClusterOnline", base_t)),
            ("repeat", webhook(names, "FleetClusterOnline", base_t)),
            ("offline", webhook(names, "FleetClusterOffline", base_t + 1)),
            ("restore", webhook(names, "FleetClusterOnline", base_t + 2)),
        ]
        for kind, doc in steps:
            watch = ProcWatch(pid).start()
            kinds[kind].append(timed_webhook(base, doc))
            cpu[kind].append(watch.stop().cpu_s)
            if r == 0 and kind in ("offline", "restore"):
                after[kind] = apps_by_status(base)
    return {
        "alerts_per_webhook": len(names),
        "seconds": {k: summary(v) for k, v in kinds.items()},
        "reactor_cpu_s": {k: summary(v) for k, v in cpu.items()},
        "apps_after_first": after,
    }


def bench_cascade(base: str, pid: int, cluster: str, apps: int, runs: int) -> dict[str, Any]:
    """One cluster with ``apps`` DEPLOYED apps goes OFFLINE (cascade) and comes back."""
    down: list[float] = []
    up: list[float] = []
    t = time.time() - 3600
    timed_webhook(base, webhook([cluster], "FleetClusterOnline", t))
    checks = []
    for r in range(runs):
        base_t = t + 1 + r * 10
        down.append(timed_webhook(base, webhook([cluster], "FleetClusterOffline", base_t)))
        checks.append(apps_by_status(base).get("DEGRADED", 0) == apps)
        up.append(timed_webhook(base, webhook([cluster], "FleetClusterOnline", base_t + 1)))
        checks.append(apps_by_status(base).get("DEGRADED", 0) == 0)
    return {
        "apps": apps,
        "degrade_seconds": summary(down),
        "restore_seconds": summary(up),
        "counts_checked": all(checks),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clusters", type=int, default=1000, help="alerts per webhook")
    parser.add_argument("--apps-per-cluster", type=int, default=10)
    parser.add_argument("--cascade-apps", type=int, default=100_000)
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=None,
        help="experiment: run the reactor with this sys.setswitchinterval() (seconds)",
    )
    parser.add_argument(
        "--only-deployments", action="store_true", help="only the wrk comparison (experiments)"
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="POST /deployments on PostgreSQL (1 and 2 replicas) side by side with SQLite and "
        "the bare handler, then webhooks and the cascade on PostgreSQL",
    )
    parser.add_argument("--writers", type=int, default=8, help="--db.writers of each replica")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.postgres:
        result = main_postgres(args)
        write_result("reactor_postgres", result, args.out)
        return result
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        # The database size: an empty store, then one cluster with the cascade's apps.
        db_b = tmp / "b" / "size.db"
        db_b.parent.mkdir()
        seed(db_b, 0, 0)
        empty_bytes = db_bytes(db_b)
        for f in db_b.parent.glob(db_b.name + "*"):
            f.unlink()
        seed(db_b, 1, args.cascade_apps, prefix="big")
        seeded_bytes = db_bytes(db_b)
        # The reactor's store: many clusters with a few apps each (throughput, big
        # webhooks) and one cluster with many apps (the cascade).
        db_a = tmp / "a" / "fleet.db"
        db_a.parent.mkdir()
        seed(db_a, args.clusters, args.apps_per_cluster)
        seed(db_a, 1, args.cascade_apps, prefix="big")
        width = len(str(args.clusters))
        names = [f"c{i:0{width}d}" for i in range(args.clusters)]
        proc, base = start_reactor(tmp, db_a, args.switch_interval)
        try:
            with machine_load() as load_dep:
                deployments = bench_deployments(
                    tmp, base, proc.pid, names, args.duration, args.runs
                )
            if args.only_deployments:
                result = {"deployments": {**deployments, "load": load_dep}}
                result["switch_interval"] = args.switch_interval
                write_result("reactor_deployments", result, args.out)
                return result
            with machine_load() as load_hooks:
                hooks = bench_webhooks(base, proc.pid, names, args.runs)
            with machine_load() as load_cascade:
                cascade = bench_cascade(base, proc.pid, "big0", args.cascade_apps, args.runs)
            rss = ProcWatch(proc.pid).start().stop().rss_peak_mib
        finally:
            proc.stop()
        final_bytes = db_bytes(db_a)
    per_100k = 100_000 / max(args.cascade_apps, 1)
    result = {
        "deployments": {**deployments, "load": load_dep},
        "webhooks": {**hooks, "load": load_hooks},
        "cascade": {**cascade, "load": load_cascade, "reactor_rss_peak_mib": round(rss, 1)},
        "database": {
            "empty_bytes": empty_bytes,
            "seeded_bytes": seeded_bytes,
            "apps": args.cascade_apps,
            "mib_per_100k_apps": round((seeded_bytes - empty_bytes) * per_100k / 2**20, 1),
            "bench_db_apps": args.clusters * args.apps_per_cluster + args.cascade_apps,
            "bench_db_bytes_at_end": final_bytes,
        },
    }
    write_result("reactor", result, args.out)
    return result


def main_postgres(args: argparse.Namespace) -> dict[str, Any]:
    """The side-by-side deployments, then webhooks and the cascade on PostgreSQL."""
    width = len(str(args.clusters))
    names = [f"c{i:0{width}d}" for i in range(args.clusters)]
    with tempfile.TemporaryDirectory(prefix="fw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        db = tmp / "fleet.db"
        seed(db, args.clusters, args.apps_per_cluster)
        if not args.only_deployments:
            seed(db, 1, args.cascade_apps, prefix="big")
        # A folder of its own: the server's user must reach it, and cannot enter ours.
        server = PostgresServer(Path(tempfile.mkdtemp(prefix="fw-bench-pg-")), durable=True)
        server.init().start()
        procs: list[ManagedProcess] = []
        try:
            url = server.create_database("bench")
            seed_postgres(url, args.clusters, args.apps_per_cluster)
            if not args.only_deployments:
                seed_postgres(url, 1, args.cascade_apps, prefix="big")
            sqlite_proc, sqlite_base = start_reactor(tmp, db, name="sqlite")
            procs.append(sqlite_proc)
            replicas = []
            for i in range(2):
                proc, base = start_reactor(
                    tmp, db, db_url=url, name=f"postgres{i}", writers=args.writers
                )
                procs.append(proc)
                replicas.append((proc.pid, base))
            # The same on a database that acknowledges commits before their WAL is on disk.
            url_async = server.create_database("benchasync")
            seed_postgres(url_async, args.clusters, args.apps_per_cluster)
            with psycopg.connect(url_async, autocommit=True) as conn:
                name = url_async.rsplit("/", 1)[1]
                conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')  # type: ignore[arg-type]
            proc, base = start_reactor(
                tmp, db, db_url=url_async, name="postgres-async", writers=args.writers
            )
            procs.append(proc)
            side_by_side = bench_stores(
                tmp,
                (sqlite_proc.pid, sqlite_base),
                replicas,
                names,
                args.duration,
                args.runs,
                postgres_async=(proc.pid, base),
            )
            if args.only_deployments:
                return {
                    "deployments": side_by_side,
                    "postgres": {"durable": True, "writers_per_replica": args.writers},
                }
            pid, base = replicas[0]
            with machine_load() as load_hooks:
                hooks = bench_webhooks(base, pid, names, args.runs)
            with machine_load() as load_cascade:
                cascade = bench_cascade(base, pid, "big0", args.cascade_apps, args.runs)
        finally:
            for proc in procs:
                proc.stop()
            server.stop()
            server.remove()
    return {
        "deployments": side_by_side,
        "postgres_webhooks": {**hooks, "load": load_hooks},
        "postgres_cascade": {**cascade, "load": load_cascade},
        "postgres": {"durable": True, "writers_per_replica": args.writers},
    }


if __name__ == "__main__":
    main()
