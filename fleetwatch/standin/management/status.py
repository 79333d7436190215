"""API errors as kube-apiserver sends them: ``Status`` objects with the real reasons and wording.

Clients branch on ``code`` and ``reason`` (client-go's ``IsConflict``, ``IsNotFound``,
``IsResourceExpired``; the kubernetes Python client's ``ApiException.status``) and people
read ``message``, so both follow ``k8s.io/apimachinery/pkg/api/errors``: the resource is
named by its plural and group (``secrets "a" not found``,
``kustomizations.kustomize.toolkit.fluxcd.io "a" not found``), an invalid object by its
kind (``Kustomization.kustomize.toolkit.fluxcd.io "a" is invalid: ...``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldCause:
    """One invalid field, as in ``details.causes`` of a 422."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


class ApiError(Exception):
    """An error answered as a ``Status`` object with ``code``.

    ``details`` is the ``StatusDetails`` (name, group, kind, causes, retryAfterSeconds).
    """

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


@dataclass(frozen=True)
class Resource:
    """How errors name a resource: plural, group ("" for core) and kind."""

    plural: str
    group: str
    kind: str = ""
    causes: tuple[FieldCause, ...] = field(default=())

    @property
    def qualified(self) -> str:
        """``secrets`` or ``kustomizations.kustomize.toolkit.fluxcd.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def details(self, name: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        if name:
            out["name"] = name
        if self.group:
            out["group"] = self.group
        out["kind"] = self.plural
        return out


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', res.details(name))


def already_exists(res: Resource, name: str) -> ApiError:
    message = f'{res.qualified} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, res.details(name))


def conflict(res: Resource, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}'
    return ApiError(409, "Conflict", message, res.details(name))


#: The optimistic-concurrency failure's wording (``registry/generic/registry/store.go``).
MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(res: Resource, name: str, causes: list[FieldCause]) -> ApiError:
    """422 ``Invalid``, named by kind: ``Secret "a" is invalid: data[x]: Invalid value...``."""
    qualified_kind = f"{res.kind}.{res.group}" if res.group else res.kind
    if len(causes) == 1:
        text = f"{causes[0].field}: {causes[0].message}"
    else:
        text = "[" + ", ".join(f"{c.field}: {c.message}" for c in causes) + "]"
    details: dict[str, Any] = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.kind
    details["causes"] = [
        {"reason": c.reason, "message": c.message, "field": c.field} for c in causes
    ]
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unprocessable(message: str, cause: str = "") -> ApiError:
    """422 without field causes: a patch that applies badly (a JSON patch ``test`` that fails)."""
    details: dict[str, Any] = {}
    if cause:
        details["causes"] = [{"reason": "UnexpectedServerResponse", "message": cause}]
    return ApiError(422, "Invalid", message, details)


def forbidden(res: Resource, name: str, user: str, verb: str, namespace: str) -> ApiError:
    """RBAC's refusal, worded as the authorizer's (``endpoints/handlers/responsewriters``)."""
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    subject = f'{res.qualified} "{name}"' if name else res.qualified
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{res.plural}" '
        f'in API group "{res.group}" {where}'
    )
    return ApiError(403, "Forbidden", message, res.details(name))


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message, {})


METHOD_NOT_ALLOWED = ApiError(
    405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {}
)
PATH_NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource", {})
#: The authentication filter's answer carries no ``details``.
UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def too_many_requests(retry_after: int) -> ApiError:
    """Priority and fairness's 429 (``flowcontrol``): the same wording, Retry-After alongside."""
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
    )


def too_large_resource_version(requested: int, current: int) -> ApiError:
    """A read at a resourceVersion the server has not reached yet
    (``storage.NewTooLargeResourceVersionError``)."""
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )
