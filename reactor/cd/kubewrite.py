"""PATCH to the management cluster's API: the one write the CD actuator makes.

:class:`KubeWriter` is ``discovery.kubeapi.KubeApi`` (the same aiohttp session, TLS and
bearer token, so one client lists, watches and patches) with one more call,
:meth:`KubeWriter.merge_patch`: a JSON merge patch (``application/merge-patch+json``;
custom resources refuse a strategic merge patch with 415) sent with
``fieldManager=fleetwatch``. Discovery stays read-only; the write lives with the reactor,
the only part that makes one.

Errors are ``KubeApiError`` as for a list, with one more reason: ``conflict`` for a 409,
the ``resourceVersion`` precondition that failed (the object changed since the decision:
the next evaluation sees the new one). The body of an error is read for its message only
(truncated, the server's words), and nothing of the patch is logged by this module.

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
    """``KubeApi`` that also patches (module docstring)."""

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``patch`` to the object at ``path``; the object as the server stored it."""
        session = self._session_or_fail()
        headers = {**self._headers(), "Content-Type": MERGE_PATCH}
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        try:
            async with session.patch(
                self._url(path),
                params={"fieldManager": FIELD_MANAGER},
                data=json.dumps(patch).encode(),
                headers=headers,
                timeout=timeout,
                server_hostname=self.credentials.server_hostname,
            ) as resp:
                if resp.status != 200:
                    error = await self._fail(resp)
                    if resp.status == 409:
                        error.reason = "conflict"
                    raise error
                body = await resp.read()
        except aiohttp.ClientError as exc:
            raise KubeApiError(0, "network", type(exc).__name__) from None
        except TimeoutError:
            raise KubeApiError(0, "timeout", f"no answer in {self.request_timeout:g} s") from None
        try:
            data = json.loads(body)
        except ValueError:
            raise KubeApiError(200, "bad_response", "patch answer is not JSON") from None
        if not isinstance(data, dict):
            raise KubeApiError(200, "bad_response", "patch answer is not an object")
        return data
