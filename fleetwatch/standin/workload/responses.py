"""What kube-apiserver answers, byte for byte where clients look at it.

The health endpoints follow ``k8s.io/apiserver/pkg/server/healthz``: ``ok`` when every
check passes (the list only with ``?verbose``), and on any failure a 500 whose body is
always the verbose list, failed checks as ``[-]name failed: reason withheld`` (the reason
goes to the server log only), ending ``<endpoint> check failed``. Errors of the API
itself are ``Status`` objects, as in ``k8s.io/apimachinery/pkg/apis/meta/v1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

#: Post-start hooks of a kube-apiserver 1.30 (the order of its verbose health output).
_POST_START_HOOKS = (
    "start-apiserver-admission-initializer",
    "generic-apiserver-start-informers",
    "priority-and-fairness-config-consumer",
    "priority-and-fairness-filter",
    "storage-object-count-tracker-hook",
    "start-apiextensions-informers",
    "start-apiextensions-controllers",
    "crd-informer-synced",
    "start-system-namespaces-controller",
    "start-cluster-authentication-info-controller",
    "start-kube-apiserver-identity-lease-controller",
    "start-kube-apiserver-identity-lease-garbage-collector",
    "start-legacy-token-tracking-controller",
    "start-service-ip-repair-controllers",
    "rbac/bootstrap-roles",
    "scheduling/bootstrap-system-priority-classes",
    "priority-and-fairness-config-producer",
    "bootstrap-controller",
    "aggregator-reload-proxy-client-cert",
    "start-kube-aggregator-informers",
    "apiservice-status-local-available-controller",
    "apiservice-status-remote-available-controller",
    "apiservice-registration-controller",
    "apiservice-discovery-controller",
    "kube-apiserver-autoregistration",
)
_HOOK_CHECKS = (
    *(f"poststarthook/{hook}" for hook in _POST_START_HOOKS),
    "autoregister-completion",
    "poststarthook/apiservice-openapi-controller",
    "poststarthook/apiservice-openapiv3-controller",
)

#: The checks of each health endpoint, in kube-apiserver's order.
CHECKS: dict[str, tuple[str, ...]] = {
    "livez": ("ping", "log", "etcd", *_HOOK_CHECKS),
    "healthz": ("ping", "log", "etcd", *_HOOK_CHECKS),
    "readyz": ("ping", "log", "etcd", "etcd-readiness", "informer-sync", *_HOOK_CHECKS, "shutdown"),
}

#: The checks that fail when etcd is unreachable (``not_ready`` mode).
ETCD_CHECKS = frozenset({"etcd", "etcd-readiness"})

#: ``/version`` of the Kubernetes release the stand-in imitates.
VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.2",
    "gitCommit": "39683505b630ff2121012f3c5b16215a1449d5ed",
    "gitTreeState": "clean",
    "buildDate": "2024-06-11T20:21:00Z",
    "goVersion": "go1.22.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def health_body(endpoint: str, verbose: bool, failing: Iterable[str] = ()) -> tuple[int, str]:
    """Status code and body of ``/<endpoint>`` (livez, readyz, healthz)."""
    failed = frozenset(failing)
    lines = [
        f"[-]{check} failed: reason withheld" if check in failed else f"[+]{check} ok"
        for check in CHECKS[endpoint]
    ]
    if any(check in failed for check in CHECKS[endpoint]):
        # Go's http.Error appends the newline.
        return 500, "\n".join(lines) + f"\n{endpoint} check failed\n"
    if not verbose:
        return 200, "ok"
    return 200, "\n".join(lines) + f"\n{endpoint} check passed\n"


def status_json(code: int, reason: str, message: str, details: bool = True) -> str:
    """A ``Status`` object as kube-apiserver sends with an error code."""
    status: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        status["details"] = {}
    status["code"] = code
    return json.dumps(status)


#: The authentication filter's answer carries no ``details``.
UNAUTHORIZED = status_json(401, "Unauthorized", "Unauthorized", details=False)


def forbidden(user: str, verb: str, path: str) -> str:
    """The authorization filter's refusal of a path that is not a resource (``/readyz``)."""
    return status_json(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"')


NOT_FOUND = status_json(404, "NotFound", "the server could not find the requested resource")
