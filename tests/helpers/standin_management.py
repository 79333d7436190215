"""Helpers for the management cluster's tests: objects, kubectl, the kubernetes client.

kubectl runs with its own ``--cache-dir`` and ``HOME`` in the test's folder: its discovery
cache is keyed by host and port, and a port reused by a later test must not find another
server's answers there.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes

from fleetwatch.standin.management import ThreadedManagementCluster
from tests.helpers.commands import run

NS = "flux-system"


def kustomization(name: str, namespace: str = NS, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "interval": "10m",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            "kubeConfig": {"secretRef": {"name": f"{name}-kubeconfig", "key": "value"}},
            **spec,
        },
    }


def helmrelease(name: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "interval": "5m",
            "chart": {
                "spec": {"chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "p"}}
            },
            "kubeConfig": {"secretRef": {"name": f"{name}-kubeconfig"}},
        },
    }


def application(name: str, destination: str, namespace: str = "argocd") -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://example.com/apps.git", "path": name},
            "destination": {"name": destination, "namespace": "default"},
        },
    }


def secret(
    name: str,
    namespace: str,
    labels: dict[str, str] | None = None,
    string_data: dict[str, str] | None = None,
    type_: str = "Opaque",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "type": type_,
        "stringData": string_data or {"value": "x"},
    }


def argocd_cluster_secret(name: str, server: str) -> dict[str, Any]:
    return secret(
        f"cluster-{name}",
        "argocd",
        {"argocd.argoproj.io/secret-type": "cluster"},
        {"name": name, "server": server, "config": '{"bearerToken": "t"}'},
    )


def capi_secret(cluster: str, namespace: str) -> dict[str, Any]:
    return secret(
        f"{cluster}-kubeconfig",
        namespace,
        {"cluster.x-k8s.io/cluster-name": cluster},
        {"value": "apiVersion: v1\nkind: Config\n"},
        "cluster.x-k8s.io/secret",
    )


class Kubectl:
    """``kubectl --kubeconfig K`` with a private cache and home."""

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.env = {**os.environ, "HOME": str(workdir), "KUBECONFIG": str(kubeconfig)}

    def argv(self, *args: str) -> list[str]:
        cache = str(self.workdir / "kube-cache")
        return ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", cache, *args]

    def run(self, *args: str, input_text: str | None = None, check: bool = True) -> str:
        done = run(self.argv(*args), env=self.env, input_text=input_text)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done.stdout if check else done.stdout + done.stderr

    def fails(self, *args: str, input_text: str | None = None) -> str:
        """kubectl's stderr for a command that must fail."""
        done = run(self.argv(*args), env=self.env, input_text=input_text)
        assert done.returncode != 0, f"kubectl {' '.join(args)} succeeded: {done.stdout}"
        return done.stderr

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=True,
        )


class Lines:
    """A child's stdout read line by line in a thread, waited for with deadlines."""

    def __init__(self, stream: Any) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))

    def next(self, timeout: float = 10.0) -> str:
        return self._lines.get(timeout=timeout)

    def until(self, predicate: Any, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if predicate(line):
                return line


def api_client(cluster: ThreadedManagementCluster, path: Path, token: str | None = None) -> Any:
    """A kubernetes ``ApiClient`` for the cluster, with ``token`` (default: the admin's)."""
    kubeconfig = cluster.write_kubeconfig(path, token)
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
