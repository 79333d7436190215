"""The Kubernetes manifests as the deployment tests read them: rendered by kubectl kustomize.

Also what the Prometheus Operator would make of the AlertmanagerConfig: the operator does
not hand the object to Alertmanager as it is; it turns it into a child route of the main
configuration, with a ``namespace`` matcher added, ``continue: true`` forced, and every
receiver renamed ``<namespace>/<object>/<receiver>``; inhibit rules get the namespace
matcher on both sides. :func:`alertmanager_config` does the same, so amtool can check
the result.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
KUSTOMIZE = REPO / "deploy" / "kubernetes"
#: Every folder a user may `kubectl apply -k`.
OVERLAYS = (
    "base",
    "overlays/sqlite",
    "overlays/sharded",
    "overlays/prometheus-operator",
    "overlays/argocd",
    "overlays/cluster-api",
    "overlays/cd",
    "overlays/cd-cluster-secret",
)
#: The flag that makes a workload read clusters from the management cluster's API, and the
#: one that narrows it to namespaces (none: every namespace).
DISCOVERY_FLAG = "--discovery.kubernetes"
NAMESPACE_FLAG = "--discovery.kubernetes.namespace="
#: The Kubernetes version the objects are validated against: the kubectl on the machine.
KUBERNETES_VERSION = "1.32"
WORKLOAD_KINDS = ("Deployment", "StatefulSet")

Obj = dict[str, Any]


@functools.cache
def _render(overlay: str) -> str:
    done = subprocess.run(
        ["kubectl", "kustomize", str(KUSTOMIZE / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {overlay}: {done.stderr}"
    return done.stdout


def rendered_text(overlay: str) -> str:
    return _render(overlay)


def render(overlay: str) -> list[Obj]:
    """The objects of one overlay (a fresh copy each call: tests may change them)."""
    return [doc for doc in yaml.safe_load_all(_render(overlay)) if doc]


def of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] == kind]


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"no {kind} {name} among {[o['metadata']['name'] for o in objects]}")


def workloads(objects: list[Obj]) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] in WORKLOAD_KINDS]


def args_of(workload: Obj) -> list[str]:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def reads_api(workload: Obj) -> bool:
    """The workload reads clusters from the management cluster's API."""
    return DISCOVERY_FLAG in args_of(workload)


def is_cd(obj: Obj) -> bool:
    """An object of the cd* components (the reactor's CD integration; test_cd_rbac.py)."""
    return str(obj["metadata"]["name"]).startswith("fleetwatch-cd-")


def watched_namespaces(workload: Obj) -> set[str]:
    """The namespaces its list+watches are narrowed to; empty: every namespace."""
    return {
        a.removeprefix(NAMESPACE_FLAG) for a in args_of(workload) if a.startswith(NAMESPACE_FLAG)
    }


def _matcher(matcher: Obj) -> str:
    op = matcher.get("matchType", "=")
    return f'{matcher["name"]}{op}"{matcher["value"]}"'


def _route(route: Obj, prefix: str) -> Obj:
    out: Obj = {"receiver": prefix + route["receiver"]}
    for camel, snake in (
        ("groupBy", "group_by"),
        ("groupWait", "group_wait"),
        ("groupInterval", "group_interval"),
        ("repeatInterval", "repeat_interval"),
        ("continue", "continue"),
    ):
        if camel in route:
            out[snake] = route[camel]
    out["matchers"] = [_matcher(m) for m in route.get("matchers", [])]
    if route.get("routes"):
        out["routes"] = [_route(child, prefix) for child in route["routes"]]
    return out


def _receiver(receiver: Obj, prefix: str, secrets: Path) -> Obj:
    out: Obj = {"name": prefix + receiver["name"]}
    hooks = []
    for hook in receiver.get("webhookConfigs", []):
        converted: Obj = {"url": hook["url"], "send_resolved": hook.get("sendResolved", True)}
        auth = hook.get("httpConfig", {}).get("authorization")
        if auth is not None:
            ref = auth["credentials"]
            converted["http_config"] = {
                "authorization": {
                    "type": auth.get("type", "Bearer"),
                    "credentials_file": str(secrets / ref["name"] / ref["key"]),
                }
            }
        hooks.append(converted)
    if hooks:
        out["webhook_configs"] = hooks
    return out


def alertmanager_config(amc: Obj, secrets: Path, strategy: str = "OnNamespace") -> Obj:
    """An Alertmanager configuration holding ``amc`` as the operator would add it.

    The main configuration is the smallest one (a ``null`` root receiver, as in
    kube-prometheus-stack); Secret references become files under ``secrets/<name>/<key>``.
    ``strategy`` is the Alertmanager resource's ``alertmanagerConfigMatcherStrategy``:
    ``OnNamespace`` (the default) adds the ``namespace`` matchers, ``None`` adds none.
    """
    namespace = amc["metadata"]["namespace"]
    enforced = [f'namespace="{namespace}"'] if strategy == "OnNamespace" else []
    prefix = f"{namespace}/{amc['metadata']['name']}/"
    spec = amc["spec"]
    routes = []
    if "route" in spec:
        child = _route(spec["route"], prefix)
        child["matchers"].extend(enforced)
        child["continue"] = True
        routes.append(child)
    inhibit = []
    for rule in spec.get("inhibitRules", []):
        converted: Obj = {
            "source_matchers": [_matcher(m) for m in rule.get("sourceMatch", [])] + enforced,
            "target_matchers": [_matcher(m) for m in rule.get("targetMatch", [])] + enforced,
        }
        if rule.get("equal"):
            converted["equal"] = rule["equal"]
        inhibit.append(converted)
    return {
        "route": {"receiver": "null", "routes": routes},
        "receivers": [
            {"name": "null"},
            *(_receiver(r, prefix, secrets) for r in spec.get("receivers", [])),
        ],
        "inhibit_rules": inhibit,
    }
