"""Certificates for a TLS etcd in the tests, shaped like kubeadm's etcd PKI.

kubeadm's etcd server certificate carries both serverAuth and clientAuth: etcd's own JSON
gateway dials etcd's gRPC port with it. A server-only certificate makes etcd answer
``/health`` but fail every ``/v3/...`` call, so the stand-in's API-server certificates do
not do here.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class EtcdPki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing etcd uses: verification against it must fail."""


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    usages: list[x509.ObjectIdentifier] | None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=usages is None, path_length=None), True)
    )
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), False).add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(
    folder: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None
) -> tuple[Path, Path | None]:
    crt = folder / f"{name}.crt"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is None:
        return crt, None
    pem = folder / f"{name}.key"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pem.chmod(0o600)
    return crt, pem


def mint(folder: Path, server_client_auth: bool = True) -> EtcdPki:
    """``server_client_auth=False`` mints a server-only certificate (the broken-gateway case)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = _cert("etcd-ca", ca_key, None, None)
    other = _cert("someone-elses-ca", other_key, None, None)
    server_key, client_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    usages = [ExtendedKeyUsageOID.SERVER_AUTH]
    if server_client_auth:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    server = _cert("etcd-server", server_key, (ca.subject, ca_key), usages)
    client = _cert(
        "kube-etcd-healthcheck-client", client_key, (ca.subject, ca_key),
        [ExtendedKeyUsageOID.CLIENT_AUTH],
    )  # fmt: skip
    ca_path, _ = _write(folder, "ca", ca, None)
    other_path, _ = _write(folder, "other-ca", other, None)
    server_crt, server_pem = _write(folder, "server", server, server_key)
    client_crt, client_pem = _write(folder, "healthcheck-client", client, client_key)
    assert server_pem is not None and client_pem is not None
    return EtcdPki(ca_path, server_crt, server_pem, client_crt, client_pem, other_path)
