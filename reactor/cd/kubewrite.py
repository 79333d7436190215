"""Writes to the management cluster's API: the CD actuator's patches, the Lease's requests.

:class:`KubeWriter` is ``fleetwatch.kube.kubeapi.KubeApi`` (the same aiohttp session, TLS and
bearer token, so one client lists, watches and writes) with two more calls:
:meth:`KubeWriter.merge_patch`, a JSON merge patch (``application/merge-patch+json``;
custom resources refuse a strategic merge patch with 415) sent with
``fieldManager=fleetwatch``, the one change the actuator makes to an object, always
behind a :data:`Guard`; :meth:`KubeWriter.create`, the Event that follows a pause or a
resume (``reactor.cd.events``), behind the same guard; and
:meth:`KubeWriter.send`, one request answered by an object, with which leader election
gets, creates and replaces its Lease (``reactor.cd.election``). Discovery stays
read-only; the writes live with the reactor, the only part that makes them.

**The guard** (the fence, ``reactor.cd.fence``) is awaited at the last moment a request can
still be kept from leaving: when aiohttp writes the body, so after the caller's waits
(the actuator's concurrency limit), after the connection was taken from the pool or
opened, and before any byte of the request is on the socket (aiohttp holds the headers
back to send them with the body; an older one sends them first, and a connection closed
after headers alone carries no request). Nothing is awaited between the guard's last
statement and the write. A guard that refuses raises :class:`Fenced`: the connection is
closed unused and the caller gets the :class:`Fenced` back.

Errors are ``KubeApiError`` as for a list, with one more reason: ``conflict`` for a 409,
the ``resourceVersion`` precondition that failed (the object changed since the decision:
the next evaluation sees the new one). The body of an error is read for its message only
(truncated, the server's words), and nothing of a request's body is logged by this module.

I/O (aiohttp).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import BytesPayload

from fleetwatch.kube.kubeapi import KubeApi, KubeApiError
from reactor.cd.patches import FIELD_MANAGER

MERGE_PATCH = "application/merge-patch+json"

#: A write's last-moment check (module docstring): returns to let the request leave, raises
#: :class:`Fenced` to keep it.
Guard = Callable[[], Awaitable[None]]


class Fenced(Exception):
    """A write kept from leaving by its guard; ``reason`` is one of a fixed set (metrics)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _GuardedBody(BytesPayload):
    """A request body that awaits its guard before its first byte is written."""

    def __init__(self, value: bytes, guard: Guard, content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._guard = guard

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self._guard()
        await super().write(writer)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        await self._guard()
        await super().write_with_length(writer, content_length)


class KubeWriter(KubeApi):
    """``KubeApi`` that also writes (module docstring)."""

    async def merge_patch(
        self,
        path: str,
        patch: Mapping[str, Any],
        guard: Guard,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """Apply ``patch`` to the object at ``path`` unless ``guard`` refuses at the last
        moment (:class:`Fenced`); the object as the server stored it. ``timeout``: the
        longest the whole request may take (the guard counts on it)."""
        params = {"fieldManager": FIELD_MANAGER}
        return await self.send(
            "PATCH",
            path,
            patch,
            content_type=MERGE_PATCH,
            params=params,
            timeout=timeout,
            guard=guard,
        )

    async def create(
        self,
        path: str,
        body: Mapping[str, Any],
        guard: Guard,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """POST ``body`` to the collection at ``path`` (an Event, ``reactor.cd.events``)
        unless ``guard`` refuses at the last moment; ``conflict`` when the name exists."""
        params = {"fieldManager": FIELD_MANAGER}
        return await self.send("POST", path, body, params=params, timeout=timeout, guard=guard)

    async def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
        guard: Guard | None = None,
    ) -> dict[str, Any]:
        """One request whose answer is an object (2xx): a get, a create, a replace, a
        patch; ``KubeApiError`` otherwise (``conflict`` for a 409), :class:`Fenced` when
        ``guard`` kept it. ``timeout``: the longest wait (default: the client's request
        timeout), from the call on."""
        session = self._session_or_fail()
        headers = self._headers()
        data: bytes | _GuardedBody | None = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
            if guard is not None:
                data = _GuardedBody(data, guard, content_type)
        elif guard is not None:
            raise ValueError("a guarded request needs a body: the guard runs as it is written")
        limit = self.request_timeout if timeout is None else timeout
        try:
            async with session.request(
                method,
                self._url(path),
                params=dict(params or {}),
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=limit),
                server_hostname=self.credentials.server_hostname,
            ) as resp:
                if not 200 <= resp.status < 300:
                    error = await self._fail(resp)
                    if resp.status == 409:
                        error.reason = "conflict"
                    raise error
                answer = await resp.read()
        except aiohttp.ClientError as exc:
            if isinstance(exc.__cause__, Fenced):  # aiohttp wraps what the body raised
                raise exc.__cause__ from None
            raise KubeApiError(0, "network", type(exc).__name__) from None
        except TimeoutError:
            raise KubeApiError(0, "timeout", f"no answer in {limit:g} s") from None
        try:
            found = json.loads(answer)
        except ValueError:
            raise KubeApiError(200, "bad_response", f"{method} answer is not JSON") from None
        if not isinstance(found, dict):
            raise KubeApiError(200, "bad_response", f"{method} answer is not an object")
        return found
