"""Each mode answers as the real failure it imitates; authentication like kube-apiserver."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload import ports
from tests.helpers.kube_status import UNAUTHORIZED

pytestmark = pytest.mark.live

TIMEOUT = aiohttp.ClientTimeout(total=5)


async def get(
    session: aiohttp.ClientSession, url: str, ctx: ssl.SSLContext, token: str | None = None
) -> tuple[int, str, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(url, ssl=ctx, headers=headers) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


async def test_ok_health_endpoints_in_real_formats(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("prod-eu")
    assert cluster.url == f"https://127.0.0.1:{cluster.port}"

    status, ctype, body = await get(session, cluster.url + "/readyz?verbose", cert_ctx)
    assert status == 200 and ctype.startswith("text/plain")
    lines = body.splitlines()
    assert lines[:5] == [
        "[+]ping ok",
        "[+]log ok",
        "[+]etcd ok",
        "[+]etcd-readiness ok",
        "[+]informer-sync ok",
    ]
    assert "[+]poststarthook/start-apiserver-admission-initializer ok" in lines
    assert lines[-2:] == ["[+]shutdown ok", "readyz check passed"]
    assert body.endswith("\n")

    assert await get(session, cluster.url + "/readyz", cert_ctx) == (
        200,
        "text/plain; charset=utf-8",
        "ok",
    )
    for endpoint in ("livez", "healthz"):
        status, _, body = await get(session, f"{cluster.url}/{endpoint}?verbose", cert_ctx)
        assert status == 200 and body.endswith(f"{endpoint} check passed\n")
        assert "[+]etcd ok" in body and "shutdown" not in body
    for path in ("/version", "/version/"):
        status, ctype, body = await get(session, cluster.url + path, cert_ctx)
        version = json.loads(body)
        assert status == 200 and ctype.startswith("application/json")
        assert version["major"] == "1" and version["gitVersion"].startswith("v1.")


async def test_token_auth_and_rejections(
    fleet: StandinFleet, session: aiohttp.ClientSession, ca_ctx: ssl.SSLContext
) -> None:
    one = await fleet.add_cluster("one")
    two = await fleet.add_cluster("two")
    assert one.token != two.token

    assert (await get(session, one.url + "/readyz", ca_ctx, one.token))[0] == 200
    for token in (None, "wrong", two.token, one.token + "x"):
        status, ctype, body = await get(session, one.url + "/readyz", ca_ctx, token)
        assert status == 401 and ctype.startswith("application/json")
        assert json.loads(body) == UNAUTHORIZED


async def test_client_certificate_of_another_ca_is_refused(
    fleet: StandinFleet, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    cluster = await fleet.add_cluster("c")
    async with StandinFleet(tmp_path / "other") as other:
        foreign_client = other.certs.client_context(with_cert=True)
        foreign_client.load_verify_locations(cadata=fleet.certs.ca_pem.decode())
        with pytest.raises(aiohttp.ClientError):
            await get(session, cluster.url + "/readyz", foreign_client)


async def test_error_mode_is_a_plain_500(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c", mode="error")
    status, ctype, body = await get(session, cluster.url + "/readyz", cert_ctx)
    assert (status, body) == (500, "Internal Server Error\n")
    assert ctype.startswith("text/plain")


async def test_not_ready_mode_fails_readyz_with_etcd_withheld(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c", mode="not_ready")
    for query in ("", "?verbose"):
        status, _, body = await get(session, cluster.url + "/readyz" + query, cert_ctx)
        assert status == 500
        assert "[-]etcd failed: reason withheld\n" in body
        assert "[-]etcd-readiness failed: reason withheld\n" in body
        assert "[+]ping ok\n" in body
        assert body.splitlines()[-1] == "readyz check failed"
    # The process is alive: liveness still passes.
    assert (await get(session, cluster.url + "/livez", cert_ctx))[:1] == (200,)


async def test_unauthorized_mode_refuses_good_credentials(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c", mode="unauthorized")
    status, _, body = await get(session, cluster.url + "/readyz", cert_ctx, cluster.token)
    assert status == 401 and json.loads(body)["reason"] == "Unauthorized"


async def test_wrong_ca_mode_fails_verification_but_serves_insecure_clients(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c")
    port = cluster.port
    await fleet.set_mode("c", "wrong_ca")
    assert cluster.port == port
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await get(session, cluster.url + "/readyz", cert_ctx)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    assert (await get(session, cluster.url + "/readyz", insecure, cluster.token))[0] == 200
    await fleet.set_mode("c", "ok")
    assert (await get(session, cluster.url + "/readyz", cert_ctx))[0] == 200


async def test_down_refuses_connections_and_up_keeps_the_port(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c")
    port = cluster.port
    # One keep-alive session throughout: a pooled connection must not hide the outage.
    async with aiohttp.ClientSession(timeout=TIMEOUT) as pooled:
        assert (await get(pooled, cluster.url + "/readyz", cert_ctx))[0] == 200
        await fleet.set_mode("c", "down")
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(pooled, cluster.url + "/readyz", cert_ctx)
        with pytest.raises(aiohttp.ClientConnectorError):
            await get(pooled, cluster.url + "/readyz", cert_ctx)
        await fleet.set_mode("c", "ok")
        assert cluster.port == port
        assert (await get(pooled, cluster.url + "/readyz", cert_ctx))[0] == 200


async def test_a_down_clusters_port_cannot_be_taken_by_another_fleet(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    """Another fleet picking ports must not take the port of a cluster that is down: the
    clients of the down cluster would then meet a stranger's certificate."""
    cluster = await fleet.add_cluster("held")
    await fleet.set_mode("held", "down")
    with pytest.raises(OSError):
        ports.claim(cluster.port).close()
    await fleet.set_mode("held", "ok")
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        assert (await get(session, cluster.url + "/readyz", cert_ctx))[0] == 200


async def test_cluster_added_down_listens_when_brought_up(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("late", mode="down")
    assert cluster.port > 0
    with pytest.raises(aiohttp.ClientConnectorError):
        await get(session, cluster.url + "/readyz", cert_ctx)
    await fleet.set_mode("late", "ok")
    assert (await get(session, cluster.url + "/readyz", cert_ctx))[0] == 200


async def test_hang_never_answers_and_does_not_block_stop(tmp_path: Path) -> None:
    fleet = await StandinFleet(tmp_path / "hang").start()
    cluster = await fleet.add_cluster("stuck", mode="hang")
    healthy = await fleet.add_cluster("fine")
    ctx = fleet.certs.client_context()
    async with aiohttp.ClientSession() as session:
        # A client that gives up: nothing arrives before its deadline.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(get(session, cluster.url + "/readyz", ctx), 0.3)
        # The hung cluster does not hold up the others.
        assert (await get(session, healthy.url + "/readyz", ctx))[0] == 200
        # A client still waiting when the fleet stops is released by the stop.
        waiting = asyncio.ensure_future(get(session, cluster.url + "/readyz", ctx))
        await _until(lambda: cluster.requests >= 2)
        await asyncio.wait_for(fleet.stop(), 5)
        with pytest.raises(aiohttp.ClientError):
            await asyncio.wait_for(waiting, 5)


async def test_requests_are_counted_per_cluster(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    probed = await fleet.add_cluster("probed")
    await fleet.add_cluster("idle")
    for _ in range(3):
        await get(session, probed.url + "/readyz", cert_ctx)
    assert fleet.requests("probed") == 3
    assert fleet.requests("idle") == 0


async def test_bad_input_is_refused_and_changes_nothing(fleet: StandinFleet) -> None:
    await fleet.add_cluster("c")
    with pytest.raises(ValueError, match="unknown mode 'sideways'"):
        await fleet.set_mode("c", "sideways")
    assert fleet.cluster("c").mode == "ok"
    with pytest.raises(ValueError, match="exists already"):
        await fleet.add_cluster("c")
    with pytest.raises(ValueError, match="must match"):
        await fleet.add_cluster("../evil")
    with pytest.raises(KeyError, match="no stand-in cluster named 'nope'"):
        await fleet.set_mode("nope", "down")
    assert list(fleet.clusters) == ["c"]
    assert "token" not in repr(fleet.cluster("c")).lower()


async def test_unknown_path_is_a_404_status(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("c")
    status, _, body = await get(session, cluster.url + "/apis/nothing", cert_ctx)
    assert status == 404 and json.loads(body)["reason"] == "NotFound"


async def _until(predicate: Callable[[], bool], attempts: int = 500) -> None:
    """Poll ``predicate`` every 10 ms, at most ``attempts`` times."""
    for _ in range(attempts):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def test_frozen_accepts_tcp_but_never_answers_the_handshake(
    fleet: StandinFleet, session: aiohttp.ClientSession, cert_ctx: ssl.SSLContext
) -> None:
    cluster = await fleet.add_cluster("stopped", mode="frozen")
    # TCP is accepted, as a stopped process's backlog accepts it ...
    _, writer = await asyncio.open_connection("127.0.0.1", cluster.port)
    writer.close()
    # ... but no TLS handshake completes: the client's own deadline ends it.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", cluster.port, ssl=cert_ctx, server_hostname="localhost"
            ),
            0.5,
        )
    # Started again: new handshakes are answered (the ones it never served are reset).
    await fleet.set_mode("stopped", "ok")
    assert (await get(session, cluster.url + "/readyz", cert_ctx))[0] == 200
    assert cluster.requests == 1


async def test_forbidden_mode_authenticates_then_refuses_every_path(
    fleet: StandinFleet,
    session: aiohttp.ClientSession,
    cert_ctx: ssl.SSLContext,
    ca_ctx: ssl.SSLContext,
) -> None:
    cluster = await fleet.add_cluster("c", mode="forbidden")
    status, _, body = await get(session, cluster.url + "/readyz?verbose", cert_ctx, cluster.token)
    answer = json.loads(body)
    assert (status, answer["reason"], answer["code"]) == (403, "Forbidden", 403)
    assert answer["message"].endswith('cannot get path "/readyz"')
    # Authentication comes first: a wrong token is still 401, not 403.
    assert (await get(session, cluster.url + "/readyz", ca_ctx, "wrong"))[0] == 401
    assert (await get(session, cluster.url + "/version", ca_ctx, cluster.token))[0] == 403
    await fleet.set_mode("c", "ok")
    assert (await get(session, cluster.url + "/readyz", cert_ctx, cluster.token))[0] == 200
