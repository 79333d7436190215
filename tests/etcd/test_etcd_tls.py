"""The direct client over TLS: CA, client certificate and key from the config file.

One real etcd member serving https on loopback with ``--client-cert-auth`` (the way kubeadm
runs etcd), with kubeadm-shaped certificates (etcd_pki.py).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from exporter.configfile import EtcdConfig, load_config
from exporter.controlplane.etcd_client import build_ssl_context, load_tls, probe_etcd
from exporter.controlplane.quorum import QuorumState
from fleetwatch.procs import ManagedProcess, free_port
from tests.helpers.etcd_pki import EtcdPki, mint
from tests.helpers.etcd_poll import poll

pytestmark = pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed")


@contextmanager
def tls_member(server_client_auth: bool = True) -> Iterator[tuple[str, EtcdPki]]:
    with tempfile.TemporaryDirectory(prefix="fleetwatch-etcd-tls-") as root:
        folder = Path(root)
        files = mint(folder / "pki", server_client_auth)
        client, peer = free_port(), free_port()
        url = f"https://127.0.0.1:{client}"
        proc = ManagedProcess(
            [
                "etcd", "--name", "tls1", "--data-dir", str(folder / "data"),
                "--listen-client-urls", url, "--advertise-client-urls", url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"tls1=http://127.0.0.1:{peer}",
                "--cert-file", str(files.server_cert), "--key-file", str(files.server_key),
                "--trusted-ca-file", str(files.ca), "--client-cert-auth",
                "--log-level", "warn", "--logger", "zap",
            ],
            folder / "etcd.log",
        ).start()  # fmt: skip
        try:
            yield url, files
        finally:
            proc.kill()


@pytest.fixture(scope="module")
def tls_etcd() -> Iterator[tuple[str, EtcdPki]]:
    with tls_member() as member:
        yield member


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.mark.live
async def test_client_certificate_from_the_config_file(
    tls_etcd: tuple[str, EtcdPki], session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    url, files = tls_etcd
    path = tmp_path / "fleetwatch.yml"
    path.write_text(
        "clusters:\n  prod:\n    etcd:\n"
        f"      endpoints: [{url}]\n"
        f"      ca_file: {files.ca}\n"
        f"      cert_file: {files.client_cert}\n"
        f"      key_file: {files.client_key}\n"
    )
    config = load_config(path).etcd_for("prod")
    assert config is not None
    context = build_ssl_context(config)
    assert context is not None
    report = await poll(
        lambda: probe_etcd(session, config, context),
        lambda r: r.has_leader is True and r.quorum.healthy == 1,
        20,
        "TLS etcd healthy",
    )
    assert [m.name for m in report.members] == ["tls1"]
    # A single member is a quorum of one with nothing to spare: the SPOF of the HA plan.
    assert report.quorum.state is QuorumState.NO_FAULT_TOLERANCE


@pytest.mark.live
async def test_without_client_certificate_etcd_refuses(
    tls_etcd: tuple[str, EtcdPki], session: aiohttp.ClientSession
) -> None:
    url, files = tls_etcd
    good = EtcdConfig(
        endpoints=(url,),
        ca_file=files.ca,
        cert_file=files.client_cert,
        key_file=files.client_key,
    )
    await poll(
        lambda: probe_etcd(session, good, build_ssl_context(good)),
        lambda r: r.quorum.healthy == 1,
        20,
        "TLS etcd healthy",
    )
    for config in (
        EtcdConfig(endpoints=(url,), ca_file=files.ca),  # no client certificate
        EtcdConfig(  # a server certificate from someone else's CA
            endpoints=(url,),
            ca_file=files.other_ca,
            cert_file=files.client_cert,
            key_file=files.client_key,
        ),
    ):
        report = await probe_etcd(session, config, build_ssl_context(config))
        assert report.quorum.healthy == 0
        assert report.has_leader is False
        assert [m.name for m in report.members] == [url.removeprefix("https://")]


@pytest.mark.live
async def test_members_from_the_endpoints_when_the_member_list_fails(
    session: aiohttp.ClientSession,
) -> None:
    """A server certificate without clientAuth breaks etcd's own JSON gateway: /health
    answers, /v3/... do not. The member is judged by /health, named by its endpoint."""
    with tls_member(server_client_auth=False) as (url, files):
        config = EtcdConfig(
            endpoints=(url,),
            ca_file=files.ca,
            cert_file=files.client_cert,
            key_file=files.client_key,
        )
        report = await poll(
            lambda: probe_etcd(session, config, build_ssl_context(config)),
            lambda r: r.quorum.healthy == 1,
            20,
            "healthy by /health alone",
        )
        assert [m.name for m in report.members] == [url.removeprefix("https://")]
        assert report.members[0].raft_term is None  # no status through the broken gateway
        assert report.has_leader is False


def test_tls_context_rebuilt_when_the_files_change(tmp_path: Path) -> None:
    files = mint(tmp_path / "pki")
    config = EtcdConfig(
        endpoints=("https://127.0.0.1:2379",),
        ca_file=files.ca,
        cert_file=files.client_cert,
        key_file=files.client_key,
    )
    first = load_tls(config, None)
    assert first.error is None and first.context is not None
    assert load_tls(config, first) is first  # unchanged files: no reload
    files.client_key.write_text("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
    broken = load_tls(config, first)
    assert broken.context is None and broken.error == "SSLError"
    assert "broken" not in repr(broken)
    mint(tmp_path / "pki")  # rotated: a new CA, certificate and key in the same files
    rotated = load_tls(config, broken)
    assert rotated.error is None and rotated.context is not None
