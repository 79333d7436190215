"""``--web.config.file``: TLS and basic authentication, in Prometheus' exporter-toolkit format.

Prometheus, Alertmanager and every official exporter read the same file; a platform team
that already writes one for them writes the same for fleetwatch's two servers::

    tls_server_config:
      cert_file: server.crt              # paths are relative to this file's folder
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional
      client_ca_file: clients-ca.crt     # needed by the client_auth_types that verify
      min_version: TLS12                 # TLS10..TLS13, default TLS12
      client_allowed_sans: [prometheus.monitoring.svc]  # optional: whose certificates
    http_server_config:
      headers:                           # added to every answer, toolkit's five only
        Strict-Transport-Security: max-age=31536000
        X-Frame-Options: deny
      http2: true                        # accepted, without effect: we serve HTTP/1.1
    basic_auth_users:
      prometheus: $2b$12$...             # bcrypt hash (htpasswd -nBC 12 "" | tr -d ':\\n')

As in exporter-toolkit the parsing is strict: an unknown key, or a key that toolkit knows
but fleetwatch does not implement (``cipher_suites``, ``curve_preferences``, ...), is an
error that names it, so a setting is never silently ignored. ``http2`` is the exception:
Prometheus scrapes over HTTP/1.1 and so do we, so ``http2: true`` (toolkit's default) is
accepted and changes nothing, rather than failing a file written for an exporter. The
headers and ``client_allowed_sans`` are applied by ``fleetwatch.common.webguard``. The file is read
once, at
start-up; the certificate files it names are followed as they are renewed
(:class:`ReloadingTLS`). The parsing is pure and tested as a table; the users it reads are
checked by ``fleetwatch.common.basicauth``.

A little over 300 lines: the strict parse (one message per mistake) and the TLS contexts
built from what it read, then followed as the files are renewed, share one set of
settings and errors.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

log = logging.getLogger(__name__)

#: client_auth_type -> what the server asks of a client's certificate. Python's TLS cannot
#: request a certificate without verifying it, so toolkit's RequestClientCert and
#: RequireAnyClientCert are refused with a message rather than mapped to something else.
CLIENT_AUTH_TYPES: Final[Mapping[str, ssl.VerifyMode]] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
UNSUPPORTED_CLIENT_AUTH: Final = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")

TLS_VERSIONS: Final[Mapping[str, ssl.TLSVersion]] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

TOP_KEYS: Final = frozenset({"tls_server_config", "basic_auth_users", "http_server_config"})
TLS_KEYS: Final = frozenset(
    {
        "cert_file",
        "key_file",
        "client_auth_type",
        "client_ca_file",
        "min_version",
        "max_version",
        "client_allowed_sans",
    }
)
HTTP_KEYS: Final = frozenset({"headers", "http2"})
#: The headers exporter-toolkit lets a web config set, with the values it accepts (None:
#: any). Private there "to ensure consistency in the Prometheus ecosystem"; the same here.
HEADERS: Final[Mapping[str, tuple[str, ...] | None]] = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
#: exporter-toolkit keys fleetwatch does not implement: named as such in the error.
TOOLKIT_ONLY_KEYS: Final = frozenset(
    {
        "cert",
        "key",
        "client_ca",
        "cipher_suites",
        "curve_preferences",
        "prefer_server_cipher_suites",
    }
)

#: ``--web.config.file``'s help, the same on both servers.
WEB_CONFIG_HELP: Final = (
    "YAML file in Prometheus exporter-toolkit's format: tls_server_config (cert_file, "
    "key_file, client_auth_type, client_ca_file, min_version, client_allowed_sans) serves "
    "HTTPS, basic_auth_users (user: bcrypt hash) guards every path, http_server_config.headers "
    "go on every answer (default: plain HTTP, no auth)"
)


class WebConfigError(ValueError):
    """The web config file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class TLSServerConfig:
    """``tls_server_config``, its paths resolved against the config file's folder."""

    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    #: a client certificate must name one of these (DNS, IP, email or URI SAN); empty: any
    client_allowed_sans: tuple[str, ...] = ()


@dataclass(frozen=True)
class WebConfig:
    """A parsed web config: TLS when ``tls`` is set, basic auth when ``users`` is not empty."""

    tls: TLSServerConfig | None = None
    #: user name -> bcrypt hash
    users: Mapping[str, bytes] = field(default_factory=dict)
    #: ``http_server_config.headers``: added to every answer
    headers: Mapping[str, str] = field(default_factory=dict)


def load_web_config(path: Path) -> WebConfig:
    """Read and check ``path``; the TLS files are loaded once here so a bad one fails now."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise WebConfigError(f"{path}: {reason}") from None
    config = parse_web_config(text, base=path.parent, source=str(path))
    if config.tls is not None:
        server_ssl_context(config.tls, source=str(path))
    return config


def parse_web_config(text: str, *, base: Path, source: str = "web config") -> WebConfig:
    """The file's text -> :class:`WebConfig`; relative paths are taken from ``base``."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"{source}: not YAML: {exc}") from None
    if doc is None:
        return WebConfig()
    top = _mapping(doc, source, "the file")
    _check_keys(top, TOP_KEYS, source, "")
    tls_doc = top.get("tls_server_config")
    tls = None
    if tls_doc is not None and tls_doc != {}:
        tls = _parse_tls(_mapping(tls_doc, source, "tls_server_config"), base, source)
    users = _parse_users(top.get("basic_auth_users"), source)
    headers = _parse_http(top.get("http_server_config"), source)
    return WebConfig(tls, users, headers)


def _parse_http(doc: object, source: str) -> dict[str, str]:
    """``http_server_config``: its headers, checked as exporter-toolkit checks them."""
    if doc is None:
        return {}
    http = _mapping(doc, source, "http_server_config")
    _check_keys(http, HTTP_KEYS, source, "http_server_config.")
    if "http2" in http and not isinstance(http["http2"], bool):
        raise WebConfigError(f"{source}: http_server_config.http2 must be true or false")
    headers: dict[str, str] = {}
    for name, value in _mapping(
        http.get("headers") or {}, source, "http_server_config.headers"
    ).items():
        if name not in HEADERS:
            raise WebConfigError(
                f"{source}: http_server_config.headers: {name!r} can not be configured; "
                f"expected one of {', '.join(HEADERS)}"
            )
        text = _string(value, source, f"http_server_config.headers.{name}")
        allowed = HEADERS[name]
        if allowed is not None and text not in allowed:
            raise WebConfigError(
                f"{source}: http_server_config.headers.{name} {text!r}: expected one of "
                f"{', '.join(allowed)}"
            )
        if any(ch in text for ch in "\r\n\0"):
            raise WebConfigError(f"{source}: http_server_config.headers.{name} holds a line break")
        headers[name] = text
    return headers


def _parse_tls(doc: Mapping[str, Any], base: Path, source: str) -> TLSServerConfig:
    _check_keys(doc, TLS_KEYS, source, "tls_server_config.")
    sans = _string_list(doc.get("client_allowed_sans"), source)
    values = {
        k: _string(v, source, f"tls_server_config.{k}")
        for k, v in doc.items()
        if k != "client_allowed_sans"
    }
    for key in ("cert_file", "key_file"):
        if not values.get(key):
            raise WebConfigError(f"{source}: tls_server_config.{key} is missing")
    auth = values.get("client_auth_type") or "NoClientCert"
    if auth in UNSUPPORTED_CLIENT_AUTH:
        raise WebConfigError(
            f"{source}: tls_server_config.client_auth_type {auth} is not supported (Python's "
            "TLS cannot ask for a client certificate without verifying it): use "
            "VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file"
        )
    if auth not in CLIENT_AUTH_TYPES:
        raise WebConfigError(
            f"{source}: tls_server_config.client_auth_type {auth!r}: expected one of "
            f"{', '.join(CLIENT_AUTH_TYPES)}"
        )
    ca = values.get("client_ca_file") or None
    if ca and auth == "NoClientCert":
        raise WebConfigError(
            f"{source}: tls_server_config.client_ca_file is set but client_auth_type is "
            "NoClientCert: set client_auth_type (e.g. RequireAndVerifyClientCert)"
        )
    if not ca and auth != "NoClientCert":
        raise WebConfigError(
            f"{source}: tls_server_config.client_auth_type {auth} needs client_ca_file"
        )
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        versions[key] = values.get(key) or default
        if versions[key] not in TLS_VERSIONS:
            raise WebConfigError(
                f"{source}: tls_server_config.{key} {versions[key]!r}: expected one of "
                f"{', '.join(TLS_VERSIONS)}"
            )
    if TLS_VERSIONS[versions["min_version"]] > TLS_VERSIONS[versions["max_version"]]:
        raise WebConfigError(f"{source}: tls_server_config.min_version is above max_version")
    if sans and auth != "RequireAndVerifyClientCert":
        raise WebConfigError(
            f"{source}: tls_server_config.client_allowed_sans needs client_auth_type "
            "RequireAndVerifyClientCert (a client without a certificate names no SAN)"
        )
    return TLSServerConfig(
        cert_file=base / values["cert_file"],
        key_file=base / values["key_file"],
        client_auth_type=auth,
        client_ca_file=base / ca if ca else None,
        min_version=versions["min_version"],
        max_version=versions["max_version"],
        client_allowed_sans=sans,
    )


def _string_list(doc: object, source: str) -> tuple[str, ...]:
    where = "tls_server_config.client_allowed_sans"
    if doc is None:
        return ()
    if not isinstance(doc, list) or not all(isinstance(v, str) and v for v in doc):
        raise WebConfigError(f"{source}: {where} must be a list of names")
    return tuple(doc)


def _parse_users(doc: object, source: str) -> dict[str, bytes]:
    if doc is None:
        return {}
    users = {}
    for user, hashed in _mapping(doc, source, "basic_auth_users").items():
        where = f"basic_auth_users.{user}"
        value = _string(hashed, source, where).encode()
        # A bcrypt hash: $2a$, $2b$ or $2y$, a two-digit cost, 53 characters of salt and hash.
        if len(value) != 60 or value[:4] not in (b"$2a$", b"$2b$", b"$2y$"):
            raise WebConfigError(
                f"{source}: {where} is not a bcrypt hash (make one with: "
                "htpasswd -nBC 12 '' | tr -d ':\\n', or python -c \"import bcrypt; "
                "print(bcrypt.hashpw(b'PASSWORD', bcrypt.gensalt()).decode())\")"
            )
        users[user] = value
    return users


def _mapping(doc: object, source: str, where: str) -> Mapping[str, Any]:
    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        raise WebConfigError(f"{source}: {where} must be a mapping of names to values")
    return doc


def _string(value: object, source: str, where: str) -> str:
    if not isinstance(value, str):
        raise WebConfigError(f"{source}: {where} must be a string")
    return value


def _check_keys(doc: Mapping[str, Any], known: frozenset[str], source: str, prefix: str) -> None:
    for key in doc:
        if key in known:
            continue
        if key in TOOLKIT_ONLY_KEYS:
            raise WebConfigError(
                f"{source}: {prefix}{key} is an exporter-toolkit setting fleetwatch does not "
                "implement; remove it"
            )
        raise WebConfigError(
            f"{source}: unknown key {prefix}{key}; expected one of {', '.join(sorted(known))}"
        )


def server_ssl_context(tls: TLSServerConfig, source: str = "web config") -> ssl.SSLContext:
    """The server's TLS context: its certificate, versions and client-certificate policy."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = TLS_VERSIONS[tls.max_version]
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(
            f"{source}: tls_server_config cert_file {tls.cert_file} / key_file {tls.key_file}: "
            f"{_tls_reason(exc)}"
        ) from None
    ctx.verify_mode = CLIENT_AUTH_TYPES[tls.client_auth_type]
    if tls.client_ca_file is not None:
        try:
            ctx.load_verify_locations(cafile=tls.client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(
                f"{source}: tls_server_config.client_ca_file {tls.client_ca_file}: "
                f"{_tls_reason(exc)}"
            ) from None
    return ctx


def _tls_reason(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return exc.strerror or str(exc)


#: Seconds between two looks at the certificate files, by the handshakes that need them.
TLS_RECHECK_S: Final = 1.0


class ReloadingTLS:
    """The server's TLS context, following its certificate, key and client CA files.

    cert-manager, a Kubernetes Secret volume or a cron job renews certificates in place;
    exporter-toolkit reads them again for each handshake, and so do we, at most once per
    ``recheck_s``: when a file changed, a new context is built and every handshake from
    then on (the one that noticed included) uses it. A renewal that cannot be loaded (a
    key that does not match, a half-written file) keeps the previous certificate, with a
    warning, and is tried again at the next change. The rest of the web config file is
    read at start-up only.
    """

    def __init__(
        self,
        tls: TLSServerConfig,
        source: str = "web config",
        *,
        recheck_s: float = TLS_RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tls = tls
        self._source = source
        self._recheck_s = recheck_s
        self._clock = clock
        self._next_check = clock() + recheck_s
        self._signature = self._files()
        #: The context the server listens with; its callback hands a handshake ``current``.
        self.listening = server_ssl_context(tls, source)
        self.listening.sni_callback = self._on_client_hello
        self.current = self.listening

    def _files(self) -> tuple[tuple[int, int, int], ...]:
        paths = [self.tls.cert_file, self.tls.key_file, self.tls.client_ca_file]
        found = []
        for path in paths:
            try:
                st = path.stat() if path is not None else None
            except OSError:
                st = None
            found.append((st.st_ino, st.st_size, st.st_mtime_ns) if st else (0, 0, 0))
        return tuple(found)

    def refresh(self) -> bool:
        """Load the files again if they changed; True when a new context is in use."""
        signature = self._files()
        if signature == self._signature:
            return False
        self._signature = signature
        try:
            self.current = server_ssl_context(self.tls, self._source)
        except WebConfigError as exc:
            log.warning("TLS files changed but cannot be used, keeping the previous: %s", exc)
            return False
        log.info("TLS files changed: certificate %s loaded again", self.tls.cert_file)
        return True

    def _on_client_hello(
        self, conn: ssl.SSLSocket | ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext
    ) -> None:
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + self._recheck_s
            self.refresh()
        if self.current is not ctx:
            conn.context = self.current


def server_tls(tls: TLSServerConfig, source: str = "web config") -> ssl.SSLContext:
    """The context a server listens with: ``tls``, its files followed as they are renewed."""
    return ReloadingTLS(tls, source).listening
