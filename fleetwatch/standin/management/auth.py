"""Who may do what: bearer tokens (and the fleet CA's client certificates), and RBAC's answers.

A management cluster hands fleetwatch a service-account token bound to Roles in some
namespaces; the stand-in keeps the same shape small: each token names a user and may be
restricted to namespaces, verbs and resources. Outside them a request gets the authorizer's
403 ``Forbidden`` (cluster-scoped requests by a namespace-restricted token included, as a
RoleBinding grants nothing at the cluster scope); no or an unknown token gets 401.

Where one such product is too coarse (a patch on Secrets in one namespace, a list of
Applications everywhere), a token may instead hold :class:`RbacRule` s, one per rule of a
bound Role or ClusterRole: a request is allowed when one of them allows it, as RBAC
unions the rules of every binding.
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


@dataclass(frozen=True)
class RbacRule:
    """One RBAC rule as bound: its verbs and resources, in the namespaces of a RoleBinding
    (None: a ClusterRoleBinding, every namespace and the cluster scope)."""

    verbs: frozenset[str]
    resources: frozenset[str]
    namespaces: frozenset[str] | None = None
    #: ``resourceNames``: only these objects. A request without a name (a create, a list)
    #: is never one of them, as in kube-apiserver's authorizer: a Role cannot limit
    #: ``create`` by name.
    names: frozenset[str] | None = None

    def allows(self, kind: Kind, verb: str, namespace: str, name: str) -> bool:
        return (
            verb in self.verbs
            and kind.key in self.resources
            and (self.namespaces is None or (namespace != "" and namespace in self.namespaces))
            and (self.names is None or (name != "" and name in self.names))
        )


@dataclass(frozen=True)
class RuleGrant(Grant):
    """A token's grant as the union of RBAC rules (module docstring)."""

    rules: tuple[RbacRule, ...] = ()

    def check(self, kind: Kind, verb: str, namespace: str, name: str) -> None:
        if not any(rule.allows(kind, verb, namespace, name) for rule in self.rules):
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
        rules: list[RbacRule] | None = None,
    ) -> str:
        """A new token; ``rules`` (RBAC's) instead of the three restrictions."""
        chosen = token or secrets.token_urlsafe(24)
        if rules is not None:
            assert namespaces is verbs is resources is None, "rules or restrictions, not both"
            self._grants[chosen] = RuleGrant(user, rules=tuple(rules))
            return chosen
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


__all__ = ["ApiError", "Grant", "RbacRule", "RuleGrant", "Tokens"]
