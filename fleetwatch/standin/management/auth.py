"""Who may do what: bearer tokens (and the fleet CA's client certificates), and RBAC's answers.

A management cluster hands fleetwatch a service-account token bound to Roles in some
namespaces; the stand-in keeps the same shape small: each token names a user and may be
restricted to namespaces, verbs and resources. Outside them a request gets the authorizer's
403 ``Forbidden`` (cluster-scoped requests by a namespace-restricted token included, as a
RoleBinding grants nothing at the cluster scope); no or an unknown token gets 401.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from fleetwatch.standin.management.kinds import Kind
from fleetwatch.standin.management.status import ApiError, forbidden


@dataclass(frozen=True)
class Grant:
    """What one token may do (None: no restriction)."""

    user: str
    namespaces: frozenset[str] | None = None
    verbs: frozenset[str] | None = None
    #: Resource keys as in :attr:`Kind.key`: ``secrets``,
    #: ``kustomizations.kustomize.toolkit.fluxcd.io``.
    resources: frozenset[str] | None = None

    def check(self, kind: Kind, verb: str, namespace: str, name: str) -> None:
        """Raise the authorizer's 403 unless the request is allowed."""
        allowed = (
            (self.verbs is None or verb in self.verbs)
            and (self.resources is None or kind.key in self.resources)
            and (self.namespaces is None or (namespace != "" and namespace in self.namespaces))
        )
        if not allowed:
            raise forbidden(kind.resource, name, self.user, verb, namespace)


class Tokens:
    """Bearer tokens and what each grants; the first is the administrator's."""

    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self.admin = self.issue("kubernetes-admin")

    def issue(
        self,
        user: str,
        *,
        namespaces: list[str] | None = None,
        verbs: list[str] | None = None,
        resources: list[str] | None = None,
        token: str | None = None,
    ) -> str:
        chosen = token or secrets.token_urlsafe(24)
        self._grants[chosen] = Grant(
            user,
            frozenset(namespaces) if namespaces is not None else None,
            frozenset(verbs) if verbs is not None else None,
            frozenset(resources) if resources is not None else None,
        )
        return chosen

    def revoke(self, token: str) -> None:
        self._grants.pop(token, None)

    def grant(self, authorization: str | None) -> Grant | None:
        """The grant of an ``Authorization`` header, or None (401)."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self._grants.get(token.strip())


__all__ = ["ApiError", "Grant", "Tokens"]
