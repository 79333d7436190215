"""``http_server_config`` and ``client_allowed_sans`` of ``--web.config.file``, served.

A real HTTPS server on loopback (the exporter's application in process, behind aiohttp's
TLS site) with certificates minted here: clients presenting a certificate whose SANs name
an allowed identity are answered, others get 403 before any handler runs; the configured
headers are on every answer, a 401, a 403 and the streamed ``/metrics`` included.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import bcrypt
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from exporter.server import create_app
from exporter.settings import ExporterSettings
from fleetwatch.common import basicauth
from fleetwatch.common.webconfig import parse_web_config, server_ssl_context
from fleetwatch.procs import free_port

Mint = Callable[[str, list[x509.GeneralName]], tuple[Path, Path]]
PASSWORD = "scrape-s3cret"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()


def test_headers_and_allowed_sans_are_read_and_http2_accepted() -> None:
    config = parse_web_config(
        "tls_server_config:\n"
        "  cert_file: s.crt\n  key_file: s.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        "  client_allowed_sans: [prometheus.monitoring.svc, '::1']\n"
        "http_server_config:\n  http2: true\n"
        "  headers: {Strict-Transport-Security: max-age=31536000, X-Frame-Options: deny}\n",
        base=Path("/etc/fw"),
    )
    assert config.tls is not None
    assert config.tls.client_allowed_sans == ("prometheus.monitoring.svc", "::1")
    assert config.headers == {
        "Strict-Transport-Security": "max-age=31536000",
        "X-Frame-Options": "deny",
    }


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@pytest.fixture
def pki(tmp_path: Path) -> tuple[Path, Mint]:
    """A CA (its file) and a function minting a certificate + key signed by it."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)

    def build(subject: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(_name("webguard-ca"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
        )

    ca = (
        build(_name("webguard-ca"), ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def mint(name: str, sans: list[x509.GeneralName]) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            build(_name(name), key)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        cert_file, key_file = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_file, key_file

    return ca_file, mint


@pytest.fixture
async def server(tmp_path: Path, pki: tuple[Path, Mint]) -> AsyncIterator[str]:
    _, mint = pki
    mint("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    (tmp_path / "web.yml").write_text(
        "tls_server_config:\n"
        "  cert_file: server.crt\n  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        "  client_allowed_sans: [prometheus.monitoring.svc, 'spiffe://cluster.local/ns/m/sa/p']\n"
        "http_server_config:\n"
        "  headers:\n"
        "    Strict-Transport-Security: max-age=31536000\n"
        "    X-Content-Type-Options: nosniff\n"
        f"basic_auth_users: {{prometheus: '{HASH}'}}\n"
    )
    config = parse_web_config((tmp_path / "web.yml").read_text(), base=tmp_path)
    assert config.tls is not None
    app = create_app(ExporterSettings(interval=60, timeout=2), run_loop=False, web_config=config)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=server_ssl_context(config.tls))
    await site.start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def client(ca_file: Path, cert: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    ctx.load_cert_chain(*cert)
    return ctx


def get(url: str, ctx: ssl.SSLContext, password: str | None) -> tuple[int, dict[str, str]]:
    headers = {}
    if password is not None:
        raw = base64.b64encode(f"prometheus:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {raw}"
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10, context=ctx
        ) as answer:
            answer.read()
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


@pytest.mark.live
async def test_only_allowed_sans_are_answered_and_headers_are_on_every_answer(
    server: str, pki: tuple[Path, Mint]
) -> None:
    ca_file, mint = pki
    allowed_dns = client(ca_file, mint("prom", [x509.DNSName("prometheus.monitoring.svc")]))
    allowed_uri = client(
        ca_file,
        mint("spiffe", [x509.UniformResourceIdentifier("spiffe://cluster.local/ns/m/sa/p")]),
    )
    other = client(ca_file, mint("other", [x509.DNSName("intruder.example")]))
    none = client(ca_file, mint("bare", [x509.IPAddress(ipaddress.ip_address("127.0.0.9"))]))

    async def ask(ctx: ssl.SSLContext, path: str, pw: str | None) -> tuple[int, dict[str, str]]:
        return await asyncio.to_thread(get, server + path, ctx, pw)

    for ctx in (allowed_dns, allowed_uri):
        status, headers = await ask(ctx, "/metrics", PASSWORD)
        assert status == 200
        assert headers["Strict-Transport-Security"] == "max-age=31536000"
        assert headers["X-Content-Type-Options"] == "nosniff"
        status, headers = await ask(ctx, "/metrics", "wrong")
        assert status == 401  # the SAN passes, the password is still asked
        assert headers["Strict-Transport-Security"] == "max-age=31536000"
    for ctx in (other, none):
        status, headers = await ask(ctx, "/metrics", PASSWORD)
        assert status == 403  # the right password does not help a certificate not allowed
        assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.live
async def test_a_flood_of_wrong_passwords_does_not_hold_up_a_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a flood of wrong passwords pushed the scraper's pair out of the one cache of
    checked pairs, so each correct scrape waited 2.8-3.0 s behind the flood's bcrypt checks.
    Asserted as what happens, not how fast (``bench.auth_flood`` times it): the right
    password is bcrypt-checked once however many wrong ones are checked between its
    scrapes, and a scrape is answered while a bcrypt check is stuck."""
    import threading

    # Every bcrypt check, counted; while ``flowing`` is clear, a check waits for it.
    checked: list[bytes] = []
    flowing, stuck = threading.Event(), threading.Event()
    flowing.set()
    real_check = basicauth._bcrypt_ok

    def counted_check(password: bytes, hashed: bytes | None) -> bool:
        checked.append(password)
        if not flowing.is_set():
            stuck.set()
            flowing.wait(60)
        return real_check(password, hashed)

    monkeypatch.setattr(basicauth, "_bcrypt_ok", counted_check)
    # The lowest cost: what is asserted is which checks run, not how long they take.
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    config = parse_web_config(f"basic_auth_users: {{prometheus: '{hashed}'}}\n", base=tmp_path)
    app = create_app(ExporterSettings(interval=60, timeout=2), run_loop=False, web_config=config)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}/metrics"
    plain = ssl.create_default_context()  # unused for http, keeps get()'s signature
    stop = threading.Event()
    threads: list[threading.Thread] = []

    # 16 threads keep the 8 places of the queue full (40 only slow the test: they contend
    # for the GIL with the server they flood, in this one process).
    sent = [0] * 16

    def flood(n: int) -> None:
        while not stop.is_set():
            get(url, plain, f"wrong-{n}-{sent[n]}")
            sent[n] += 1

    async def flood_checked(more: int) -> None:
        """Until ``more`` of the flood's pairs were bcrypt-checked (and so remembered)."""
        goal, deadline = len(checked) + more, time.monotonic() + 120
        while len(checked) < goal:
            assert time.monotonic() < deadline, "the flood stalled"
            await asyncio.sleep(0.05)

    try:
        assert (await asyncio.to_thread(get, url, plain, PASSWORD))[0] == 200  # checked once
        threads += [
            threading.Thread(target=flood, args=(n,), daemon=True) for n in range(len(sent))
        ]
        for thread in threads:
            thread.start()
        for _ in range(3):
            # As between two scrapes of a real Prometheus: more wrong pairs than the 100
            # remembered are checked in between.
            await flood_checked(basicauth.CACHE_SIZE + 50)
            assert (await asyncio.to_thread(get, url, plain, PASSWORD))[0] == 200
        assert checked.count(PASSWORD.encode()) == 1, "the flood pushed the right pair out"
        # A bcrypt check stuck: a scrape is answered all the same (get() gives up in 10 s).
        flowing.clear()
        deadline = time.monotonic() + 60
        while not stuck.is_set():
            assert time.monotonic() < deadline, "no check of the flood's came"
            await asyncio.sleep(0.02)
        assert (await asyncio.to_thread(get, url, plain, PASSWORD))[0] == 200
        assert not flowing.is_set() and checked.count(PASSWORD.encode()) == 1
    finally:
        flowing.set()
        stop.set()
        for thread in threads:  # joined off the loop: their last requests need it
            await asyncio.to_thread(thread.join, 10)
        await runner.cleanup()
