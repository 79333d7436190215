"""A cluster cut off from one watcher's client certificate, and only from that one."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload.control import create_app

pytestmark = pytest.mark.live


async def _status(session: aiohttp.ClientSession, url: str, ctx: ssl.SSLContext) -> int:
    async with session.get(url + "/readyz", ssl=ctx) as resp:
        return resp.status


async def test_a_blocked_certificate_hangs_while_others_are_answered(
    fleet: StandinFleet, session: aiohttp.ClientSession
) -> None:
    cluster = await fleet.add_cluster("split")
    a, b = fleet.issue_client("exporter-a"), fleet.issue_client("exporter-b")
    ctx_a = fleet.certs.client_context(client=a)
    ctx_b = fleet.certs.client_context(client=b)
    assert await _status(session, cluster.url, ctx_a) == 200

    await fleet.set_blocked_clients("split", ["exporter-a"])
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(_status(session, cluster.url, ctx_a), 0.5)
    assert await _status(session, cluster.url, ctx_b) == 200
    # The fleet's own certificate and bearer tokens are untouched.
    assert await _status(session, cluster.url, fleet.certs.client_context()) == 200

    await fleet.set_blocked_clients("split", [])
    assert await _status(session, cluster.url, ctx_a) == 200


async def test_each_watcher_gets_its_own_identity_in_its_kubeconfig(
    fleet: StandinFleet, tmp_path: Path
) -> None:
    folder = tmp_path
    await fleet.add_cluster("c1")
    a = fleet.issue_client("exporter-a")
    doc = yaml.safe_load(fleet.write_kubeconfig(folder / "a.yaml", client=a).read_text())
    user = doc["users"][0]["user"]
    assert (
        user["client-certificate-data"]
        != yaml.safe_load(fleet.write_kubeconfig(folder / "default.yaml").read_text())["users"][0][
            "user"
        ]["client-certificate-data"]
    )
    files = yaml.safe_load(
        fleet.write_kubeconfig(
            folder / "f.yaml", client=a, credential="client_cert_files"
        ).read_text()
    )["users"][0]["user"]
    assert files == {"client-certificate": str(a.cert_file), "client-key": str(a.key_file)}
    assert oct(a.key_file.stat().st_mode & 0o777) == "0o600"
    assert "PRIVATE" not in repr(a)
    with pytest.raises(ValueError, match="must match"):
        fleet.issue_client("../evil")


async def test_control_api_sets_and_shows_blocked_clients(fleet: StandinFleet) -> None:
    await fleet.add_cluster("c1")
    async with TestClient(TestServer(create_app(fleet))) as client:
        url = "/clusters/c1/blocked-clients"
        resp = await client.put(url, json={"common_names": ["exporter-b"]})
        assert (resp.status, await resp.json()) == (
            200,
            {"name": "c1", "common_names": ["exporter-b"]},
        )
        assert (await (await client.get(url)).json())["common_names"] == ["exporter-b"]
        bad_bodies: list[object] = [{"common_names": "x"}, {"names": []}, {"common_names": ["a b"]}]
        for bad in bad_bodies:
            assert (await client.put(url, json=bad)).status == 400
        assert (
            await client.put("/clusters/nope/blocked-clients", json={"common_names": []})
        ).status == 404
        assert fleet.cluster("c1").blocked_clients == frozenset({"exporter-b"})
