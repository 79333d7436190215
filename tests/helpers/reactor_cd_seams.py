"""Seams for driving the CD actuator without a reactor: the objects as an informer lists
them, a backend that runs each store operation at once, on the test's thread, and a
management API that must not be written to."""

from __future__ import annotations

from typing import Any

from reactor.service import Service


def listed_kustomization(i: int) -> dict[str, Any]:
    """Kustomization ``app{i}`` of cluster c1 (its Cluster API Secret), as listed."""
    meta = {"name": f"app{i}", "namespace": "flux-system", "uid": f"u{i}", "resourceVersion": "1"}
    spec = {"interval": "10m", "kubeConfig": {"secretRef": {"name": "c1-kubeconfig"}}}
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": meta,
        "spec": spec,
    }


class InlineRunner:
    """Our seam for ``reactor.context.Backend``: the operation, on the test's thread."""

    def __init__(self, service: Service) -> None:
        self.service = service

    async def run(self, operation: Any) -> Any:
        return operation(self.service)

    async def read(self, operation: Any) -> Any:
        return operation(self.service)


class NoPatches:
    """Our seam for the management API: nothing is to be written in these passes."""

    async def merge_patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("no patch expected")

    async def create(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("no Event expected")
