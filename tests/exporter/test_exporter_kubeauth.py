"""Credentials resolved without the kubernetes client, proven against it, shape by shape.

``exporter.net.kubeclient`` resolves a context from what discovery kept of it
(``fleetwatch.discovery.contextauth``) without importing the kubernetes client. Here the client's
own ``KubeConfigLoader`` is the oracle: for every kubeconfig shape of the table, the
kubeconfig is written to a file, discovered and resolved by the exporter, and loaded by
the client from the same document, and both answers are compared: the token (or its
absence), the CA, client certificate and key (their bytes, and their path when they are
files of the user's), the verification, ``tls-server-name``, and the reason of a failure
(what ``exporter.net.credentials`` puts in the log).

Where the exporter deliberately answers otherwise (it always did), the case says why and
what the exporter answers instead, and the test checks that the client really differs, so
a divergence that disappears is noticed.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader

from exporter.net import kubeclient as kube
from exporter.net.credentials import _safe_reason
from exporter.net.execplugin import PluginRunner
from exporter.net.kubeclient import ContextLoadError, load_context
from fleetwatch.discovery import Discoverer

EXEC_API = "client.authentication.k8s.io/v1beta1"

#: Where the client writes its copies of ``*-data`` (it reuses one file per content, in
#: whichever folder it first wrote it: its table is process-wide).
CLIENT_TEMP = "client-temp"

#: An exec plugin: prints an ExecCredential with the token (or the certificate files) of
#: its arguments, or the server it was given when it asked for its cluster's information.
PLUGIN = """\
import json, os, sys
kind, *args = sys.argv[1:]
status = {}
if kind == "token":
    status["token"] = args[0]
elif kind == "cert":
    status["clientCertificateData"] = open(args[0]).read()
    status["clientKeyData"] = open(args[1]).read()
elif kind == "cluster":
    cluster = json.loads(os.environ["KUBERNETES_EXEC_INFO"])["spec"]["cluster"]
    status["token"] = cluster["server"] + "|" + cluster.get("certificate-authority-data", "")
print(json.dumps({"apiVersion": "EXEC_API", "kind": "ExecCredential", "status": status}))
""".replace("EXEC_API", EXEC_API)

CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN EC PRIVATE KEY-----\nKEY\n-----END EC PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def jwt(exp: float) -> str:
    """An OIDC id-token (unsigned: the client only reads its expiry)."""
    part = base64.urlsafe_b64encode(json.dumps({"exp": int(exp)}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJub25lIn0.{part}.c2ln"


@dataclass
class Case:
    id: str
    cluster: dict[str, Any]
    user: dict[str, Any] | None  #: None: the context names no user
    files: dict[str, bytes] = field(default_factory=dict)  #: relative to the kubeconfig
    #: why the exporter answers otherwise than the client, and what it answers
    diverges: str | None = None
    ours: dict[str, Any] | None = None


def plain(token: str | None) -> dict[str, Any]:
    """What is loaded for a cluster with no CA, certificate or server name of its own."""
    return {
        "token": token,
        "ca": None,
        "cert": None,
        "key": None,
        "verify": True,
        "tls_server_name": None,
    }


S = "https://127.0.0.1:6443"
DATA = {"certificate-authority-data": b64(CA)}
USER_DATA = {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}
FILES = {"ca.crt": CA, "pki/client.crt": CERT, "pki/client.key": KEY, "token": b"file-token\n"}
PY = sys.executable

CASES = [
    Case("embedded CA, certificate and key", {"server": S, **DATA}, USER_DATA),
    Case(
        "absolute files",
        {"server": S, "certificate-authority": "$DIR/ca.crt"},
        {"client-certificate": "$DIR/pki/client.crt", "client-key": "$DIR/pki/client.key"},
        FILES,
    ),
    Case(
        "relative files, against the kubeconfig's folder",
        {"server": S, "certificate-authority": "ca.crt"},
        {"client-certificate": "pki/client.crt", "client-key": "./pki/../pki/client.key"},
        FILES,
    ),
    Case(
        "data wins over the file",
        {"server": S, "certificate-authority": "nope.crt", **DATA},
        {"client-certificate": "nope", "client-key": "nope", **USER_DATA},
    ),
    Case(
        "empty data wins over the file: no CA",
        {"server": S, "certificate-authority-data": "", "certificate-authority": "ca.crt"},
        {"token": "t"},
        FILES,
    ),
    Case(
        "certificate without key",
        {"server": S, **DATA},
        {"client-certificate": "pki/client.crt"},
        FILES,
    ),
    Case(
        "certificate as data, key as a file",
        {"server": S},
        {"client-certificate-data": b64(CERT), "client-key": "pki/client.key"},
        FILES,
    ),
    Case("missing CA file", {"server": S, "certificate-authority": "gone.crt"}, {"token": "t"}),
    Case("empty CA path", {"server": S, "certificate-authority": ""}, {"token": "t"}),
    Case("CA path null", {"server": S, "certificate-authority": None}, {"token": "t"}),
    Case("CA path not a string", {"server": S, "certificate-authority": 42}, {"token": "t"}),
    Case(
        "missing key file",
        {"server": S},
        {"client-certificate": "pki/client.crt", "client-key": "k"},
        FILES,
    ),
    Case(
        "plain http: no TLS material is read",
        {"server": "http://127.0.0.1:8080", "certificate-authority": "gone.crt", **DATA},
        {"token": "t", "client-key": "gone"},
    ),
    Case("token", {"server": S}, {"token": "abc.def"}),
    Case("token as a number", {"server": S}, {"token": 12345}),
    Case(
        "tokenFile, its newline kept for credentials to strip",
        {"server": S},
        {"tokenFile": "token"},
        FILES,
    ),
    Case("tokenFile absolute", {"server": S}, {"tokenFile": "$DIR/token"}, FILES),
    Case(
        "token wins over tokenFile", {"server": S}, {"token": "inline", "tokenFile": "token"}, FILES
    ),
    Case(
        "empty token: tokenFile ignored", {"server": S}, {"token": "", "tokenFile": "token"}, FILES
    ),
    Case("token null", {"server": S}, {"token": None}),
    Case("tokenFile null", {"server": S}, {"tokenFile": None}),
    Case("tokenFile missing", {"server": S}, {"tokenFile": "gone"}),
    Case("tokenFile empty", {"server": S}, {"tokenFile": "empty"}, {"empty": b""}),
    Case("tokenFile a folder", {"server": S}, {"tokenFile": ""}),
    Case("username and password", {"server": S}, {"username": "admin", "password": "pa:ss"}),
    Case(
        "token wins over username", {"server": S}, {"token": "t", "username": "a", "password": "b"}
    ),
    Case("password null", {"server": S}, {"username": "admin", "password": None}),
    Case("username not a string", {"server": S}, {"username": 7, "password": "x"}),
    Case("password beyond latin-1", {"server": S}, {"username": "a", "password": "€"}),
    Case("username without password: nothing", {"server": S}, {"username": "admin"}),
    Case(
        "insecure-skip-tls-verify", {"server": S, "insecure-skip-tls-verify": True}, {"token": "t"}
    ),
    Case(
        "insecure-skip-tls-verify as the string 'false' is true",
        {"server": S, "insecure-skip-tls-verify": "false"},
        {"token": "t"},
    ),
    Case(
        "insecure-skip-tls-verify false",
        {"server": S, "insecure-skip-tls-verify": False, **DATA},
        None,
    ),
    Case("insecure-skip-tls-verify null", {"server": S, "insecure-skip-tls-verify": None}, None),
    Case("tls-server-name", {"server": S, "tls-server-name": "kubernetes", **DATA}, {"token": "t"}),
    Case("tls-server-name empty", {"server": S, "tls-server-name": "", **DATA}, {"token": "t"}),
    Case("tls-server-name null", {"server": S, "tls-server-name": None}, {"token": "t"}),
    Case("proxy-url null", {"server": S, "proxy-url": None}, {"token": "t"}),
    Case("no user: anonymous", {"server": S, **DATA}, None),
    Case("an empty user: anonymous", {"server": S, **DATA}, {}),
    Case("trailing slashes on the server", {"server": S + "//", **DATA}, {"token": "t"}),
    Case(
        "exec plugin: a token",
        {"server": S, **DATA},
        {
            "exec": {
                "apiVersion": EXEC_API,
                "command": PY,
                "args": ["$DIR/plugin.py", "token", "x1"],
            }
        },
        {"plugin.py": PLUGIN.encode()},
    ),
    Case(
        "exec plugin: a client certificate, replacing the user's",
        {"server": S, **DATA},
        {
            "client-certificate-data": b64(b"old"),
            "client-key-data": b64(b"old"),
            "exec": {
                "apiVersion": EXEC_API,
                "command": PY,
                "args": ["plugin.py", "cert", "$DIR/pki/client.crt", "$DIR/pki/client.key"],
            },
        },
        {"plugin.py": PLUGIN.encode(), **FILES},
    ),
    Case(
        "exec plugin given its cluster's information",
        {"server": S, **DATA},
        {
            "exec": {
                "apiVersion": EXEC_API,
                "command": PY,
                "args": ["plugin.py", "cluster"],
                "provideClusterInfo": True,
            }
        },
        {"plugin.py": PLUGIN.encode()},
    ),
    Case(
        "token wins over the exec plugin",
        {"server": S},
        {"token": "t", "exec": {"apiVersion": EXEC_API, "command": "/nonexistent"}},
    ),
    Case(
        "oidc auth provider (resolved by the kubernetes client itself)",
        {"server": S, **DATA},
        {
            "auth-provider": {
                "name": "oidc",
                "config": {"id-token": jwt(time.time() + 3600), "idp-issuer-url": "https://x"},
            }
        },
    ),
    Case(
        "an auth provider the client does not know: the token",
        {"server": S},
        {"auth-provider": {"name": "azure"}, "token": "t"},
    ),
    Case(
        "data with characters outside base64: skipped, as base64 decoding does",
        {"server": S, "certificate-authority-data": "@@" + b64(CA)},
        {"token": "t"},
    ),
    Case(
        "data that is not base64",
        {"server": S, "certificate-authority-data": "abc"},
        {"token": "t"},
        diverges="a precise reason (the client fails on decoding it in its temp-file writer)",
        ours={"error": "Invalid certificate-authority-data: not base64"},
    ),
    Case(
        "data null",
        {"server": S, "certificate-authority-data": None},
        {"token": "t"},
        diverges="an empty value as kubectl reads it (the client refuses null)",
        ours=plain(token="Bearer t"),
    ),
    Case(
        "empty token and an exec plugin",
        {"server": S},
        {
            "token": "",
            "exec": {
                "apiVersion": EXEC_API,
                "command": PY,
                "args": ["$DIR/plugin.py", "token", "x"],
            },
        },
        {"plugin.py": PLUGIN.encode()},
        diverges="a user naming a token runs no plugin (the client falls through to it)",
        ours=plain(token=None),
    ),
    Case(
        "token given as a mapping",
        {"server": S},
        {"token": {"a": 1}},
        diverges="refused (the client sends the repr of its own wrapper object as the token)",
        ours={"error": "Invalid token: not a string"},
    ),
]


def _substitute(value: Any, folder: Path) -> Any:
    if isinstance(value, str):
        return value.replace("$DIR", str(folder))
    if isinstance(value, dict):
        return {k: _substitute(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, folder) for v in value]
    return value


def kubeconfig(case: Case, folder: Path) -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": "c"}
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": _substitute(case.cluster, folder)}],
        "contexts": [{"name": "ctx", "context": context}],
    }
    if case.user is not None:
        context["user"] = "u"
        doc["users"] = [{"name": "u", "user": _substitute(case.user, folder)}]
    return doc


def _material(data: bytes | None, path: str | None) -> Any:
    """("data", bytes) or ("file", path, bytes): what is loaded, and from where."""
    if data is not None:
        return ("data", data)
    if path is None:
        return None
    content = Path(path).read_bytes()
    if Path(path).parent.name == CLIENT_TEMP:
        return ("data", content)  # the client's temporary copy of a *-data value
    return ("file", path, content)


def ours(doc: dict[str, Any], folder: Path) -> dict[str, Any]:
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    discoverer = Discoverer(path, None)
    found = discoverer.scan()
    assert found.problems == (), found.problems
    ctx = discoverer.context_config(found.clusters[0])
    assert ctx is not None
    runner = PluginRunner(10.0)
    try:
        loaded = load_context(ctx.auth, runner)
    except ContextLoadError as exc:
        return {"error": _safe_reason(exc.error)}
    finally:
        runner.close()
    return {
        "token": loaded.token,
        "ca": _material(loaded.ca_data, loaded.ca_file),
        "cert": _material(loaded.cert_data, loaded.cert_file),
        "key": _material(loaded.key_data, loaded.key_file),
        "verify": loaded.verify,
        "tls_server_name": loaded.tls_server_name,
    }


def theirs(doc: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The kubernetes client's answer for the same document (temp files in a folder of
    the test's, to tell its copies of ``*-data`` from the user's own files)."""
    temp = folder / CLIENT_TEMP
    target = Configuration()
    try:
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=doc,
            active_context="ctx",
            config_base_path=str(folder),
            temp_file_path=str(temp),
        )
        loader.load_and_set(target)  # type: ignore[no-untyped-call]
    except (ConfigException, KeyError, ValueError, TypeError, OSError) as exc:
        return {"error": _safe_reason(exc)}
    token = target.api_key.get("BearerToken") if target.api_key else None
    return {
        "token": token or None,
        "ca": _material(None, target.ssl_ca_cert or None),
        "cert": _material(None, target.cert_file or None),
        "key": _material(None, target.key_file or None),
        "verify": bool(target.verify_ssl),
        "tls_server_name": getattr(target, "tls_server_name", None) or None,
    }


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_resolved_as_the_kubernetes_client_resolves_it(case: Case, tmp_path: Path) -> None:
    for name, content in case.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    doc = kubeconfig(case, tmp_path)
    mine, client = ours(doc, tmp_path), theirs(doc, tmp_path)
    if case.diverges is None:
        assert mine == client
        return
    assert mine == case.ours, case.diverges
    assert client != mine, f"the client now agrees: drop the divergence ({case.diverges})"


def test_the_table_covers_what_kubectl_users_write() -> None:
    """Every key of a kubeconfig's cluster and user that credentials read is in a case."""
    keys = {k for c in CASES for k in c.cluster} | {k for c in CASES for k in (c.user or {})}
    for key in (
        "certificate-authority",
        "certificate-authority-data",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
        "username",
        "password",
        "exec",
        "auth-provider",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "proxy-url",
    ):
        assert key in keys, key


def test_secrets_stay_out_of_every_repr(tmp_path: Path) -> None:
    case = Case("all", {"server": S, **DATA}, {**USER_DATA, "token": "sekrit-token"})
    doc = kubeconfig(case, tmp_path)
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(doc))
    discoverer = Discoverer(tmp_path / "kubeconfig", None)
    ctx = discoverer.context_config(discoverer.scan().clusters[0])
    assert ctx is not None
    loaded = load_context(ctx.auth)
    for shown in (repr(ctx), repr(ctx.auth), repr(loaded)):
        assert "sekrit-token" not in shown and "KEY" not in shown, shown


def test_client_temp_files_written_by_many_threads_at_once(tmp_path: Path) -> None:
    """The client (an OIDC provider's CA) registers a temp file's name before writing it:
    under the patch a thread never gets a file another has not finished writing."""
    kube_config = kube._client().kube_config
    errors: list[str] = []
    for round_ in range(20):
        content = f"round {round_} {time.time()}\n".encode() * 2000
        barrier = threading.Barrier(8)

        def write(content: bytes = content, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            name = kube_config._create_temp_file_with_content(content)
            if Path(name).read_bytes() != content:
                errors.append(name)

        threads = [threading.Thread(target=write) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    kube.remove_temp_files()
    assert errors == []


#: Resolves contexts of every shape but auth providers, then one with, in a fresh
#: interpreter, and says when the kubernetes client was imported.
_IMPORTS = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from fleetwatch.discovery import Discoverer
    from exporter.net.kubeclient import load_context, ContextLoadError
    folder = Path(sys.argv[1])
    found = []
    for name in sorted(p.name for p in folder.iterdir()):
        d = Discoverer(folder / name, None)
        for c in d.scan().clusters:
            try:
                load_context(d.context_config(c).auth)
            except ContextLoadError:
                pass
            found.append((name, "kubernetes" in sys.modules, "pydantic" in sys.modules))
    print(json.dumps(found))
    """
)


def test_the_kubernetes_client_is_imported_only_for_an_auth_provider(tmp_path: Path) -> None:
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    plain = [
        c for c in CASES if "auth-provider" not in (c.user or {}) and "exec" not in (c.user or {})
    ]
    for i, case in enumerate(plain):
        (folder / f"a{i:03d}").write_text(yaml.safe_dump(kubeconfig(case, tmp_path)))
    oidc = next(c for c in CASES if c.id.startswith("oidc"))
    (folder / "z-oidc").write_text(yaml.safe_dump(kubeconfig(oidc, tmp_path)))
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    found = json.loads(done.stdout)
    assert [f[1:] for f in found[:-1]] == [[False, False]] * len(plain)
    assert found[-1] == ["z-oidc", True, True]
