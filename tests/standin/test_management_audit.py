"""The stand-in management cluster's audit log (``GET /audit``): every write answered, with
the token's user, the User-Agent, the object and the code, so a test of several clients
tells whose write landed; reads are not in it."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fleetwatch.standin.management import ThreadedManagementCluster
from tests.helpers.standin_management import NS, kustomization

pytestmark = pytest.mark.live

KS = "kustomizations.kustomize.toolkit.fluxcd.io"


def test_each_write_is_logged_with_its_user_agent_and_code(tmp_path: Path) -> None:
    with ThreadedManagementCluster(tmp_path / "mgmt") as cluster:
        (seeded,) = cluster.seed([kustomization("apps")])
        version = seeded["metadata"]["resourceVersion"]
        context = ssl.create_default_context(cafile=str(cluster.ca_file))
        url = (
            f"{cluster.url}/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{NS}/kustomizations/apps"
        )

        def call(method: str, token: str | None, agent: str, body: object = None) -> int:
            headers = {"User-Agent": agent, "Content-Type": "application/merge-patch+json"}
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            data = None if body is None else json.dumps(body).encode()
            request = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=10, context=context) as resp:
                    return int(resp.status)
            except urllib.error.HTTPError as exc:
                return int(exc.code)

        a, b = cluster.issue_token("replica-a"), cluster.issue_token("replica-b")
        before = time.time()
        stale = {"metadata": {"resourceVersion": version}, "spec": {"suspend": True}}
        assert call("PATCH", a, "fleetwatch/1 (a)", stale) == 200
        assert call("PATCH", b, "fleetwatch/1 (b)", stale) == 409  # changed since
        assert call("GET", a, "fleetwatch/1 (a)") == 200  # a read: not logged
        assert call("PATCH", None, "curl/8", {"spec": {"suspend": False}}) == 401
        events = [e for e in cluster.audit() if e["received"] >= before]
        assert [(e["user"], e["user_agent"], e["verb"], e["code"]) for e in events] == [
            ("replica-a", "fleetwatch/1 (a)", "patch", 200),
            ("replica-b", "fleetwatch/1 (b)", "patch", 409),
            ("", "curl/8", "patch", 401),
        ]
        assert {(e["resource"], e["namespace"], e["name"]) for e in events} == {(KS, NS, "apps")}
