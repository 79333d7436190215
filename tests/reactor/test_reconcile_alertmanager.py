"""Reconciliation against real Alertmanager 0.25 processes, and two clustered peers.

Alerts are posted to Alertmanager's API (``POST /api/v2/alerts``, as Prometheus does).
In the reconciliation tests Alertmanager has no webhook at all: whatever reaches the
reactor came from reading ``GET /api/v2/alerts`` every second. In the last test two
clustered peers both notify the reactor's webhook. Times from "alert posted" to "state
seen" are printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from fleetwatch.procs import ManagedProcess, free_port
from reactor.app import create_app
from reactor.context import ReactorSettings
from tests.helpers.alertmanager_process import ALERTMANAGER, NO_GOSSIP, alertmanager_process
from tests.helpers.etcd_poll import poll
from tests.helpers.reactor_helpers import postgres_url

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(ALERTMANAGER is None, reason="prometheus-alertmanager not installed"),
]

ON, OFF, STORM = "FleetClusterOnline", "FleetClusterOffline", "FleetProbeStorm"
INTERVAL_S = 1.0
#: One interval, plus what a shared 2-core machine may add (a run, a poll, a slow AM).
WITHIN_S = INTERVAL_S + 4.0

INHIBIT = f"""
inhibit_rules:
  - source_matchers: [alertname="{STORM}"]
    target_matchers: [alertname="{OFF}"]
"""

#: No receiver configuration: nothing is ever notified.
SILENT_CONFIG = (
    """
route:
  receiver: nobody
  group_by: [alertname]
receivers:
  - name: nobody
"""
    + INHIBIT
)


def webhook_config(url: str) -> str:
    return (
        f"""
route:
  receiver: reactor
  group_by: [alertname]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: reactor
    webhook_configs:
      - url: {url}
        send_resolved: true
"""
        + INHIBIT
    )


class Alertmanager:
    """One Alertmanager process on loopback; alerts and silences posted through its API."""

    def __init__(self, root: Path, name: str, config: str, cluster: list[str] | None = None):
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.configure(config)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cluster = cluster if cluster is not None else NO_GOSSIP
        self.proc: ManagedProcess | None = None

    def configure(self, config: str) -> None:
        (self.root / "am.yml").write_text(config)

    def start(self) -> Alertmanager:
        self.proc = alertmanager_process(
            self.root, self.root / "am.yml", self.port, cluster=self.cluster
        ).start()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    async def post(self, http: aiohttp.ClientSession, *alerts: dict[str, Any]) -> float:
        """Post ``alerts``; returns the monotonic time they were accepted."""
        async with http.post(f"{self.url}/api/v2/alerts", json=list(alerts)) as resp:
            assert resp.status == 200, await resp.text()
        return time.monotonic()

    async def silence(self, http: aiohttp.ClientSession, **labels: str) -> None:
        now = datetime.now(UTC)
        body = {
            "matchers": [
                {"name": k, "value": v, "isRegex": False, "isEqual": True}
                for k, v in labels.items()
            ],
            "startsAt": stamp(now - timedelta(minutes=1)),
            "endsAt": stamp(now + timedelta(hours=1)),
            "createdBy": "test",
            "comment": "planned maintenance",
        }
        async with http.post(f"{self.url}/api/v2/silences", json=body) as resp:
            assert resp.status == 200, await resp.text()


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)


def status_alert(name: str, cluster: str, starts: float, ends: float | None = None) -> Any:
    """A status alert starting ``starts`` minutes after T0; resolved at ``ends`` if given."""
    one: dict[str, Any] = {
        "labels": {"alertname": name, "cluster": cluster},
        "startsAt": stamp(T0 + timedelta(minutes=starts)),
    }
    if ends is not None:
        one["endsAt"] = stamp(T0 + timedelta(minutes=ends))
    return one


def storm() -> Any:
    return {"labels": {"alertname": STORM}, "startsAt": stamp(T0)}


@dataclass
class Reactor:
    client: TestClient[Any, Any]
    registry: CollectorRegistry

    async def statuses(self) -> dict[str, str]:
        clusters = await (await self.client.get("/clusters")).json()
        return {c["name"]: c["status"] for c in clusters}

    async def apps(self) -> dict[str, str]:
        return {a["name"]: a["status"] for a in await (await self.client.get("/apps")).json()}

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    async def runs_after(self, count: int) -> None:
        """Wait until ``count`` more reconciliations have ended (they are counted at start)."""
        target = self.metric("fleetwatch_reactor_reconcile_runs_total") + count + 1
        await poll(
            lambda: _value(self.metric("fleetwatch_reactor_reconcile_runs_total")),
            lambda runs: runs >= target,
            WITHIN_S * (count + 1),
            f"{count} more reconciliation(s)",
        )

    async def setup(self, apps_on: dict[str, list[str]]) -> None:
        for cluster, apps in apps_on.items():
            body = {"name": cluster, "endpoint": f"https://{cluster}:6443"}
            body["kubeconfig_secret_ref"] = cluster
            assert (await self.client.post("/clusters", json=body)).status == 201
            for app in apps:
                await self.client.post("/apps", json={"name": app, "cluster": cluster})
                resp = await self.client.post("/deployments", json={"app": app, "cluster": cluster})
                assert resp.status == 201


async def _value(x: float) -> float:
    return x


async def _pair(x: float, y: float) -> tuple[float, float]:
    return x, y


StartReactor = Callable[..., Awaitable[Reactor]]


@pytest.fixture
def start_reactor(aiohttp_client: Any, tmp_path: Path) -> StartReactor:
    """A reactor app on a SQLite file of this test (shared by every reactor it starts)."""

    async def start(**settings: Any) -> Reactor:
        settings.setdefault("db_path", tmp_path / "fleetwatch.db")
        settings.setdefault("reconcile_interval_s", INTERVAL_S)
        registry = CollectorRegistry()
        client = await aiohttp_client(create_app(ReactorSettings(**settings), registry=registry))
        return Reactor(client, registry)

    return start


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


@pytest.fixture
def alertmanagers(tmp_path: Path) -> Any:
    started: list[Alertmanager] = []

    def make(config: str = SILENT_CONFIG, name: str = "am", **kw: Any) -> Alertmanager:
        am = Alertmanager(tmp_path, name, config, **kw)
        started.append(am)
        return am

    yield make
    for am in started:
        am.stop()


async def seen(label: str, posted: float, probe: Any, expected: Any) -> float:
    """Poll ``probe`` until it returns ``expected``; print and return the seconds it took."""
    await poll(probe, lambda value: value == expected, WITHIN_S, label)
    took = time.monotonic() - posted
    print(f"\n{label}: {took:.2f}s after the post")
    return took


Reconciling = Callable[..., Awaitable[tuple[Alertmanager, Reactor]]]


@pytest.fixture
def reconciling(start_reactor: StartReactor, alertmanagers: Any) -> Reconciling:
    """One Alertmanager (the silent configuration), started, and a reactor reconciling
    with it that believes it once it is up for ``min_uptime_s`` (0: at once)."""

    async def started(min_uptime_s: float = 0) -> tuple[Alertmanager, Reactor]:
        am = alertmanagers()
        await asyncio.to_thread(am.start)
        return am, await start_reactor(alertmanager_urls=(am.url,), min_uptime_s=min_uptime_s)

    return started


async def web_on_c1_online(
    am: Alertmanager, reactor: Reactor, http: aiohttp.ClientSession, within: float
) -> None:
    """App web on c1, and c1 ONLINE through reconciliation alone."""
    await reactor.setup({"c1": ["web"]})
    await am.post(http, status_alert(ON, "c1", 0))
    await poll(reactor.statuses, lambda s: s == {"c1": "ONLINE"}, within, "ONLINE")


async def test_listed_alerts_reach_the_state_without_any_webhook(
    reconciling: Reconciling, http: aiohttp.ClientSession
) -> None:
    am, reactor = await reconciling()
    await reactor.setup({"c1": ["web", "api"], "c2": ["db"]})

    posted = await am.post(http, status_alert(ON, "c1", 0), status_alert(ON, "c2", 0))
    took = await seen(
        "ONLINE by reconciliation", posted, reactor.statuses, {"c1": "ONLINE", "c2": "ONLINE"}
    )
    assert took <= WITHIN_S

    posted = await am.post(http, status_alert(ON, "c1", 0, 5), status_alert(OFF, "c1", 5))
    await seen(
        "cascade by reconciliation",
        posted,
        reactor.apps,
        {"web": "DEGRADED", "api": "DEGRADED", "db": "DEPLOYED"},
    )
    assert (await reactor.statuses())["c1"] == "OFFLINE"
    assert reactor.metric("fleetwatch_reactor_outages_opened_total") == 1
    assert reactor.metric("fleetwatch_reactor_reconcile_changes_total") >= 3
    assert reactor.metric("fleetwatch_reactor_reconcile_last_success_timestamp_seconds") > 0
    assert reactor.metric("fleetwatch_reactor_notifications_total", outcome="applied") == 0
    assert (
        reactor.metric(
            "fleetwatch_reactor_reconcile_failures_total", alertmanager=f"127.0.0.1:{am.port}"
        )
        == 0
    )


async def test_an_inhibited_or_silenced_offline_cascades_nothing(
    reconciling: Reconciling, http: aiohttp.ClientSession
) -> None:
    am, reactor = await reconciling()
    await reactor.setup({"c1": ["web"], "c2": ["db"], "c3": ["cache"]})
    await am.post(http, *(status_alert(ON, c, 0) for c in ("c1", "c2", "c3")))
    await poll(reactor.statuses, lambda s: set(s.values()) == {"ONLINE"}, WITHIN_S, "ONLINE")

    # c1: the storm guard inhibits its Offline. c2: its Offline is silenced.
    await am.silence(http, alertname=OFF, cluster="c2")
    await am.post(
        http,
        storm(),
        status_alert(ON, "c1", 0, 5),
        status_alert(OFF, "c1", 5),
        status_alert(ON, "c2", 0, 5),
        status_alert(OFF, "c2", 5),
    )
    # The Onlines are no longer listed: resolved, UNKNOWN (deployments allowed, nothing
    # degraded). The suppressed Offlines carried no news.
    await poll(
        reactor.statuses,
        lambda s: s == {"c1": "UNKNOWN", "c2": "UNKNOWN", "c3": "ONLINE"},
        WITHIN_S,
        "UNKNOWN",
    )
    await reactor.runs_after(2)
    assert await reactor.statuses() == {"c1": "UNKNOWN", "c2": "UNKNOWN", "c3": "ONLINE"}
    assert await reactor.apps() == {"web": "DEPLOYED", "db": "DEPLOYED", "cache": "DEPLOYED"}
    assert reactor.metric("fleetwatch_reactor_outages_opened_total") == 0
    resp = await reactor.client.post("/deployments", json={"app": "web", "cluster": "c1"})
    assert resp.status == 201


async def test_a_freshly_restarted_alertmanager_resolves_nothing(
    reconciling: Reconciling, http: aiohttp.ClientSession
) -> None:
    # Long enough for a restart and two reconciliations to fit in it on a loaded machine
    # (an Alertmanager's start alone took seconds there), so the proof below holds.
    min_uptime_s = 8.0
    am, reactor = await reconciling(min_uptime_s)
    await web_on_c1_online(am, reactor, http, WITHIN_S)

    # Restarted: it lists nothing until Prometheus re-sends (which it never does here).
    await asyncio.to_thread(am.stop)
    restarted = time.monotonic()
    await asyncio.to_thread(am.start)
    await reactor.runs_after(2)
    assert time.monotonic() - restarted < min_uptime_s, "too slow to prove anything"
    assert await reactor.statuses() == {"c1": "ONLINE"}
    # Once up for min-uptime, its empty listing is believed: the Online has ended.
    await poll(
        reactor.statuses, lambda s: s == {"c1": "UNKNOWN"}, min_uptime_s + WITHIN_S, "UNKNOWN"
    )
    took = time.monotonic() - restarted
    print(f"\nrestarted Alertmanager believed {took:.2f}s after its restart")
    assert took >= min_uptime_s
    assert await reactor.apps() == {"web": "DEPLOYED"}


async def test_a_lost_resolved_costs_at_most_one_interval(
    reconciling: Reconciling, http: aiohttp.ClientSession
) -> None:
    """The sequence that left apps DEGRADED on an ONLINE cluster until the next repeat.

    The webhooks that reach the reactor: Online since 0, then Offline since 5 (the cascade).
    The recovery's notifications are lost (the reactor was unreachable): Offline resolved
    at 8, Online since 8. Alertmanager knows; reconciliation reads it within one interval.
    """
    am, reactor = await reconciling()
    await reactor.setup({"c1": ["web", "api"]})
    await am.post(http, status_alert(ON, "c1", 0))
    await poll(reactor.statuses, lambda s: s == {"c1": "ONLINE"}, WITHIN_S, "ONLINE")
    await am.post(http, status_alert(ON, "c1", 0, 5), status_alert(OFF, "c1", 5))
    await poll(reactor.apps, lambda a: set(a.values()) == {"DEGRADED"}, WITHIN_S, "cascade")

    posted = await am.post(http, status_alert(OFF, "c1", 5, 8), status_alert(ON, "c1", 8))
    took = await seen(
        "lost recovery: apps DEPLOYED", posted, reactor.apps, {"web": "DEPLOYED", "api": "DEPLOYED"}
    )
    assert took <= WITHIN_S
    assert await reactor.statuses() == {"c1": "ONLINE"}
    assert reactor.metric("fleetwatch_reactor_outages_closed_total") == 1


def to_the_nanosecond(one: dict[str, Any]) -> dict[str, Any]:
    """The alert with times that carry nanoseconds (Go's RFC3339Nano), as any sender may."""
    for key in ("startsAt", "endsAt"):
        if key in one:
            one[key] = one[key].replace(".000000Z", ".123456789Z")
    return one


async def test_an_offline_notified_to_the_nanosecond_stays_offline_through_reconciliation(
    start_reactor: StartReactor, alertmanagers: Any, http: aiohttp.ClientSession
) -> None:
    """Alertmanager's webhook passes the nanoseconds on, its API v2 lists the milliseconds:
    the same instance both ways, so reconciling resolves nothing and the gate stays shut."""
    am = alertmanagers()
    reactor = await start_reactor(alertmanager_urls=(am.url,), min_uptime_s=0)
    am.configure(webhook_config(str(reactor.client.make_url("/alerts"))))
    await asyncio.to_thread(am.start)
    await reactor.setup({"c1": ["web"]})
    await am.post(http, to_the_nanosecond(status_alert(ON, "c1", 0)))
    await poll(reactor.statuses, lambda s: s == {"c1": "ONLINE"}, WITHIN_S, "ONLINE")
    down = [status_alert(ON, "c1", 0, 5), status_alert(OFF, "c1", 5)]
    await am.post(http, *(to_the_nanosecond(a) for a in down))
    await poll(reactor.apps, lambda a: a == {"web": "DEGRADED"}, WITHIN_S, "cascade")
    await poll(
        lambda: _value(reactor.metric("fleetwatch_reactor_notifications_total", outcome="applied")),
        lambda n: n >= 2,
        WITHIN_S,
        "both notifications by webhook",
    )
    async with http.get(f"{am.url}/api/v2/alerts") as resp:
        listed = {a["labels"]["alertname"]: a["startsAt"] for a in await resp.json()}
    assert listed[OFF].endswith(".123Z"), listed  # what the API says of .123456789Z
    await reactor.runs_after(3)
    assert await reactor.statuses() == {"c1": "OFFLINE"}
    resp = await reactor.client.post("/deployments", json={"app": "web", "cluster": "c1"})
    assert resp.status == 409, await resp.text()


async def test_an_offline_resolved_by_an_empty_alertmanager_is_revived_when_listed_again(
    reconciling: Reconciling, http: aiohttp.ClientSession
) -> None:
    """Restarted empty, the Alertmanager is believed after min-uptime: the Offline no longer
    listed reads as resolved. Prometheus re-sends it (same startsAt): OFFLINE again."""
    min_uptime_s = 2.0
    am, reactor = await reconciling(min_uptime_s)
    await web_on_c1_online(am, reactor, http, 2 * WITHIN_S)
    await am.post(http, status_alert(ON, "c1", 0, 5), status_alert(OFF, "c1", 5))
    await poll(reactor.apps, lambda a: a == {"web": "DEGRADED"}, WITHIN_S, "cascade")

    await asyncio.to_thread(am.stop)
    await asyncio.to_thread(am.start)
    await poll(
        reactor.statuses, lambda s: s == {"c1": "UNKNOWN"}, min_uptime_s + WITHIN_S, "UNKNOWN"
    )
    assert (await reactor.client.post("/apps", json={"name": "api", "cluster": "c1"})).ok
    resp = await reactor.client.post("/deployments", json={"app": "api", "cluster": "c1"})
    assert resp.status == 201  # UNKNOWN: the outage cannot be proven

    posted = await am.post(http, status_alert(OFF, "c1", 5))  # Prometheus re-sends it
    await seen("OFFLINE again", posted, reactor.statuses, {"c1": "OFFLINE"})
    assert await reactor.apps() == {"web": "DEGRADED", "api": "DEGRADED"}
    resp = await reactor.client.post("/deployments", json={"app": "api", "cluster": "c1"})
    assert resp.status == 409, await resp.text()
    assert reactor.metric("fleetwatch_reactor_outages_opened_total") == 1


async def test_replicas_reconciling_at_once_change_the_state_once(
    start_reactor: StartReactor, alertmanagers: Any, http: aiohttp.ClientSession, db_path: Path
) -> None:
    """Three reactors on one database (SQLite, PostgreSQL) read one Alertmanager every second."""
    url = postgres_url(db_path)
    database: dict[str, Any] = {"db_path": db_path} if url is None else {"db_url": url}
    am = alertmanagers()
    await asyncio.to_thread(am.start)
    replicas = [
        await start_reactor(alertmanager_urls=(am.url,), min_uptime_s=0, **database)
        for _ in range(3)
    ]
    await replicas[0].setup({f"c{i}": [f"app{i}a", f"app{i}b"] for i in range(5)})
    await am.post(http, *(status_alert(ON, f"c{i}", 0) for i in range(5)))
    await poll(replicas[2].statuses, lambda s: set(s.values()) == {"ONLINE"}, WITHIN_S, "ONLINE")
    await am.post(http, status_alert(ON, "c0", 0, 5), status_alert(OFF, "c0", 5))
    await poll(replicas[1].statuses, lambda s: s["c0"] == "OFFLINE", WITHIN_S, "OFFLINE")
    for replica in replicas:
        await replica.runs_after(1)

    def total(name: str) -> float:
        return sum(r.metric(name) for r in replicas)

    # As one replica would count them: 5 clusters ONLINE, then c0's Online resolved and
    # its Offline firing (one change of c0, or two if they were read in two runs).
    assert 6 <= total("fleetwatch_reactor_reconcile_changes_total") <= 7
    assert total("fleetwatch_reactor_outages_opened_total") == 1
    assert total("fleetwatch_reactor_apps_degraded_total") == 2
    assert await replicas[0].apps() == {
        **{f"app{i}{x}": "DEPLOYED" for i in range(1, 5) for x in "ab"},
        "app0a": "DEGRADED",
        "app0b": "DEGRADED",
    }


async def test_two_clustered_alertmanagers_one_outage_one_cascade(
    start_reactor: StartReactor, alertmanagers: Any, http: aiohttp.ClientSession
) -> None:
    """Two peers gossiping over loopback, both notifying the reactor (and both reconciled)."""
    gossip = [free_port(), free_port()]
    peers = [
        alertmanagers(
            name=f"am{i}",
            cluster=[
                f"--cluster.listen-address=127.0.0.1:{gossip[i]}",
                f"--cluster.peer=127.0.0.1:{gossip[1 - i]}",
                "--cluster.peer-timeout=1s",
                # Notifications wait for the gossip to settle: 3 quiet polls every 10
                # gossip intervals, 6 s and more at the default 200ms.
                "--cluster.gossip-interval=50ms",
            ],
        )
        for i in range(2)
    ]
    reactor = await start_reactor(reconcile_interval_s=0)
    for am in peers:
        am.configure(webhook_config(str(reactor.client.make_url("/alerts"))))
    await asyncio.gather(*(asyncio.to_thread(am.start) for am in peers))
    await reactor.setup({"c1": ["web", "api"], "c2": ["db"]})

    async def everywhere(*alerts: dict[str, Any]) -> float:
        """As Prometheus does: every alert to every Alertmanager."""
        times: list[float] = await asyncio.gather(*(am.post(http, *alerts) for am in peers))
        return min(times)

    posted = await everywhere(status_alert(ON, "c1", 0), status_alert(ON, "c2", 0))
    await poll(
        reactor.statuses,
        lambda s: s == {"c1": "ONLINE", "c2": "ONLINE"},
        15.0,
        "ONLINE by webhook, once the peers' gossip has settled",
    )
    print(f"\nONLINE by webhook: {time.monotonic() - posted:.2f}s (gossip settling)")
    posted = await everywhere(status_alert(ON, "c1", 0, 5), status_alert(OFF, "c1", 5))
    await seen(
        "cascade by webhook",
        posted,
        reactor.apps,
        {"web": "DEGRADED", "api": "DEGRADED", "db": "DEPLOYED"},
    )
    # The second peer notifies only if the first one's notification log entry has not
    # reached it after 1 s (--cluster.peer-timeout): let any such duplicate land.
    applied = "fleetwatch_reactor_notifications_total"
    settled = await poll(
        lambda: _pair(reactor.metric(applied, outcome="applied"), time.monotonic()),
        lambda pair: pair[1] - posted >= 3.0,
        10.0,
        "3 s after the cascade's post",
    )
    assert settled[0] >= 2
    assert reactor.metric("fleetwatch_reactor_outages_opened_total") == 1
    assert reactor.metric("fleetwatch_reactor_apps_degraded_total") == 2
    assert await reactor.apps() == {"web": "DEGRADED", "api": "DEGRADED", "db": "DEPLOYED"}
    print(
        "\nnotifications applied from the two peers:",
        reactor.metric("fleetwatch_reactor_notifications_total", outcome="applied"),
    )


async def test_a_failing_alertmanager_is_counted_each_time_and_logged_once(
    start_reactor: StartReactor,
    alertmanagers: Any,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    am = alertmanagers()  # not started yet: its port refuses connections
    secret_url = am.url.replace("http://", "http://admin:hunter2@")
    with caplog.at_level(logging.DEBUG, logger="reactor"):
        reactor = await start_reactor(alertmanager_urls=(secret_url,), min_uptime_s=0)
        await reactor.setup({"c1": ["web"]})
        name = f"127.0.0.1:{am.port}"
        await poll(
            lambda: _value(
                reactor.metric("fleetwatch_reactor_reconcile_failures_total", alertmanager=name)
            ),
            lambda n: n >= 3,
            3 * WITHIN_S,
            "three failed reconciliations",
        )
        assert reactor.metric("fleetwatch_reactor_reconcile_last_success_timestamp_seconds") == 0
        await asyncio.to_thread(am.start)
        posted = await am.post(http, status_alert(ON, "c1", 0))
        await seen(
            "ONLINE once the Alertmanager answers", posted, reactor.statuses, {"c1": "ONLINE"}
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len([w for w in warnings if "cannot read Alertmanager" in w]) == 1, warnings
    assert any("answers again" in r.getMessage() for r in caplog.records)
    metrics = await (await reactor.client.get("/metrics")).text()
    assert f'fleetwatch_reactor_reconcile_failures_total{{alertmanager="{name}"}}' in metrics
    assert "hunter2" not in caplog.text and "hunter2" not in metrics
