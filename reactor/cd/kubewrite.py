"""Writes to the management cluster's API: the CD actuator's patches, the Lease's requests.

:class:`KubeWriter` is ``discovery.kubeapi.KubeApi`` (the same aiohttp session, TLS and
bearer token, so one client lists, watches and writes) with two more calls:
:meth:`KubeWriter.merge_patch`, a JSON merge patch (``application/merge-patch+json``;
custom resources refuse a strategic merge patch with 415) sent with
``fieldManager=fleetwatch``, the one change the actuator makes to an object; and
:meth:`KubeWriter.send`, one request answered by an object, with which leader election
gets, creates and replaces its Lease (``reactor.cd.election``). Discovery stays
read-only; the writes live with the reactor, the only part that makes them.

Errors are ``KubeApiError`` as for a list, with one more reason: ``conflict`` for a 409,
the ``resourceVersion`` precondition that failed (the object changed since the decision:
the next evaluation sees the new one). The body of an error is read for its message only
(truncated, the server's words), and nothing of a request's body is logged by this module.

I/O (aiohttp).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from discovery.kubeapi import KubeApi, KubeApiError
from reactor.cd.patches import FIELD_MANAGER

MERGE_PATCH = "application/merge-patch+json"


class KubeWriter(KubeApi):
    """``KubeApi`` that also writes (module docstring)."""

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``patch`` to the object at ``path``; the object as the server stored it."""
        params = {"fieldManager": FIELD_MANAGER}
        return await self.send("PATCH", path, patch, content_type=MERGE_PATCH, params=params)

    async def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """One request whose answer is an object (2xx): a get, a create, a replace, a
        patch; ``KubeApiError`` otherwise (``conflict`` for a 409). ``timeout``: the
        longest wait (default: the client's request timeout)."""
        session = self._session_or_fail()
        headers = self._headers()
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
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
