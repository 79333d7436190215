"""How the reactor authenticates to Alertmanager, and how much of a listing it reads.

``--alertmanager.url http://user:password@host:9093`` works, but the command line is public
on the machine (``ps``, ``/proc/PID/cmdline``, a pod's spec). So the credentials may come
from ``--alertmanager.http-config.file`` instead: the HTTP client configuration of the
Prometheus ecosystem, the file that ``amtool --http.config.file`` and ``promtool
--http.config.file`` read to reach an Alertmanager or a Prometheus (prometheus/common's
``HTTPClientConfig``), with the keys the reactor needs::

    basic_auth:
      username: fleetwatch
      password_file: /etc/fleetwatch/alertmanager-password   # or password: ...
    # or, for a proxy in front of Alertmanager that wants a token:
    authorization:
      type: Bearer                                          # the default
      credentials_file: /etc/fleetwatch/alertmanager-token  # or credentials: ...

Why that file rather than a ``--alertmanager.basic-auth-password-file`` flag: it is what
people who run Prometheus already write (the same keys as the ``alerting`` section of
``prometheus.yml``), one file serves every ``--alertmanager.url``, and a bearer token fits
as well as a password. As in Prometheus: paths are relative to the file's folder, a
``*_file`` is read at each request (a rotated secret is used at the next reconciliation,
no restart), and the file is strict: any other key is refused with its name, including
the keys of Prometheus' configuration the reactor does not implement (``tls_config``,
``oauth2``, ``proxy_url`` ...), so a setting is never silently ignored.

No credential is ever logged or shown: errors name the file and the key, never a value.

``--alertmanager.max-listing-bytes`` bounds one ``GET /api/v2/alerts``: an Alertmanager
that lists far more than fleetwatch's status alerts (or a wrong URL that answers a huge
body) costs a counted failure with a clear message, not the memory and CPU of reading it.
"""

from __future__ import annotations

import argparse
import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reactor.secretfile import SecretFileError, read_secret

#: Default of ``--alertmanager.max-listing-bytes``: about 24,000 alerts as Alertmanager 0.25
#: lists them (about 700 bytes each); the reactor asks for its status alerts only.
DEFAULT_MAX_LISTING_BYTES = 16 * 1024 * 1024
MIN_LISTING_BYTES = 1024

FLAG = "--alertmanager.http-config.file"

#: Keys of prometheus/common's HTTP client configuration the reactor does not implement.
_NOT_IMPLEMENTED = frozenset(
    {
        "bearer_token",
        "bearer_token_file",
        "tls_config",
        "oauth2",
        "proxy_url",
        "no_proxy",
        "proxy_from_environment",
        "proxy_connect_header",
        "follow_redirects",
        "enable_http2",
        "http_headers",
    }
)


class HTTPConfigError(ValueError):
    """The file cannot be used; the message names the file and key, never a secret."""


@dataclass(frozen=True, slots=True)
class Secret:
    """A value given in the file, or the file holding it (read at each use)."""

    value: str | None = None
    path: Path | None = None

    def read(self) -> str:
        if self.path is None:
            assert self.value is not None
            return self.value
        return read_secret(self.path)


@dataclass(frozen=True, slots=True)
class AlertmanagerAuth:
    """The ``Authorization`` header to send: basic auth (``username``) or ``scheme``."""

    source: str  #: the file, for messages
    secret: Secret
    username: str | None = None  #: basic auth when set
    scheme: str = "Bearer"

    def header(self) -> str:
        """The header's value now (a ``*_file`` read again); :class:`HTTPConfigError`."""
        try:
            secret = self.secret.read()
        except SecretFileError as exc:
            raise HTTPConfigError(f"{self.source}: {exc}") from None
        if self.username is None:
            return f"{self.scheme} {secret}"
        pair = f"{self.username}:{secret}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def load_http_config(path: Path) -> AlertmanagerAuth | None:
    """Read and check the file; None when it sets no credentials (an empty file)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise HTTPConfigError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise HTTPConfigError(f"{path}: not UTF-8 text") from None
    return parse_http_config(text, base=path.parent, source=str(path))


def parse_http_config(text: str, *, base: Path, source: str) -> AlertmanagerAuth | None:
    """The credentials ``text`` sets (relative paths from ``base``); strict, as Prometheus."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise HTTPConfigError(f"{source}: not YAML{line}") from None
    if doc is None:
        return None
    top = _mapping(doc, source, "the file")
    _check_keys(top, frozenset({"basic_auth", "authorization"}), source, "")
    if "basic_auth" in top and "authorization" in top:
        raise HTTPConfigError(f"{source}: basic_auth and authorization both set: give one")
    if "basic_auth" in top:
        basic = _mapping(top["basic_auth"], source, "basic_auth")
        known = frozenset({"username", "password", "password_file"})
        _check_keys(basic, known, source, "basic_auth.")
        username = _string(basic.get("username"), source, "basic_auth.username")
        if ":" in username:
            raise HTTPConfigError(f"{source}: basic_auth.username may not hold ':'")
        secret = _secret(basic, "password", base, source, "basic_auth.")
        return AlertmanagerAuth(source, secret, username=username)
    if "authorization" in top:
        auth = _mapping(top["authorization"], source, "authorization")
        known = frozenset({"type", "credentials", "credentials_file"})
        _check_keys(auth, known, source, "authorization.")
        scheme = _string(auth.get("type", "Bearer"), source, "authorization.type")
        if scheme.lower() == "basic":
            raise HTTPConfigError(
                f"{source}: authorization.type Basic: use basic_auth (as Prometheus requires)"
            )
        if not scheme.isalnum():
            raise HTTPConfigError(f"{source}: authorization.type must be one word, e.g. Bearer")
        secret = _secret(auth, "credentials", base, source, "authorization.")
        return AlertmanagerAuth(source, secret, scheme=scheme)
    return None


def _secret(doc: dict[str, Any], key: str, base: Path, source: str, prefix: str) -> Secret:
    inline, file = doc.get(key), doc.get(f"{key}_file")
    if inline is not None and file is not None:
        raise HTTPConfigError(f"{source}: {prefix}{key} and {prefix}{key}_file both set")
    if file is not None:
        path = base / _string(file, source, f"{prefix}{key}_file")
        try:
            read_secret(path)  # refused at start rather than at the first reconciliation
        except SecretFileError as exc:
            raise HTTPConfigError(f"{source}: {prefix}{key}_file {exc}") from None
        return Secret(path=path)
    if inline is None:
        raise HTTPConfigError(f"{source}: {prefix}{key} or {prefix}{key}_file is required")
    value = _string(inline, source, f"{prefix}{key}")
    if not value:
        raise HTTPConfigError(f"{source}: {prefix}{key} is empty")
    return Secret(value=value)


def _mapping(doc: object, source: str, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise HTTPConfigError(f"{source}: {where} must be a mapping")
    return doc


def _string(value: object, source: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise HTTPConfigError(f"{source}: {where} must be a non-empty string")
    return value


def _check_keys(doc: dict[str, Any], known: frozenset[str], source: str, prefix: str) -> None:
    for key in doc:
        if key in _NOT_IMPLEMENTED:
            raise HTTPConfigError(
                f"{source}: {prefix}{key} is not supported by the reactor "
                "(it reads basic_auth and authorization)"
            )
        if key not in known:
            raise HTTPConfigError(f"{source}: unknown key {prefix}{key}")


# -- flags (fleetwatch reactor) ------------------------------------------------------------


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        FLAG,
        dest="alertmanager_http_config",
        metavar="FILE",
        type=Path,
        help="credentials for --alertmanager.url, as amtool's --http.config.file: basic_auth "
        "(username, password_file) or authorization (type, credentials_file); files are read "
        "at each request. Keeps them off the command line, which ps shows (default: none)",
    )
    p.add_argument(
        "--alertmanager.max-listing-bytes",
        dest="alertmanager_max_listing_bytes",
        metavar="BYTES",
        type=int,
        default=DEFAULT_MAX_LISTING_BYTES,
        help="a bigger answer to GET /api/v2/alerts is not read: that reconciliation fails, "
        f"counted and logged (default: {DEFAULT_MAX_LISTING_BYTES}, about 24,000 alerts)",
    )


def from_args(
    args: argparse.Namespace, urls: tuple[str, ...]
) -> tuple[AlertmanagerAuth | None, int]:
    """(the credentials of the file, the listing bound); ValueError with a clear message."""
    if args.alertmanager_max_listing_bytes < MIN_LISTING_BYTES:
        raise ValueError(f"--alertmanager.max-listing-bytes must be at least {MIN_LISTING_BYTES}")
    auth = None
    if args.alertmanager_http_config is not None:
        try:
            auth = load_http_config(args.alertmanager_http_config)
        except HTTPConfigError as exc:
            raise ValueError(f"{FLAG} {exc}") from None
        if auth is not None and any(has_credentials(url) for url in urls):
            raise ValueError(
                f"--alertmanager.url carries credentials and {FLAG} sets them too: give one"
            )
    return auth, args.alertmanager_max_listing_bytes


def has_credentials(url: str) -> bool:
    """The URL holds a user or a password (``http://user:pass@host``)."""
    _, sep, rest = url.partition("://")
    return bool(sep) and "@" in rest.split("/", 1)[0]
