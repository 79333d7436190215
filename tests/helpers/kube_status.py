"""The ``Status`` object kube-apiserver answers a failed request with, as the stand-ins'
tests expect it to the letter (clients read ``reason`` and ``code``, kubectl prints
``message``)."""

from __future__ import annotations

from typing import Any


def failure(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    """A ``Status`` of failure; ``details`` (such as ``retryAfterSeconds``) if any."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        status["details"] = details
    return status


#: What a request without valid credentials gets.
UNAUTHORIZED = failure(401, "Unauthorized", "Unauthorized")
