"""The HTTP side against a real cycle: /metrics, gzip, promtool, no secrets, the seam."""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.expose.render import render_metrics
from exporter.expose.snapshot import Snapshot
from exporter.model import CheckResult, MetricFamily, ProbeResult, Sample, TargetGroup
from exporter.net import ApiClient
from exporter.server import MONITOR, create_app
from exporter.settings import ExporterSettings
from fleetwatch.discovery import Cluster
from fleetwatch.standin import StandinFleet

ClientFactory = Callable[[web.Application], Any]


def settings(kubeconfig_dir: Path) -> ExporterSettings:
    return ExporterSettings(
        kubeconfig_path=None, kubeconfig_dir=kubeconfig_dir, interval=60, timeout=1
    )


async def scrape(client: TestClient[Any, Any], gzip_ok: bool = False) -> str:
    headers = {"Accept-Encoding": "gzip" if gzip_ok else "identity"}
    resp = await client.get("/metrics", headers=headers, auto_decompress=False)
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    body = await resp.read()
    if gzip_ok:
        assert resp.headers["Content-Encoding"] == "gzip"
        body = gzip.decompress(body)
    return body.decode()


async def served(
    kubeconfig_dir: Path, aiohttp_client: ClientFactory, **options: Any
) -> tuple[web.Application, TestClient[Any, Any]]:
    """The exporter's app on ``kubeconfig_dir`` (the test runs its cycles), and a client."""
    app = create_app(settings(kubeconfig_dir), run_loop=False, **options)
    return app, await aiohttp_client(app)


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
async def mixed_fleet(fleet: StandinFleet, kubeconfig_dir: Path) -> StandinFleet:
    await fleet.add_cluster("good")
    await fleet.add_cluster("broken", "not_ready")
    await fleet.add_cluster("tok", "unauthorized")
    fleet.write_kubeconfig(kubeconfig_dir / "certs.yaml", ["good", "broken"])
    fleet.write_kubeconfig(kubeconfig_dir / "tokens.yaml", ["tok"], credential="token")
    (kubeconfig_dir / "bad.yaml").write_text("{{ not yaml")
    return fleet


@pytest.mark.live
async def test_metrics_after_a_cycle(
    mixed_fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: ClientFactory
) -> None:
    app, client = await served(kubeconfig_dir, aiohttp_client)
    before = samples(await scrape(client))
    assert key("fleetwatch_exporter_cycles_total") in before
    await app[MONITOR].run_cycle()
    await app[MONITOR].run_cycle()
    got = samples(await scrape(client, gzip_ok=True))
    source = str(kubeconfig_dir / "certs.yaml")
    endpoint = mixed_fleet.cluster("good").url
    info = ("cluster", "good"), ("endpoint", endpoint), ("source", source)
    assert got[("fleetwatch_cluster_info", info)] == 1
    assert got[key("fleetwatch_cluster_probe_success", cluster="good")] == 1
    assert got[key("fleetwatch_cluster_probe_success", cluster="broken")] == 0
    assert got[key("fleetwatch_cluster_probe_consecutive_failures", cluster="broken")] == 2
    failures = "fleetwatch_cluster_probe_failures_total"
    assert got[key(failures, cluster="broken", reason="not_ready")] == 2
    assert got[key(failures, cluster="tok", reason="unauthorized")] == 2
    assert (
        got[key("fleetwatch_cluster_probe_last_success_timestamp_seconds", cluster="broken")] == 0
    )
    assert got[key("fleetwatch_cluster_probeable", cluster="good")] == 1
    assert got[key("fleetwatch_exporter_clusters_discovered")] == 3
    assert got[key("fleetwatch_exporter_discovery_errors_total")] == 1  # once, not per cycle
    assert got[key("fleetwatch_exporter_cycles_total")] == 2
    assert got[key("fleetwatch_exporter_cycle_duration_seconds")] > 0
    health = await client.get("/healthz")
    assert health.status == 200
    sd = await client.get("/sd/control-plane")
    assert (sd.status, await sd.json()) == (200, [])


@pytest.mark.live
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
async def test_promtool_check_metrics_on_a_real_scrape(
    mixed_fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: ClientFactory
) -> None:
    app, client = await served(kubeconfig_dir, aiohttp_client, checks=[VersionCheck()])
    await app[MONITOR].run_cycle()
    text = await scrape(client)
    result = await asyncio.to_thread(
        subprocess.run,
        ["promtool", "check", "metrics"],
        input=text.encode(),
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert result.stdout.decode() + result.stderr.decode() == ""


@pytest.mark.live
async def test_no_credential_in_metrics_or_logs(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    aiohttp_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    await fleet.add_cluster("t-ok")
    await fleet.add_cluster("t-unauth", "unauthorized")
    await fleet.add_cluster("c-err", "error")
    await fleet.add_cluster("x-tok", "ok")
    fleet.write_kubeconfig(kubeconfig_dir / "t.yaml", ["t-ok", "t-unauth"], credential="token")
    fleet.write_kubeconfig(kubeconfig_dir / "c.yaml", ["c-err"], credential="client_cert_data")
    fleet.write_kubeconfig(kubeconfig_dir / "x.yaml", ["x-tok"], credential="exec_token")
    # a broken file holding a token on the faulty line
    token = fleet.cluster("t-ok").token
    (kubeconfig_dir / "z.yaml").write_text(f"users:\n- token: {token}\n  : [\n")
    app, client = await served(kubeconfig_dir, aiohttp_client)
    await app[MONITOR].run_cycle()
    text = await scrape(client)
    certs = fleet.certs
    secrets = [c.token for c in fleet.clusters.values()]
    secrets += [base64.b64encode(certs.client_key_pem).decode()[:40]]
    secrets += [base64.b64encode(certs.client_cert_pem).decode()[:40]]
    secrets += [certs.client_key_pem.decode().splitlines()[1]]
    logs = caplog.text
    assert "t-unauth" in logs and "z.yaml" in logs  # the failures were logged...
    for secret in secrets:
        assert secret not in text
        assert secret not in logs  # ...without what they failed with


class VersionCheck:
    """A real check through the seam: asks the API server its version."""

    name = "version"
    families: Sequence[MetricFamily] = (
        MetricFamily("fleetwatch_test_apiserver_minor", "gauge", 'Minor version \\ of "it".'),
    )

    async def run(self, cluster: Cluster, api: ApiClient, probe: ProbeResult) -> CheckResult | None:
        if not probe.success:
            raise RuntimeError("no API")
        version = await api.get_json("/version", 1.0)
        return CheckResult(
            samples=(
                Sample(
                    "fleetwatch_test_apiserver_minor",
                    float(version["minor"]),
                    {"git": version["gitVersion"]},
                ),
            ),
            targets=(TargetGroup(("127.0.0.1:10259",), {"component": "kube-scheduler"}),),
        )


@pytest.mark.live
async def test_extension_seam_renders_check_results(
    mixed_fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: ClientFactory
) -> None:
    extra = web.RouteTableDef()

    @extra.get("/extra")
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="mounted")

    app, client = await served(
        kubeconfig_dir, aiohttp_client, checks=[VersionCheck()], routes=list(extra)
    )
    await app[MONITOR].run_cycle()
    got = samples(await scrape(client))
    assert got[key("fleetwatch_test_apiserver_minor", cluster="good", git="v1.30.2")] == 30
    assert got[key("fleetwatch_exporter_check_errors_total", check="version")] == 2
    sd = await (await client.get("/sd/control-plane")).json()
    assert sd == [
        {
            "targets": ["127.0.0.1:10259"],
            "labels": {"cluster": "good", "component": "kube-scheduler"},
        }
    ]
    assert await (await client.get("/extra")).text() == "mounted"


@pytest.mark.live
@pytest.mark.parametrize("path", ["/metrics", "/sd/control-plane"])
async def test_gzip_plain_and_head_give_the_same_body(
    path: str, mixed_fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: ClientFactory
) -> None:
    """The bodies are kept gzipped only: a client without gzip gets them decompressed."""
    app, client = await served(kubeconfig_dir, aiohttp_client, checks=[VersionCheck()])
    await app[MONITOR].run_cycle()
    plain = await client.get(path, headers={"Accept-Encoding": "identity"}, auto_decompress=False)
    body = await plain.read()
    assert plain.status == 200 and "Content-Encoding" not in plain.headers
    assert plain.headers["Content-Length"] == str(len(body)) and b"good" in body
    zipped = await client.get(path, headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(await zipped.read()) == body
    for response in (plain, zipped):
        assert response.headers["Vary"] == "Accept-Encoding"
    assert plain.headers["Content-Type"] == zipped.headers["Content-Type"]
    head = await client.head(path, headers={"Accept-Encoding": "identity"})
    assert head.status == 200 and head.headers["Content-Length"] == str(len(body))
    assert await head.read() == b""


def test_exposition_escapes_label_values() -> None:
    odd = 'we"ird\\name\nx'
    snap = Snapshot(
        clusters=(),
        check_families=(),
        check_errors=((odd, 1),),
        discovery_errors_total=0,
        cycles_total=0,
        cycle_duration=0.25,
        last_cycle_end=0.0,
        interval=300,
        timeout=10,
    )
    text = render_metrics(snap).decode()
    got = samples(text)
    assert got[key("fleetwatch_exporter_check_errors_total", check=odd)] == 1
    assert got[key("fleetwatch_exporter_cycle_duration_seconds")] == 0.25


#: The families of the metrics table of docs/exporter.md, in order (checked both ways below).
DOCUMENTED_FAMILIES = [
    ("fleetwatch_cluster_info", "gauge"),
    ("fleetwatch_cluster_probeable", "gauge"),
    ("fleetwatch_cluster_probe_success", "gauge"),
    ("fleetwatch_cluster_probe_duration_seconds", "gauge"),
    ("fleetwatch_cluster_probe_consecutive_failures", "gauge"),
    ("fleetwatch_cluster_probe_last_success_timestamp_seconds", "gauge"),
    ("fleetwatch_cluster_probe_failures", "counter"),
    ("fleetwatch_cluster_probe_last_failure_reason", "gauge"),
    ("fleetwatch_cluster_probe_consecutive_credential_failures", "gauge"),
    ("fleetwatch_exporter_clusters_discovered", "gauge"),
    ("fleetwatch_exporter_discovery_errors", "counter"),
    ("fleetwatch_exporter_cycle_duration_seconds", "gauge"),
    ("fleetwatch_exporter_cycles", "counter"),
    ("fleetwatch_exporter_last_cycle_timestamp_seconds", "gauge"),
    ("fleetwatch_exporter_probe_interval_seconds", "gauge"),
    ("fleetwatch_exporter_probe_timeout_seconds", "gauge"),
    ("fleetwatch_exporter_shard", "gauge"),
    ("fleetwatch_exporter_shards", "gauge"),
    ("fleetwatch_exporter_fleet_clusters", "gauge"),
    ("fleetwatch_build_info", "gauge"),
    ("fleetwatch_exporter_event_loop_lag_seconds", "summary"),
]


@pytest.mark.live
async def test_scrape_has_exactly_the_documented_families(
    mixed_fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: ClientFactory
) -> None:
    app, client = await served(kubeconfig_dir, aiohttp_client)
    await app[MONITOR].run_cycle()
    families = [
        (f.name, f.type)
        for f in text_string_to_metric_families(await scrape(client))
        # prometheus_client's process and Python collectors: documented as a group
        if not f.name.startswith(("process_", "python_"))
    ]
    assert families == DOCUMENTED_FAMILIES


def documented_table(doc: Path) -> list[tuple[str, str]]:
    """(name, type) of each row of the table under the page's "## Metrics" heading.

    Counters lose their ``_total``, as the parser names the families of a scrape.
    """
    lines = doc.read_text().splitlines()
    start = lines.index("## Metrics")
    rows: list[tuple[str, str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 1:
            name = cells[0].strip("`")
            rows.append((name.removesuffix("_total") if cells[1] == "counter" else name, cells[1]))
    return rows


def test_the_documented_metrics_table_is_the_scrape() -> None:
    """docs/exporter.md lists what the scrape above serves, in the same order, nothing more.

    ``fleetwatch_exporter_check_errors_total`` has a series only once a check failed (see
    test_exposition_escapes_label_values), so a fleet without checks does not serve it;
    ``fleetwatch_cluster_labels`` only with ``--metric-labels-allowlist``.
    """
    doc = Path(__file__).resolve().parents[2] / "docs" / "exporter.md"
    assert documented_table(doc) == [
        *DOCUMENTED_FAMILIES,
        ("fleetwatch_exporter_check_errors", "counter"),
        # only with --metric-labels-allowlist (tests/exporter/test_exporter_labels.py)
        ("fleetwatch_cluster_labels", "gauge"),
    ]


@pytest.mark.live
async def test_background_loop_runs_cycles_and_stops_with_the_app(
    mixed_fleet: StandinFleet, kubeconfig_dir: Path, aiohttp_client: ClientFactory
) -> None:
    fast = ExporterSettings(
        kubeconfig_path=None, kubeconfig_dir=kubeconfig_dir, interval=0.2, timeout=0.2
    )
    app = create_app(fast)
    client = await aiohttp_client(app)

    async def cycles() -> float:
        return samples(await scrape(client))[key("fleetwatch_exporter_cycles_total")]

    deadline = asyncio.get_running_loop().time() + 10
    while await cycles() < 2:
        assert asyncio.get_running_loop().time() < deadline, "the loop did not run two cycles"
        await asyncio.sleep(0.05)  # polling with a deadline
    await client.close()
    tasks = [t for t in asyncio.all_tasks() if t.get_name() == "fleetwatch probe loop"]
    assert tasks == []
