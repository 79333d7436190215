"""The fleet's X.509 material: one CA, a server and a client certificate, and a foreign CA.

A kubeadm cluster has one CA that signs both the API server's serving certificate and the
admin's client certificate (``CN=kubernetes-admin, O=system:masters``); we mint the same
shape once per fleet, with ECDSA P-256 keys because their handshakes are cheap and a
benchmark opens thousands. The foreign CA signs a second serving certificate for the
``wrong_ca`` mode: a server whose certificate the kubeconfig's CA does not vouch for.
More client certificates, each with its own common name, come from
:meth:`FleetCerts.issue_client`: several watchers (two replicas of an exporter) then
present different identities, and a cluster can refuse one of them.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Certificates are valid from an hour ago (clock skew) for a year.
_VALIDITY = datetime.timedelta(days=365)

#: Common names of issued client certificates; they also name the certificate's files.
CLIENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")

#: Common name of the fleet's default client certificate.
DEFAULT_CLIENT = "fleetwatch"


@dataclass(frozen=True)
class CertFiles:
    """Paths of the PEM files written for one fleet (keys are mode 0600)."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    foreign_ca_cert: Path
    foreign_server_cert: Path
    foreign_server_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )


def _make_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_leaf(
    subject: x509.Name,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    key = _key()
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(subject, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        # kube-apiserver's serving certificate names the addresses clients dial.
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, secret: bool = False) -> Path:
    if secret:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


@dataclass(frozen=True)
class ClientCert:
    """A client certificate of the fleet CA (``O=system:masters``), in memory and on disk."""

    common_name: str
    cert_pem: bytes
    key_pem: bytes = field(repr=False)
    cert_file: Path
    key_file: Path


@dataclass(frozen=True)
class FleetCerts:
    """The PEM material of one fleet, in memory and on disk."""

    files: CertFiles
    ca_pem: bytes
    client_cert_pem: bytes
    client_key_pem: bytes = field(repr=False)
    #: The CA itself, kept in memory only, to issue more client certificates.
    _ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def create(cls, directory: Path) -> FleetCerts:
        """Mint the fleet's CA, serving and client certificates, and the foreign CA."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = _make_ca("fleetwatch-standin-ca")
        server = _make_leaf(_name("kube-apiserver"), ca, server=True)
        client = _make_leaf(_name(DEFAULT_CLIENT, "system:masters"), ca, server=False)
        foreign = _make_ca("someone-elses-ca")
        foreign_server = _make_leaf(_name("kube-apiserver"), foreign, server=True)
        d = directory
        files = CertFiles(
            ca_cert=_write(d / "ca.crt", _cert_pem(ca[0])),
            server_cert=_write(d / "apiserver.crt", _cert_pem(server[0])),
            server_key=_write(d / "apiserver.key", _key_pem(server[1]), secret=True),
            client_cert=_write(d / "client.crt", _cert_pem(client[0])),
            client_key=_write(d / "client.key", _key_pem(client[1]), secret=True),
            foreign_ca_cert=_write(d / "foreign-ca.crt", _cert_pem(foreign[0])),
            foreign_server_cert=_write(d / "foreign-apiserver.crt", _cert_pem(foreign_server[0])),
            foreign_server_key=_write(
                d / "foreign-apiserver.key", _key_pem(foreign_server[1]), secret=True
            ),
        )
        return cls(
            files=files,
            ca_pem=_cert_pem(ca[0]),
            client_cert_pem=_cert_pem(client[0]),
            client_key_pem=_key_pem(client[1]),
            _ca=ca,
        )

    @property
    def default_client(self) -> ClientCert:
        """The certificate every kubeconfig carries unless told otherwise."""
        return ClientCert(
            DEFAULT_CLIENT,
            self.client_cert_pem,
            self.client_key_pem,
            self.files.client_cert,
            self.files.client_key,
        )

    def issue_client(self, common_name: str) -> ClientCert:
        """A new client certificate ``CN=<common_name>, O=system:masters`` of the fleet CA.

        Written next to the fleet's own as ``client-<common_name>.crt``/``.key``; issuing
        the same name again replaces the files with a new key.
        """
        cert_pem, key_pem = self.mint_client(common_name)
        folder = self.files.ca_cert.parent
        return ClientCert(
            common_name,
            cert_pem,
            key_pem,
            _write(folder / f"client-{common_name}.crt", cert_pem),
            _write(folder / f"client-{common_name}.key", key_pem, secret=True),
        )

    def mint_client(self, common_name: str) -> tuple[bytes, bytes]:
        """PEM certificate and key of a new ``CN=<common_name>, O=system:masters`` client of
        the fleet CA, not written anywhere (a key of its own each time)."""
        if not CLIENT_NAME.fullmatch(common_name):
            raise ValueError(f"client common name {common_name!r} must match {CLIENT_NAME.pattern}")
        if self._ca is None:
            raise RuntimeError("these certificates were not created here: no CA key to sign with")
        cert, key = _make_leaf(_name(common_name, "system:masters"), self._ca, server=False)
        return _cert_pem(cert), _key_pem(key)

    def server_context(self, *, foreign: bool = False) -> ssl.SSLContext:
        """A serving context that asks for (but does not require) a client certificate.

        kube-apiserver requests a client certificate and accepts requests without one
        (they may carry a bearer token). Unlike kube-apiserver, which answers 401 to a
        certificate from an unknown CA, OpenSSL fails that handshake; either way the
        client is not let in.
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if foreign:
            ctx.load_cert_chain(self.files.foreign_server_cert, self.files.foreign_server_key)
        else:
            ctx.load_cert_chain(self.files.server_cert, self.files.server_key)
        ctx.load_verify_locations(cadata=self.ca_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        # Go's crypto/tls (kube-apiserver) sends one session ticket after a full TLS 1.3
        # handshake; OpenSSL's default is two, and each costs the server a session
        # encoding (the client certificate included) and the client a ticket to parse.
        ctx.num_tickets = 1
        return ctx

    def client_context(
        self, *, with_cert: bool = True, client: ClientCert | None = None
    ) -> ssl.SSLContext:
        """A client context trusting the fleet CA (for tests and tools of this package).

        It presents ``client`` (default: the fleet's own client certificate) unless
        ``with_cert`` is false.
        """
        ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
        if with_cert:
            chosen = client or self.default_client
            ctx.load_cert_chain(chosen.cert_file, chosen.key_file)
        return ctx
