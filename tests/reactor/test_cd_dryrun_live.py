"""``fleetwatch reactor`` processes on one PostgreSQL and a stand-in management cluster
(docs/cd.md, "A dry run" and "Rows of a kind no replica watches"):

- a ``--cd.flux --cd.dry-run`` replica beside the acting ``--cd.flux --cd.argocd`` one
  (the setting that deleted the paused Applications at every resync): ``GET /apps`` is the
  same in every sample for 20 s, the outage's end restores every app it degraded, and the
  dry run writes no row (every row's ``xmin`` unchanged), no object and no Event, even
  alone with an outage to pause for and objects to add and remove;
- a reactor restarted without ``--cd.argocd`` mid-outage keeps the Applications' rows,
  counts them and names the paused ones in its log, once.
"""

from __future__ import annotations

import json
import re
import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from fleetwatch.common import metricnames
from fleetwatch.procs import wait_until
from fleetwatch.standin.management import ManagementProcess
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.service import Service
from reactor.store.postgres import PostgresStore
from tests.helpers.reactor_cd import C1_PAUSED, kustomization
from tests.helpers.reactor_cd_replicas import CdFleet, Replica
from tests.helpers.reactor_helpers import TABLES
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

pytestmark = pytest.mark.live

FLUX_PAUSED = ("apps", "manual", "podinfo")
ARGOCD_PAUSED = ("argocd:Application/argocd/guestbook", "argocd:Application/argocd/web")
UNWATCHED = metricnames.REACTOR_CD_UNWATCHED
READS = ("get", "list", "watch")
SAMPLE_S = 20.0


def rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the store with its ``xmin``: any insert, update (even to the same
    values) or delete since changes it."""
    with psycopg.connect(url) as conn:
        return {
            t: conn.execute(f"SELECT xmin::text, * FROM {t} ORDER BY id").fetchall() for t in TABLES
        }


def writes(mgmt: ManagementProcess, leases: bool = True) -> dict[str, int]:
    """The write requests the management cluster received, by verb and resource."""
    return {
        key: n
        for key, n in mgmt.counts().items()
        if key.split(" ")[0] not in READS and (leases or "leases" not in key)
    }


def read_only_kubeconfig(mgmt: ManagementProcess, path: Path) -> Path:
    """The management cluster's kubeconfig with a token that may only read: a write the
    dry run tried would be refused and counted."""
    config = yaml.safe_load(mgmt.kubeconfig.read_text())
    token = mgmt.issue_token("fleetwatch-dry-run", verbs=list(READS))
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def delete(mgmt: ManagementProcess, name: str) -> None:
    """Delete a seeded Kustomization as a person would, over HTTPS."""
    context = ssl.create_default_context(cafile=str(mgmt.ca_file))
    url = (
        f"{mgmt.url}/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/"
        f"kustomizations/{name}"
    )
    headers = {"Authorization": f"Bearer {mgmt.token}"}
    req = urllib.request.Request(url, method="DELETE", headers=headers)
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:
        assert resp.status == 200


def notify_store(url: str, payload: dict[str, Any]) -> None:
    """A notification applied to the store as another replica would (no reactor here)."""
    store = PostgresStore(url)
    try:
        signals = status_signals(parse_webhook(json.dumps(payload).encode())).signals
        Service(store).apply_signals(signals)
    finally:
        store.close()


def passes_after(replica: Replica, moment: float, count: int = 2) -> bool:
    """Has the replica completed ``count`` full passes that began after ``moment``?"""
    last = replica.sample(metricnames.REACTOR_CD_LAST_RESYNC) or 0.0
    return last > moment + count  # a pass a second (--cd.resync-interval=1)


def marked(url: str) -> int:
    """Rows whose object was last seen paused with fleetwatch's mark."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM apps WHERE paused = 1 AND pause_mark IS NOT NULL"
        )
        return int(found.fetchone()[0])  # type: ignore[index]


def outage_counts(url: str) -> list[tuple[int, int]]:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT apps_degraded, apps_restored FROM outages ORDER BY id")
        return [(int(d), int(r)) for d, r in found.fetchall()]


def test_a_dry_run_beside_the_acting_replica_writes_nothing_and_every_app_is_restored(
    tmp_path: Path, cd_fleet: CdFleet
) -> None:
    url, mgmt, state = cd_fleet
    acting = Replica(tmp_path, url, mgmt.kubeconfig, "acting")
    dry_flags = ("--cd.flux", "--cd.dry-run", "--cd.resync-interval=1")
    dry = Replica(
        tmp_path, url, read_only_kubeconfig(mgmt, tmp_path / "dry.yaml"), "dry", dry_flags
    )
    try:
        acting.proc.start()
        wait_until(acting.acts, 30, what="the acting replica acts")
        wait_until(lambda: len(acting.call("GET", "/apps")[1]) == 6, 30, what="c1's objects")
        dry.proc.start()
        started = time.time()
        wait_until(lambda: passes_after(dry, started), 30, what="the dry run's passes")

        # The outage: the acting replica pauses every object it degraded.
        assert acting.call("POST", "/alerts", webhook(alert(OFFLINE, "c1", 5)))[0] == 200
        wait_until(lambda: all(state(n)[0] and state(n)[1] for n in C1_PAUSED), 15, what="paused")
        apps = {a["name"]: a["status"] for a in acting.call("GET", "/apps")[1]}
        degraded = {name for name, status in apps.items() if status == "DEGRADED"}
        assert len(degraded) == 6 and set(ARGOCD_PAUSED) <= degraded
        wait_until(lambda: marked(url) == 5, 15, what="the pauses seen by the mirror")
        paused_at = time.time()
        wait_until(lambda: passes_after(dry, paused_at), 30, what="the dry run's passes")

        # 20 s of GET /apps through both replicas: the same apps every time, and not one
        # row written by either (the acting one has nothing to do; the dry run never does).
        before, requests = rows(url), writes(mgmt, leases=False)
        seen: list[frozenset[tuple[str, str]]] = []
        end = time.monotonic() + SAMPLE_S
        while time.monotonic() < end:
            for replica in (dry, acting):
                listed = replica.call("GET", "/apps")[1]
                seen.append(frozenset((a["name"], a["status"]) for a in listed))
            time.sleep(0.2)  # the sampling period, not a synchronisation
        assert len(seen) >= 50 and set(seen) == {seen[0]}, len(set(seen))
        assert {name for name, status in seen[0] if status == "DEGRADED"} == degraded
        assert rows(url) == before
        assert writes(mgmt, leases=False) == requests
        # The dry run sees the Applications it does not watch, paused by the outage: it
        # counts them and leaves them (its count pages nobody: alerts.cd).
        assert dry.sample(UNWATCHED, kind="Application", state="paused_by_outage") == 2

        # The recovery restores every app the outage degraded, and resumes the objects.
        assert acting.call("POST", "/alerts", webhook(alert(ONLINE, "c1", 10)))[0] == 200
        wait_until(lambda: all(state(n) == (False, None) for n in C1_PAUSED), 15, what="resumed")
        apps = {a["name"]: a["status"] for a in acting.call("GET", "/apps")[1]}
        assert set(apps.values()) == {"DEPLOYED"} and set(apps) >= degraded
        assert outage_counts(url) == [(6, 6)]
        assert "6 app(s) restored" in acting.proc.log_tail(400)

        # The dry run alone, with work to do: an outage open in the store, an object new to
        # it and one gone. It decides and counts the pauses, and writes nothing at all.
        acting.proc.stop()
        # The object changes first, seen by the dry run's passes, then the outage: a pass
        # between the outage and the deletion would rightly count "manual" too.
        mgmt.seed([kustomization("late", "c1")])
        delete(mgmt, "manual")
        changed = time.time()
        wait_until(lambda: passes_after(dry, changed, 2), 30, what="two passes after the change")
        notify_store(url, webhook(alert(OFFLINE, "c1", 15)))
        before, requests = rows(url), writes(mgmt)
        actions = metricnames.total(metricnames.REACTOR_CD_ACTIONS)

        def would_pause() -> float:
            return dry.sample(actions, action="pause", result="dry_run") or 0.0

        wait_until(lambda: would_pause() == 3, 30, what="apps, podinfo and late")
        settled = time.time()
        wait_until(lambda: passes_after(dry, settled, 3), 30, what="three more passes")
        assert would_pause() == 3  # once per object version, not per pass
        assert rows(url) == before  # no row: not the new one, not the gone one's delete
        assert writes(mgmt) == requests  # no object, no Event, no Lease
        assert state("apps") == (False, None) and state("podinfo") == (False, None)
        assert dry.sample(actions, action="pause", result="applied") is None
        failures = metricnames.total(metricnames.REACTOR_CD_FAILURES)
        assert dry.sample(failures, reason="forbidden") is None  # it tried no write either
        log = dry.proc.log_tail(400)
        # The new object and the deletion may reach the dry run in one pass or in two: the
        # last preview is against the whole change (the store holds neither).
        previews = [line for line in log.splitlines() if "the mirror would add" in line]
        assert previews, log[-2000:]
        # "update N" counts rows whose last-seen pause the acting replica had not mirrored
        # yet when it stopped (its resumes): timing, not the dry run's doing.
        assert re.search(r"would add 1 app\(s\), move 0, update \d+, remove 1;", previews[-1])
        assert "cd: mirror:" not in log  # it never wrote the mirror
    finally:
        for replica in (dry, acting):
            replica.proc.stop()
    print(f"GET /apps: {len(seen)} samples in {SAMPLE_S:g} s, {len(set(seen))} distinct")
    for replica in (dry, acting):
        assert "Traceback" not in replica.proc.log_tail(400), replica.proc.log_tail(400)


def test_a_reactor_restarted_without_argocd_keeps_the_application_rows_and_names_the_paused(
    tmp_path: Path, cd_fleet: CdFleet
) -> None:
    url, mgmt, state = cd_fleet
    both = Replica(tmp_path, url, mgmt.kubeconfig, "both")
    flux = Replica(tmp_path, url, mgmt.kubeconfig, "flux", ("--cd.flux", "--cd.resync-interval=1"))
    try:
        both.proc.start()
        wait_until(both.acts, 30, what="the first reactor acts")
        wait_until(lambda: len(both.call("GET", "/apps")[1]) == 6, 30, what="c1's objects")
        assert both.call("POST", "/alerts", webhook(alert(OFFLINE, "c1", 5)))[0] == 200
        wait_until(lambda: all(state(n)[0] and state(n)[1] for n in C1_PAUSED), 15, what="paused")
        # Stopped only once its mirror has recorded the pauses: the rows are what the next
        # reactor reads of objects it does not watch.
        wait_until(lambda: marked(url) == 5, 15, what="the pauses seen by the mirror")
        both.proc.stop()

        # Restarted with --cd.flux alone, mid-outage.
        flux.proc.start()
        wait_until(flux.acts, 30, what="the Flux-only reactor acts")
        acting_since = time.time()
        wait_until(lambda: passes_after(flux, acting_since, 3), 30, what="three passes")
        apps = {a["name"]: a["status"] for a in flux.call("GET", "/apps")[1]}
        assert len(apps) == 6 and all(apps[name] == "DEGRADED" for name in ARGOCD_PAUSED)
        paused = flux.sample(UNWATCHED, kind="Application", state="paused_by_outage")
        assert paused == 2
        assert flux.sample(UNWATCHED, kind="Application", state="running") == 0
        named = [
            line
            for line in flux.proc.log_tail(400).splitlines()
            if "nothing will resume them" in line
        ]
        assert len(named) == 1, named  # once per change, not once per pass
        assert all(name in named[0] for name in ARGOCD_PAUSED)
        assert re.search(r"\b2 object\(s\) of kinds this replica does not watch", named[0])

        # The outage ends: every app is restored in the store, the Flux objects resumed;
        # the Applications stay paused (nobody watches them): still counted, for a person.
        assert flux.call("POST", "/alerts", webhook(alert(ONLINE, "c1", 10)))[0] == 200
        wait_until(lambda: all(state(n) == (False, None) for n in FLUX_PAUSED), 15, what="resumed")
        apps = {a["name"]: a["status"] for a in flux.call("GET", "/apps")[1]}
        assert len(apps) == 6 and set(apps.values()) == {"DEPLOYED"}
        assert outage_counts(url) == [(6, 6)]
        assert all(state(n)[0] and state(n)[1] for n in ("guestbook", "web"))
        assert flux.sample(UNWATCHED, kind="Application", state="paused_by_outage") == 2
    finally:
        for replica in (flux, both):
            replica.proc.stop()
    for replica in (flux, both):
        assert "Traceback" not in replica.proc.log_tail(400), replica.proc.log_tail(400)
