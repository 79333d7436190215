"""Which HTTP proxy a request to an API server goes through, decided as kubectl decides it.

Pure: no socket, no environment read here (the cycle hands in ``os.environ`` once, at
start, as Go reads it once per process).

- A kubeconfig cluster's ``proxy-url`` is always used for that cluster, whatever the
  host (client-go's ``http.ProxyURL``).
- Otherwise the environment, with Go's ``httpproxy`` rules: ``HTTPS_PROXY`` (or
  ``https_proxy``) for ``https://`` servers, ``HTTP_PROXY`` (or ``http_proxy``) for
  ``http://`` ones, a value without a scheme meaning ``http://``; never for ``localhost``
  or a loopback address; never for a host matched by ``NO_PROXY`` (or ``no_proxy``): a
  comma list of ``*`` (everything), IP addresses, CIDR ranges, and domain names, each
  with an optional ``:port``. ``example.com`` matches that host and its sub-domains,
  ``.example.com`` (or ``*.example.com``) the sub-domains only.

Only ``http://`` proxies are spoken to (a ``CONNECT`` tunnel, for ``https://`` and
``http://`` servers alike). Another scheme, or a value that is not a URL, is a
:class:`ProxyError` the probe reports with the reason ``proxy``, never a silent direct
connection. A :class:`Proxy` keeps its credentials (``user:password@``) as the
``Proxy-Authorization`` header, out of ``repr`` and out of :attr:`Proxy.label`, the only
form that goes into a log line.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote, urlsplit

__all__ = ["EnvironmentProxies", "Proxy", "ProxyError", "parse_proxy", "select"]


class ProxyError(Exception):
    """A proxy setting that cannot be used; the message never holds the URL's credentials."""


@dataclass(frozen=True)
class Proxy:
    """An ``http://`` proxy: where to connect, and the header that authenticates us."""

    host: str
    port: int
    #: ``Basic ...`` for a URL with ``user:password@``; a secret, so kept out of ``repr``
    authorization: str | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """``http://host:port``: what logs and failure details say (never the credentials)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def connect_request(self, host: str, port: int) -> bytes:
        """The ``CONNECT host:port`` request that opens a tunnel to an API server."""
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self.authorization is not None:
            lines.append(f"Proxy-Authorization: {self.authorization}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@lru_cache(maxsize=1024)
def parse_proxy(url: str, source: str = "proxy-url") -> Proxy:
    """A :class:`Proxy` from a proxy URL; ``source`` names the setting in the error.

    A value without a scheme is ``http://`` (Go does the same for the environment).
    Cached: each cluster's probe asks for it every cycle.
    """
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ProxyError(f"{source} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme != "http":
        raise ProxyError(f"{source}: {scheme}:// proxies are not supported, only http://")
    if not parts.hostname:
        raise ProxyError(f"{source} names no host")
    authorization = None
    if parts.username is not None:
        user = unquote(parts.username)
        password = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        authorization = f"Basic {token}"
    return Proxy(parts.hostname, port or 80, authorization)


# -- the environment, as Go's golang.org/x/net/http/httpproxy reads it ----------------


@dataclass(frozen=True)
class _NoProxyEntry:
    """One ``NO_PROXY`` entry: a network, or a domain suffix; either with a port or not."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    suffix: str  #: ``.example.com`` (leading dot), for names
    match_host: bool  #: the entry had no leading dot: ``example.com`` itself matches too
    port: int | None


def _no_proxy_entries(value: str) -> tuple[tuple[_NoProxyEntry, ...], bool]:
    """The entries of a ``NO_PROXY`` value, and whether it is ``*`` (everything)."""
    entries: list[_NoProxyEntry] = []
    for raw in value.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item == "*":
            return (), True
        try:  # a CIDR range (a bare address is a /32 or /128 range: the same match)
            network = ipaddress.ip_network(item, strict=False)
        except ValueError:
            pass
        else:
            entries.append(_NoProxyEntry(network, "", False, None))
            continue
        host, port = _split_port(item)
        if not host:
            continue  # ":8080" alone: malformed, ignored as Go does
        try:
            network = ipaddress.ip_network(host.strip("[]"))
        except ValueError:
            pass
        else:
            entries.append(_NoProxyEntry(network, "", False, port))
            continue
        if host.startswith("*."):
            host = host[1:]
        match_host = not host.startswith(".")
        entries.append(
            _NoProxyEntry(None, host if not match_host else "." + host, match_host, port)
        )
    return tuple(entries), False


def _split_port(item: str) -> tuple[str, int | None]:
    """``host[:port]`` or ``[v6]:port`` -> (host, port); a bad port keeps it all as host."""
    head, sep, tail = item.rpartition(":")
    if not sep or "]" in tail or (head.count(":") and not head.endswith("]")):
        return item, None
    try:
        return head, int(tail)
    except ValueError:
        return item, None


class EnvironmentProxies:
    """``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` of one environment, read once."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        def first(*names: str) -> tuple[str, str] | None:
            for name in names:
                value = environ.get(name, "")
                if value:
                    return name, value
            return None

        self._https = first("HTTPS_PROXY", "https_proxy")
        self._http = first("HTTP_PROXY", "http_proxy")
        no_proxy = first("NO_PROXY", "no_proxy")
        self._no_proxy, self._bypass_all = _no_proxy_entries(no_proxy[1] if no_proxy else "")

    def for_host(self, tls: bool, host: str, port: int) -> Proxy | None:
        """The proxy for a server at ``host:port`` (``tls``: an ``https://`` URL), or None.

        Raises :class:`ProxyError` when the variable that applies is not a usable proxy.
        """
        setting = self._https if tls else self._http
        if setting is None or not self._use_proxy(host.lower().strip("[]"), port):
            return None
        name, value = setting
        return parse_proxy(value, name)

    def _use_proxy(self, host: str, port: int) -> bool:
        if host == "localhost" or self._bypass_all:
            return False
        try:
            ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            # Go's net.IP holds ::ffff:a.b.c.d as the IPv4 address it maps (To4), so
            # IsLoopback and an IPv4 CIDR of NO_PROXY see 127.0.0.1, 192.0.2.3, ...
            ip = ip.ipv4_mapped
        if ip is not None and ip.is_loopback:
            return False
        for entry in self._no_proxy:
            if entry.port is not None and entry.port != port:
                continue
            if entry.network is not None:
                if ip is not None and ip in entry.network:
                    return False
            elif ip is None and (
                host.endswith(entry.suffix) or (entry.match_host and host == entry.suffix[1:])
            ):
                return False
        return True


def select(
    proxy_url: str | None, environment: EnvironmentProxies, tls: bool, host: str, port: int
) -> Proxy | None:
    """The proxy of one cluster: its kubeconfig's ``proxy-url``, else the environment's.

    Raises :class:`ProxyError` for a setting that cannot be used.
    """
    if proxy_url:
        return parse_proxy(proxy_url)
    return environment.for_host(tls, host, port)
