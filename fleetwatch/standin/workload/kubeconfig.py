"""Kubeconfig files for stand-in clusters, with every credential kind people use.

The shapes are those ``kubectl`` and the kubernetes client read: embedded or file client
certificates, inline tokens, token files (ending in a newline, as files written by hand
or by ``echo`` do), exec plugins (``client.authentication.k8s.io/v1beta1``, like
``aws eks get-token`` or ``kubelogin``), and ``insecure-skip-tls-verify``.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import yaml

if TYPE_CHECKING:
    from fleetwatch.standin.workload.certs import ClientCert, FleetCerts
    from fleetwatch.standin.workload.cluster import StandinCluster


Credential = Literal[
    "client_cert_data",
    "client_cert_data_each",
    "client_cert_files",
    "token",
    "token_file",
    "exec_token",
    "exec_cert",
    "insecure",
]
CaKind = Literal["data", "file"]
CREDENTIALS: tuple[str, ...] = get_args(Credential)
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _token_file(tokens_dir: Path, cluster: StandinCluster) -> Path:
    tokens_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = tokens_dir / f"{cluster.name}.token"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(cluster.token + "\n")
    return path


def _exec(args: list[str]) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": EXEC_API_VERSION,
            "command": sys.executable,
            "args": ["-m", "fleetwatch.standin", "exec-credential", *args],
            "interactiveMode": "Never",
            "provideClusterInfo": False,
        }
    }


def _user(
    credential: Credential,
    cluster: StandinCluster,
    certs: FleetCerts,
    tokens_dir: Path,
    client: ClientCert | None,
) -> dict[str, Any]:
    cert = client or certs.default_client
    if credential == "client_cert_data":
        return {
            "client-certificate-data": _b64(cert.cert_pem),
            "client-key-data": _b64(cert.key_pem),
        }
    if credential == "client_cert_data_each":
        # Every cluster its own key and certificate, as the admin kubeconfigs of separate
        # kubeadm clusters are: the exporter then builds one TLS context per cluster, as
        # it must for a real fleet (the shared certificate lets it build one for all).
        cert_pem, key_pem = certs.mint_client(cert.common_name)
        return {"client-certificate-data": _b64(cert_pem), "client-key-data": _b64(key_pem)}
    if credential == "client_cert_files":
        return {"client-certificate": str(cert.cert_file), "client-key": str(cert.key_file)}
    if credential in ("token", "insecure"):
        return {"token": cluster.token}
    if credential == "token_file":
        return {"tokenFile": str(_token_file(tokens_dir, cluster))}
    if credential == "exec_token":
        return _exec(["--token-file", str(_token_file(tokens_dir, cluster))])
    if credential == "exec_cert":
        return _exec(["--cert-file", str(cert.cert_file), "--key-file", str(cert.key_file)])
    raise ValueError(f"unknown credential kind {credential!r}; expected one of {CREDENTIALS}")


def kubeconfig_dict(
    clusters: Sequence[StandinCluster],
    certs: FleetCerts,
    tokens_dir: Path,
    *,
    credential: Credential = "client_cert_data",
    ca: CaKind = "data",
    client: ClientCert | None = None,
) -> dict[str, Any]:
    """The kubeconfig document: one cluster, user and context per stand-in cluster.

    ``client`` is the certificate of the certificate kinds (default: the fleet's own).
    """
    if credential not in CREDENTIALS:
        raise ValueError(f"unknown credential kind {credential!r}; expected one of {CREDENTIALS}")
    if ca not in ("data", "file"):
        raise ValueError(f"unknown CA kind {ca!r}; expected 'data' or 'file'")
    entries: dict[str, list[dict[str, Any]]] = {"clusters": [], "users": [], "contexts": []}
    for cluster in clusters:
        server: dict[str, Any] = {"server": cluster.url}
        if credential == "insecure":
            server["insecure-skip-tls-verify"] = True
        elif ca == "data":
            server["certificate-authority-data"] = _b64(certs.ca_pem)
        else:
            server["certificate-authority"] = str(certs.files.ca_cert)
        entries["clusters"].append({"name": cluster.name, "cluster": server})
        entries["users"].append(
            {
                "name": f"{cluster.name}-admin",
                "user": _user(credential, cluster, certs, tokens_dir, client),
            }
        )
        entries["contexts"].append(
            {
                "name": cluster.name,
                "context": {"cluster": cluster.name, "user": f"{cluster.name}-admin"},
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        **entries,
        "current-context": clusters[0].name if clusters else "",
    }


def write_kubeconfig(
    path: Path,
    clusters: Sequence[StandinCluster],
    certs: FleetCerts,
    tokens_dir: Path,
    *,
    credential: Credential = "client_cert_data",
    ca: CaKind = "data",
    client: ClientCert | None = None,
) -> Path:
    """Write the kubeconfig atomically (a watcher re-scanning never sees half a file)."""
    document = kubeconfig_dict(
        clusters, certs, tokens_dir, credential=credential, ca=ca, client=client
    )
    text = yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
