"""The last failure's reason and class: the contract's table, the table's counts, the series.

A probe refused by the API server (401, 403) or whose TLS verification failed is of the
class ``credentials``; every other failure is ``unreachable`` (DESIGN "Statuses").
``fleetwatch_cluster_probe_last_failure_reason`` is one series per failing cluster, none
after a success; ``fleetwatch_cluster_probe_consecutive_credential_failures`` counts the
refusals of the current run of failures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from exporter.expose.render import render_metrics
from exporter.expose.snapshot import CycleStats, Snapshot, build_snapshot
from exporter.model import CycleSettings, ProbeResult, Reason, ReasonClass, reason_class
from exporter.state import ClusterTable
from fleetwatch.discovery.clusters import Cluster, Discovery
from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import MonitorFactory

LAST_REASON = "fleetwatch_cluster_probe_last_failure_reason"
CREDENTIAL_FAILURES = "fleetwatch_cluster_probe_consecutive_credential_failures"

# The rows of ``reason_class``'s docstring table.
TABLE = [
    (Reason.UNAUTHORIZED, ReasonClass.CREDENTIALS),
    (Reason.TLS, ReasonClass.CREDENTIALS),
    (Reason.TIMEOUT, ReasonClass.UNREACHABLE),
    (Reason.CONNECT, ReasonClass.UNREACHABLE),
    (Reason.NOT_READY, ReasonClass.UNREACHABLE),
    (Reason.HTTP_ERROR, ReasonClass.UNREACHABLE),
    (Reason.CREDENTIALS, ReasonClass.UNREACHABLE),
    (Reason.PROXY, ReasonClass.UNREACHABLE),
]


@pytest.mark.parametrize(("reason", "klass"), TABLE, ids=[r.value for r, _ in TABLE])
def test_each_reason_has_the_class_of_the_contract_table(
    reason: Reason, klass: ReasonClass
) -> None:
    assert reason_class(reason) is klass


def test_the_table_names_every_reason_once() -> None:
    assert sorted(r.value for r, _ in TABLE) == sorted(r.value for r in Reason)
    assert {c.value for c in ReasonClass} == {"credentials", "unreachable"}


OK = ProbeResult(True, None, 0.01, 200)


def fail(reason: Reason) -> ProbeResult:
    return ProbeResult(False, reason, 0.5, None, "x")


def table_of(*names: str) -> ClusterTable:
    table = ClusterTable()
    clusters = tuple(Cluster(n, f"https://{n}.example:6443", "/k/a.yaml", n) for n in names)
    table.apply_discovery(Discovery(clusters, (), fleet_size=len(clusters)), {"/k/a.yaml": True})
    return table


def snapshot(table: ClusterTable) -> Snapshot:
    return build_snapshot(table, (), CycleStats(), CycleSettings(300, 10, 8))


def series(text: bytes, name: str) -> dict[str, str]:
    """``{labels: value}`` of the samples of ``name`` (labels as written)."""
    out = {}
    for line in text.decode().splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name) :].rpartition(" ")
            out[labels] = value
    return out


def test_credential_failures_count_the_refusals_of_the_run_and_reset_on_success() -> None:
    table = table_of("c")
    steps = [
        (fail(Reason.UNAUTHORIZED), 1, 1),
        (fail(Reason.TIMEOUT), 2, 1),
        (fail(Reason.TLS), 3, 2),
        (OK, 0, 0),
        (fail(Reason.CONNECT), 1, 0),
    ]
    for i, (probe, consecutive, credential) in enumerate(steps):
        table.record("c", probe, 1_700_000_000.0 + i)
        state = table.states["c"]
        assert (state.consecutive_failures, state.credential_failures) == (consecutive, credential)
        text = render_metrics(snapshot(table))
        assert series(text, CREDENTIAL_FAILURES) == {'{cluster="c"}': str(credential)}


def test_the_last_failure_reason_is_one_series_per_cluster_and_none_after_a_success() -> None:
    table = table_of("a", "b", "never")
    table.record("a", fail(Reason.UNAUTHORIZED), 1.0)
    table.record("b", fail(Reason.TIMEOUT), 1.0)
    assert series(render_metrics(snapshot(table)), LAST_REASON) == {
        '{cluster="a",reason="unauthorized",class="credentials"}': "1",
        '{cluster="b",reason="timeout",class="unreachable"}': "1",
    }
    # The reason changes: the old series is gone, not kept beside the new one.
    table.record("a", fail(Reason.CONNECT), 2.0)
    table.record("b", OK, 2.0)
    text = render_metrics(snapshot(table))
    assert series(text, LAST_REASON) == {'{cluster="a",reason="connect",class="unreachable"}': "1"}
    assert f"# TYPE {LAST_REASON} gauge\n" in text.decode()


MODES = [
    ("unauthorized", "unauthorized", "credentials"),
    ("forbidden", "unauthorized", "credentials"),
    ("wrong_ca", "tls", "credentials"),
    ("down", "connect", "unreachable"),
    ("hang", "timeout", "unreachable"),
    ("error", "http_error", "unreachable"),
    ("not_ready", "not_ready", "unreachable"),
]


@pytest.mark.live
async def test_each_standin_mode_gives_the_class_of_its_failure(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    for mode, _, _ in MODES:
        await fleet.add_cluster(f"m-{mode}", mode)
    await fleet.add_cluster("m-wrong-name")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    # A server name the server's certificate does not carry: hostname verification fails.
    path = kubeconfig_dir / "k.yaml"
    config = yaml.safe_load(path.read_text())
    for entry in config["clusters"]:
        if entry["name"] == "m-wrong-name":
            entry["cluster"]["tls-server-name"] = "not-this-server.example"
    path.write_text(yaml.safe_dump(config))
    async with make_monitor(probe_timeout=1.0) as (monitor, rec):
        await monitor.run_cycle()
        await monitor.run_cycle()
    got = series(render_metrics(rec.last), LAST_REASON)
    expected = {
        f'{{cluster="m-{mode}",reason="{reason}",class="{klass}"}}': "1"
        for mode, reason, klass in MODES
    }
    expected['{cluster="m-wrong-name",reason="tls",class="credentials"}'] = "1"
    assert got == expected
    refused = {"m-unauthorized", "m-forbidden", "m-wrong_ca", "m-wrong-name"}
    for view in rec.last.clusters:
        assert view.consecutive_failures == 2
        assert view.credential_failures == (2 if view.cluster.name in refused else 0)
    assert monitor.states["m-forbidden"].last.status == 403  # type: ignore[union-attr]


@pytest.mark.live
async def test_a_revoked_token_turns_the_class_to_credentials_and_a_fix_clears_it(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("c")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        assert series(render_metrics(rec.last), LAST_REASON) == {}
        await fleet.set_mode("c", "unauthorized")
        await monitor.run_cycle()
        assert series(render_metrics(rec.last), LAST_REASON) == {
            '{cluster="c",reason="unauthorized",class="credentials"}': "1"
        }
        await fleet.set_mode("c", "ok")
        await monitor.run_cycle()
        text = render_metrics(rec.last)
    assert series(text, LAST_REASON) == {}
    assert series(text, CREDENTIAL_FAILURES) == {'{cluster="c"}': "0"}
