"""``--web.config.file`` parsing and basic auth (``fleetwatch.common.webconfig``,
``fleetwatch.common.basicauth``),
without a server process.

Each invalid file is paired with the message a user gets, as exporter-toolkit's own tests
do; the TLS contexts are built from real certificates (``fleetwatch.standin.workload.certs``).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from pathlib import Path

import bcrypt
import pytest

from fleetwatch.common.basicauth import BasicAuth, parse_basic
from fleetwatch.common.webconfig import (
    ReloadingTLS,
    TLSServerConfig,
    WebConfigError,
    load_web_config,
    parse_web_config,
    server_ssl_context,
)
from fleetwatch.standin.workload.certs import FleetCerts

#: Cost 4, the least bcrypt allows: these tests check answers, not the cost.
HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_config: {}\n", "unknown key tls_config; expected one of basic_auth_users"),
        ("http_server_config: {http1: false}\n", "unknown key http_server_config.http1"),
        ("http_server_config: {http2: maybe}\n", "http_server_config.http2 must be true or"),
        (
            "http_server_config: {headers: {Server: fleetwatch}}\n",
            "headers: 'Server' can not be configured; expected one of Strict-Transport",
        ),
        (
            "http_server_config: {headers: {X-Frame-Options: DENY}}\n",
            "headers.X-Frame-Options 'DENY': expected one of deny, sameorigin",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, client_allowed_sans: [x]}\n",
            "client_allowed_sans needs client_auth_type RequireAndVerifyClientCert",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, client_allowed_sans: x}\n",
            "client_allowed_sans must be a list of names",
        ),
        ("tls_server_config: {cert_file: a}\n", "tls_server_config.key_file is missing"),
        ("tls_server_config: {key_file: a}\n", "tls_server_config.cert_file is missing"),
        (
            "tls_server_config: {cert_file: a, key_file: b, cipher_suites: [x]}\n",
            "tls_server_config.cipher_suites is an exporter-toolkit setting",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, certfile: c}\n",
            "unknown key tls_server_config.certfile",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, client_ca_file: c}\n",
            "client_ca_file is set but client_auth_type is NoClientCert",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, "
            "client_auth_type: RequireAndVerifyClientCert}\n",
            "RequireAndVerifyClientCert needs client_ca_file",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, client_auth_type: RequestClientCert}\n",
            "RequestClientCert is not supported",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, client_auth_type: Always}\n",
            "client_auth_type 'Always': expected one of NoClientCert",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, min_version: TLS14}\n",
            "min_version 'TLS14': expected one of TLS10",
        ),
        (
            "tls_server_config: {cert_file: a, key_file: b, min_version: TLS13, "
            "max_version: TLS12}\n",
            "min_version is above max_version",
        ),
        ("basic_auth_users: {alice: hunter2}\n", "basic_auth_users.alice is not a bcrypt hash"),
        ("basic_auth_users: {alice: 42}\n", "basic_auth_users.alice must be a string"),
        ("basic_auth_users: [alice]\n", "basic_auth_users must be a mapping"),
        ("- 1\n", "the file must be a mapping"),
        ("a: [\n", "not YAML"),
    ],
)
def test_an_invalid_file_is_refused_with_its_reason(text: str, message: str) -> None:
    with pytest.raises(WebConfigError) as err:
        parse_web_config(text, base=Path("/etc/fw"), source="web.yml")
    assert str(err.value).startswith("web.yml: "), err.value
    assert message in str(err.value)


def test_a_password_never_appears_in_a_message() -> None:
    with pytest.raises(WebConfigError) as err:
        parse_web_config("basic_auth_users: {alice: hunter2}\n", base=Path("."))
    assert "hunter2" not in str(err.value)


def test_paths_are_relative_to_the_file_and_defaults_are_toolkits(tmp_path: Path) -> None:
    config = parse_web_config(
        f"tls_server_config:\n  cert_file: tls/a.crt\n  key_file: /abs/a.key\n"
        f"basic_auth_users:\n  prometheus: '{HASH}'\n",
        base=tmp_path,
    )
    assert config.tls is not None
    assert config.tls.cert_file == tmp_path / "tls" / "a.crt"
    assert config.tls.key_file == Path("/abs/a.key")
    assert (config.tls.client_auth_type, config.tls.min_version) == ("NoClientCert", "TLS12")
    assert config.users == {"prometheus": HASH.encode()}


def test_an_empty_file_or_empty_tls_section_means_plain_http() -> None:
    assert parse_web_config("", base=Path(".")).tls is None
    config = parse_web_config("tls_server_config: {}\n", base=Path("."))
    assert config.tls is None and not config.users


def test_tls_files_are_loaded_when_the_file_is(tmp_path: Path) -> None:
    certs = FleetCerts.create(tmp_path / "pki").files
    good = tmp_path / "web.yml"
    good.write_text(
        f"tls_server_config:\n  cert_file: {certs.server_cert}\n  key_file: {certs.server_key}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.ca_cert}\n"
        "  min_version: TLS13\n"
    )
    config = load_web_config(good)
    assert config.tls is not None
    ctx = server_ssl_context(config.tls)
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3

    swapped = tmp_path / "swapped.yml"  # the key of another certificate
    swapped.write_text(
        f"tls_server_config:\n  cert_file: {certs.server_cert}\n  key_file: {certs.client_key}\n"
    )
    with pytest.raises(WebConfigError, match=r"cert_file .* key_file"):
        load_web_config(swapped)
    missing = tmp_path / "missing.yml"
    missing.write_text("tls_server_config: {cert_file: nope.crt, key_file: nope.key}\n")
    with pytest.raises(WebConfigError, match="No such file"):
        load_web_config(missing)
    with pytest.raises(WebConfigError, match="No such file"):
        load_web_config(tmp_path / "absent.yml")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (basic("alice", "pw:with:colons"), ("alice", "pw:with:colons")),
        ("basic " + base64.b64encode(b"bob:").decode(), ("bob", "")),
        ("Bearer abc", None),
        ("Basic !!!", None),
        ("Basic caf\u00e9", None),  # not ASCII
        ("Basic \udcff", None),  # a header byte that is not UTF-8, as aiohttp hands it over
        ("Basic " + base64.b64encode(b"\xff:\xfe").decode(), None),  # not UTF-8 inside
        ("Basic " + base64.b64encode(b"no-colon").decode(), None),
        ("", None),
    ],
)
def test_basic_header_parsing(header: str, expected: tuple[str, str] | None) -> None:
    assert parse_basic(header) == expected


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_checked_pair_is_remembered_until_its_time_is_up() -> None:
    clock = Clock()
    auth = BasicAuth({"prometheus": HASH.encode()}, ttl_s=60, clock=clock)
    assert await auth.check(basic("prometheus", "s3cret"))
    assert await auth.check(basic("prometheus", "s3cret"))
    assert auth.bcrypt_checks == 1
    assert not await auth.check(basic("prometheus", "wrong"))
    assert not await auth.check(basic("prometheus", "wrong"))
    assert auth.bcrypt_checks == 2  # a repeated wrong password is remembered too
    clock.now += 61
    assert await auth.check(basic("prometheus", "s3cret"))
    assert auth.bcrypt_checks == 3


async def test_unknown_users_and_other_schemes_are_refused() -> None:
    auth = BasicAuth({"prometheus": HASH.encode()})
    assert not await auth.check(basic("mallory", "s3cret"))
    assert not await auth.check("Bearer s3cret")
    assert not await auth.check(basic("prometheus", "x" * 100))  # over bcrypt's 72 bytes
    # A hash for another user does not let this one in with that user's password.
    other = BasicAuth({"a": HASH.encode(), "b": bcrypt.hashpw(b"b", bcrypt.gensalt(4))})
    assert not await other.check(basic("b", "s3cret"))


async def test_the_caches_are_bounded_and_wrong_passwords_never_push_out_a_right_one() -> None:
    """Before: one cache of 100 for both, and a flood of wrong passwords evicted the
    scraper's pair, so every scrape paid a bcrypt check queued behind the flood's."""
    auth = BasicAuth({"prometheus": HASH.encode()}, size=3)
    assert await auth.check(basic("prometheus", "s3cret"))
    for n in range(5):
        assert not await auth.check(basic("prometheus", f"guess{n}"))
    assert len(auth._bad) == 3
    checks = auth.bcrypt_checks
    assert await auth.check(basic("prometheus", "s3cret"))
    assert auth.bcrypt_checks == checks  # still remembered


async def test_a_pair_in_use_stays_remembered_and_an_idle_one_expires() -> None:
    clock = Clock()
    auth = BasicAuth({"prometheus": HASH.encode()}, ttl_s=60, clock=clock)
    for _ in range(5):  # a scrape every 30 s for 2 minutes: one bcrypt check in all
        assert await auth.check(basic("prometheus", "s3cret"))
        clock.now += 30
    assert auth.bcrypt_checks == 1
    clock.now += 61
    assert await auth.check(basic("prometheus", "s3cret"))
    assert auth.bcrypt_checks == 2


async def test_a_full_queue_refuses_new_pairs_without_a_check() -> None:
    slow = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(8)).decode()
    auth = BasicAuth({"prometheus": slow.encode()}, max_waiting=2)
    answers = await asyncio.gather(
        *(auth.check(basic("prometheus", f"flood{n}")) for n in range(10))
    )
    assert not any(answers)
    assert auth.refused_busy == 8  # two waited their turn, eight never reached bcrypt
    assert auth.bcrypt_checks == 2


def test_bcrypt_costs_what_the_cache_saves() -> None:
    """The number the cache is for: a cost-10 check takes tens of milliseconds at least."""
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(10))
    started = time.perf_counter()
    assert bcrypt.checkpw(b"s3cret", hashed)
    assert time.perf_counter() - started > 0.02


async def served_certificate(server: ReloadingTLS, trusted: list[Path]) -> bytes:
    """The DER certificate a fresh handshake with ``server`` gets."""
    started = await asyncio.start_server(
        lambda _r, w: w.close(), "127.0.0.1", 0, ssl=server.listening
    )
    port = started.sockets[0].getsockname()[1]
    client = ssl.create_default_context()
    for ca in trusted:
        client.load_verify_locations(cafile=ca)
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"
        )
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        return bytes(der)
    finally:
        started.close()
        await started.wait_closed()


def der(pem_file: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_file.read_text())


async def test_a_renewed_certificate_is_served_without_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = FleetCerts.create(tmp_path / "old").files
    new = FleetCerts.create(tmp_path / "new").files
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.server_cert.read_bytes())
    key.write_bytes(old.server_key.read_bytes())
    server = ReloadingTLS(TLSServerConfig(cert, key), recheck_s=0)
    trusted = [old.ca_cert, new.ca_cert]
    assert await served_certificate(server, trusted) == der(old.server_cert)

    # Renewed in place, as a Secret volume swaps its files: the next handshake has it.
    cert.write_bytes(new.server_cert.read_bytes())
    key.write_bytes(new.server_key.read_bytes())
    assert await served_certificate(server, trusted) == der(new.server_cert)

    # Half-way through a renewal the key does not match: the last good pair stays.
    cert.write_bytes(old.server_cert.read_bytes())
    assert await served_certificate(server, trusted) == der(new.server_cert)
    assert "cannot be used, keeping the previous" in caplog.text
    key.write_bytes(old.server_key.read_bytes())  # the renewal completes
    assert await served_certificate(server, trusted) == der(old.server_cert)


async def test_the_files_are_looked_at_once_per_recheck_interval(tmp_path: Path) -> None:
    old = FleetCerts.create(tmp_path / "old").files
    new = FleetCerts.create(tmp_path / "new").files
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.server_cert.read_bytes())
    key.write_bytes(old.server_key.read_bytes())
    clock = Clock()
    server = ReloadingTLS(TLSServerConfig(cert, key), recheck_s=1.0, clock=clock)
    cert.write_bytes(new.server_cert.read_bytes())
    key.write_bytes(new.server_key.read_bytes())
    trusted = [old.ca_cert, new.ca_cert]
    assert await served_certificate(server, trusted) == der(old.server_cert)
    clock.now += 1.0
    assert await served_certificate(server, trusted) == der(new.server_cert)
