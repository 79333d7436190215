"""The management cluster's API as ``fleetwatch.kube.informer`` needs it: a list page, a watch.

A small hand-written client on aiohttp (already the product's HTTP stack) rather than the
``kubernetes`` client: measured on the watch path (``docs/exporter.md``, "The management
cluster's client"), it lists and streams on the event loop with no thread, and keeps the
36 MiB client unloaded. Two calls only:

- :meth:`KubeApi.list`: one ``GET`` answering a JSON list (a page);
- :meth:`KubeApi.watch`: a ``GET ...?watch=1`` whose body is one JSON event per line,
  yielded as dicts until the server closes the stream (cleanly: the caller resumes).

Any answer but 200 is an :class:`KubeApiError` with the HTTP status, the ``Status`` reason and
message (the server's words, truncated: they name users and namespaces, never a
credential) and ``Retry-After`` when given; a network failure or timeout is one too
(status 0). A line longer than :data:`MAX_LINE` (a Secret is at most 1 MiB, 1.37 MiB in
base64) ends the stream as an error rather than growing a buffer without bound.

A list page over :data:`THREAD_DECODE_MIN` bytes is decoded in a worker thread, one item
at a time (:func:`decode_list`): a page of 500 Secrets is 10-24 ms of ``json.loads``
(measured in bench/RESULTS.md), and the C decoder never lets another thread have the
interpreter until it is done, so ``json.loads`` in a thread would still hold the loop the
whole page. Between two items the worker runs Python code, where the interpreter hands the
loop its turn every switch interval (CPython's 5 ms, the reactor's 0.25 ms), so no page
holds it whole; and the decode is background work: while a request is answered it gives
way (``fleetwatch.common.foreground``). In the reactor at 20,000 Secrets, once its store
writer no longer fell behind, that brought the first list's p99 from 54-83 ms to 45-50 ms
(bench/RESULTS.md); before, other threads held the interpreter and it moved nothing.

I/O (aiohttp, asyncio): exempt from the pure-discovery contract in ``.importlinter``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import aiohttp

from fleetwatch.common.backgroundpool import in_background
from fleetwatch.common.foreground import Slices
from fleetwatch.kube.kubeauth import ApiCredentials, KubeAuthError

#: The longest watch event line accepted (bytes).
MAX_LINE = 4 << 20

#: A list answer this long (bytes) or longer is decoded in a worker thread (module docstring);
#: a smaller one (an empty kind's page, a test's) costs less than the thread's hand-off.
THREAD_DECODE_MIN = 64 << 10

_WHITESPACE = re.compile(r"[ \t\n\r]*")

#: HTTP status -> the reason an error is counted under (a fixed, small set).
_REASONS = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    410: "expired",
    429: "throttled",
}


class KubeApiError(Exception):
    """A request that did not answer 200; ``reason`` is one of a fixed set (metrics)."""

    def __init__(
        self, status: int, reason: str, message: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status or ''} {reason}: {message}".strip(" :"))
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


def status_reason(status: int) -> str:
    """The counted reason of an HTTP status."""
    if status in _REASONS:
        return _REASONS[status]
    return "server_error" if status >= 500 else "bad_request" if status >= 400 else "bad_response"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, min(float(value), 600.0))
    except ValueError:
        return None


class KubeApi:
    """Authenticated GETs to one API server (an async context manager owns the session)."""

    def __init__(self, credentials: ApiCredentials, *, request_timeout: float = 60.0) -> None:
        self.credentials = credentials
        self.request_timeout = request_timeout
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"KubeApi({self.credentials.server!r}, {self.credentials.origin!r})"

    async def __aenter__(self) -> KubeApi:
        connector = aiohttp.TCPConnector(ssl=self.credentials.ssl_context or False, limit=32)
        self._session = aiohttp.ClientSession(
            connector=connector, headers={"User-Agent": "fleetwatch-discovery"}
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        try:
            auth = self.credentials.authorization()
        except KubeAuthError as exc:
            raise KubeApiError(0, "credentials", str(exc)) from None
        if auth:
            headers["Authorization"] = auth
        return headers

    def _url(self, path: str) -> str:
        return self.credentials.server + path

    async def _fail(self, resp: aiohttp.ClientResponse) -> KubeApiError:
        if resp.status == 401:
            self.credentials.unauthorized()
        message = ""
        try:
            body = json.loads(await resp.content.read(64 << 10))
            if isinstance(body, dict):
                message = str(body.get("message", ""))[:300]
        except (TimeoutError, ValueError, aiohttp.ClientError):
            pass
        reason = status_reason(resp.status)
        return KubeApiError(resp.status, reason, message, _retry_after(resp.headers))

    def _session_or_fail(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("KubeApi used outside 'async with'")
        return self._session

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """One page of a list (the caller pages with ``limit``/``continue``)."""
        session = self._session_or_fail()
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        try:
            async with session.get(
                self._url(path),
                params=dict(params),
                headers=self._headers(),
                timeout=timeout,
                server_hostname=self.credentials.server_hostname,
            ) as resp:
                if resp.status != 200:
                    raise await self._fail(resp)
                body = await resp.read()
        except aiohttp.ClientError as exc:
            raise KubeApiError(0, "network", type(exc).__name__) from None
        except TimeoutError:
            raise KubeApiError(0, "timeout", f"no answer in {self.request_timeout:g} s") from None
        try:
            if len(body) >= THREAD_DECODE_MIN:
                data = await in_background(decode_list, body)
            else:
                data = json.loads(body)
        except ValueError:
            raise KubeApiError(200, "bad_response", "list answer is not JSON") from None
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            raise KubeApiError(200, "bad_response", "list answer has no items")
        return data

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events of a watch, until the server ends it (``timeout``: its own deadline,
        past which a silent stream is an error)."""
        session = self._session_or_fail()
        client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=self.request_timeout)
        try:
            async with session.get(
                self._url(path),
                params={**params, "watch": "1"},
                headers=self._headers(),
                timeout=client_timeout,
                server_hostname=self.credentials.server_hostname,
            ) as resp:
                if resp.status != 200:
                    raise await self._fail(resp)
                buffer = b""
                async for chunk in resp.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    if len(buffer) > MAX_LINE:
                        raise KubeApiError(200, "bad_response", f"event over {MAX_LINE} bytes")
                    for line in lines:
                        if line.strip():
                            yield _event(line)
                if buffer.strip():
                    yield _event(buffer)
        except aiohttp.ClientError as exc:
            raise KubeApiError(0, "network", type(exc).__name__) from None
        except TimeoutError:
            raise KubeApiError(0, "timeout", f"watch silent past {timeout:g} s") from None


def decode_list(body: bytes) -> Any:
    """``json.loads(body)``, decoding the ``items`` array of a top-level object one item at
    a time, so that a thread running it yields the interpreter between two items (module
    docstring). Anything but a UTF-8 object of that shape is left to ``json.loads``, whose
    value or ``ValueError`` is then the answer."""
    try:
        return _decode_object_by_item(body.decode())
    except (ValueError, IndexError):
        return json.loads(body)


def _decode_object_by_item(text: str) -> dict[str, Any]:
    decode = json.JSONDecoder().raw_decode

    def skip(at: int) -> int:
        match = _WHITESPACE.match(text, at)
        assert match is not None  # "*" matches the empty string
        return match.end()

    def expect(at: int, char: str) -> int:
        if text[at] != char:
            raise ValueError(f"expected {char!r} at {at}")
        return skip(at + 1)

    result: dict[str, Any] = {}
    at = expect(skip(0), "{")
    if text[at] == "}":
        at = skip(at + 1)
    else:
        while True:
            key, at = decode(text, at)
            if not isinstance(key, str):
                raise ValueError(f"object key expected at {at}")
            at = expect(skip(at), ":")
            if key == "items" and text[at] == "[":
                items: list[Any] = []
                at = skip(at + 1)
                if text[at] != "]":
                    slices = Slices()
                    while True:
                        item, at = decode(text, at)
                        items.append(item)
                        slices.tick()  # a request answered meanwhile goes first
                        at = skip(at)
                        if text[at] != ",":
                            break
                        at = skip(at + 1)
                at = expect(at, "]")
                result[key] = items
            else:
                result[key], at = decode(text, at)
                at = skip(at)
            if text[at] != ",":
                break
            at = skip(at + 1)
        at = expect(at, "}")
    if at != len(text):
        raise ValueError(f"extra data at {at}")
    return result


def _event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        raise KubeApiError(200, "bad_response", "watch event is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        raise KubeApiError(200, "bad_response", "watch event has no object")
    return event
