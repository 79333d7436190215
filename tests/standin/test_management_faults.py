"""Breaking the management cluster on purpose, and what clients see on the wire.

The control API arms faults (500s, 429 with Retry-After, hangs, slow lists, watches that
break at once), closes open watches and counts requests; the command line serves the same
in another process.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.procs import wait_until
from fleetwatch.standin.management import (
    ManagementProcess,
    ThreadedManagementCluster,
)
from tests.helpers.kube_status import failure
from tests.helpers.standin_management import NS, Kubectl, application, kustomization, secret

pytestmark = pytest.mark.live


@pytest.fixture
def cluster_seed() -> list[dict[str, Any]]:
    """A secret and a Kustomization: something for the faults to stand in front of."""
    return [secret("a", "capi-edge"), kustomization("apps")]


class Api:
    """Raw HTTPS requests, to see status codes, headers and stream framing as sent."""

    def __init__(self, cluster: ThreadedManagementCluster, token: str | None = None) -> None:
        self.port = int(cluster.url.rsplit(":", 1)[1])
        self.context = ssl.create_default_context(cafile=str(cluster.ca_file))
        self.token = cluster.token if token is None else token

    def connect(self, timeout: float = 10.0) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=timeout
        )

    def request(
        self, method: str, path: str, body: Any = None, timeout: float = 10.0, **headers: str
    ) -> tuple[int, dict[str, str], bytes]:
        conn = self.connect(timeout)
        try:
            sent = {"Authorization": f"Bearer {self.token}", **headers}
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()


def control(cluster: ThreadedManagementCluster, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(cluster.control_url + path, data=data, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


SECRETS = "/api/v1/namespaces/capi-edge/secrets"


def test_the_next_two_lists_get_500_then_the_api_answers_again(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    control(cluster, "POST", "/faults", {"kind": "error", "count": 2, "verb": "list"})
    for _ in range(2):
        status, _, body = api.request("GET", SECRETS)
        assert status == 500
        assert json.loads(body)["reason"] == "InternalError"
    assert api.request("GET", SECRETS + "/a")[0] == 200  # a get was never affected
    assert api.request("GET", SECRETS)[0] == 200


def test_an_error_fault_answers_the_status_reason_and_message_it_was_given(
    cluster: ThreadedManagementCluster,
) -> None:
    """As an admission policy refuses a write: 403 Forbidden, the policy's words."""
    api = Api(cluster)
    message = "ValidatingAdmissionPolicy 'p' with binding 'p' denied request: no"
    control(
        cluster, "POST", "/faults",
        {"kind": "error", "status": 403, "reason": "Forbidden", "message": message,
         "verb": "list"},
    )  # fmt: skip
    status, _, body = api.request("GET", SECRETS)
    answer = json.loads(body)
    assert (status, answer["code"], answer["reason"]) == (403, 403, "Forbidden")
    assert answer["message"] == message


def test_throttling_answers_429_with_retry_after_for_a_while(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    cluster.arm_fault(kind="throttle", seconds=30, retry_after=3, resource="secrets")
    status, headers, body = api.request("GET", SECRETS)
    assert (status, headers["Retry-After"]) == (429, "3")
    message = "Too many requests, please try again later."
    assert json.loads(body) == failure(429, "TooManyRequests", message, retryAfterSeconds=3)
    assert api.request("GET", "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations")[0] == 200
    cluster.clear_faults()
    assert api.request("GET", SECRETS)[0] == 200


def test_watch_faults_open_a_watch_that_breaks_at_once_and_leave_lists_alone(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    watch = SECRETS + "?watch=1&allowWatchBookmarks=true"

    def broken(**fault: Any) -> tuple[int, bytes]:
        cluster.arm_fault(count=1, resource="secrets", **fault)
        status, _, body = api.request("GET", watch)
        return status, body

    status, body = broken(kind="watch_error")  # the watch cache's answer to a lost history
    (event,) = [json.loads(line) for line in body.splitlines()]
    assert status == 200 and event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    status, body = broken(kind="watch_error", status=500)
    assert json.loads(body)["object"]["reason"] == "InternalError"
    assert broken(kind="watch_close") == (200, b"")
    status, body = broken(kind="watch_garbage")
    assert status == 200 and body.endswith(b"\n")
    with pytest.raises(ValueError):
        json.loads(body)
    status, body = broken(kind="error", status=410, verb="watch")
    assert (status, json.loads(body)["reason"]) == (410, "Expired")
    cluster.arm_fault(kind="watch_close", resource="secrets")  # until cleared
    assert api.request("GET", SECRETS)[0] == 200
    assert api.request("GET", watch)[2] == b""
    assert cluster.counts()["watch secrets"] == 6


def test_a_hung_request_waits_until_the_fault_is_cleared(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    cluster.arm_fault(kind="hang", count=1)
    with pytest.raises(TimeoutError):
        api.request("GET", SECRETS, timeout=0.5)
    assert api.request("GET", SECRETS)[0] == 200  # count 1: only the first one hung


def test_a_slow_list_is_slow_and_nothing_else_is(cluster: ThreadedManagementCluster) -> None:
    api = Api(cluster)
    # A get answered in less than the delay was not delayed, however loaded the machine.
    cluster.arm_fault(kind="delay", delay_seconds=3.0, verb="list", resource="secrets")
    started = time.monotonic()
    assert api.request("GET", SECRETS + "/a")[0] == 200
    assert time.monotonic() - started < 3.0
    started = time.monotonic()
    assert api.request("GET", SECRETS)[0] == 200
    assert time.monotonic() - started >= 3.0


def test_closing_watches_ends_their_streams_cleanly(cluster: ThreadedManagementCluster) -> None:
    api = Api(cluster)
    conn = api.connect()
    conn.request(
        "GET",
        SECRETS + "?watch=1&timeoutSeconds=60",
        headers={"Authorization": f"Bearer {cluster.token}"},
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(response.readline())["type"] == "ADDED"  # synthetic: no resourceVersion
    wait_until(lambda: cluster.open_watches() == 1, 5, what="watch registered")
    started = time.monotonic()
    assert control(cluster, "POST", "/watches/close") == {"closed": 1}
    assert response.read() == b""  # the chunked stream ended with its last chunk
    assert time.monotonic() - started < 5
    conn.close()


def test_a_watch_streams_bookmarks_and_ends_at_its_timeout(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    _, _, body = api.request("GET", SECRETS)
    revision = json.loads(body)["metadata"]["resourceVersion"]
    conn = api.connect()
    path = (
        f"{SECRETS}?watch=true&resourceVersion={revision}&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token}"})
    lines = conn.getresponse().read().decode().splitlines()
    conn.close()
    events = [json.loads(line) for line in lines]
    assert events and {e["type"] for e in events} == {"BOOKMARK"}
    assert events[0]["object"] == {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": revision, "creationTimestamp": None},
    }


def test_a_watch_list_sends_initial_events_then_the_end_bookmark(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    conn = api.connect()
    path = (
        "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations?watch=1"
        "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        "&timeoutSeconds=1"
    )
    conn.request("GET", path, headers={"Authorization": f"Bearer {cluster.token}"})
    response = conn.getresponse()
    first, second = json.loads(response.readline()), json.loads(response.readline())
    conn.close()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "apps")
    assert second["type"] == "BOOKMARK"
    assert second["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_request_counts_show_that_no_write_reached_the_api(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    control(cluster, "DELETE", "/requests")
    api.request("GET", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations")
    api.request(
        "GET", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/apps"
    )
    counted = control(cluster, "GET", "/requests")
    assert counted == {
        "counts": {
            "list kustomizations.kustomize.toolkit.fluxcd.io": 1,
            "get kustomizations.kustomize.toolkit.fluxcd.io": 1,
        },
        "writes": 0,
    }
    api.request(
        "PATCH",
        "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/apps",
        {"spec": {"suspend": True}},
        **{"Content-Type": "application/merge-patch+json"},
    )
    assert control(cluster, "GET", "/requests")["writes"] == 1


def test_bad_fault_bodies_are_refused_and_change_nothing(
    cluster: ThreadedManagementCluster,
) -> None:
    refused_bodies = (
        {"kind": "explode"},
        {"kind": "error", "count": 0},
        {"kind": "delay"},
        {"kind": "watch_close", "verb": "list"},  # breaks watches only
        {"kind": "error", "message": 403},
        [1],
    )
    for body in refused_bodies:
        request = urllib.request.Request(
            cluster.control_url + "/faults", data=json.dumps(body).encode(), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 400
    assert control(cluster, "GET", "/")["faults"] == []


def test_the_command_line_serves_seeds_and_stops_on_sigterm(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "objects.yaml").write_text(
        yaml.safe_dump_all([kustomization("apps"), secret("apps-kubeconfig", NS)])
    )
    child = ManagementProcess(tmp_path / "m", bookmark_seconds=0.5, seed=seeds).start()
    try:
        kubectl = Kubectl(child.kubeconfig, tmp_path)
        assert kubectl.run("get", "ks,secrets", "-n", NS, "-o", "name").split() == [
            "kustomization.kustomize.toolkit.fluxcd.io/apps",
            "secret/apps-kubeconfig",
        ]
        child.seed([application("guestbook", "prod-eu")])
        assert kubectl.run("get", "app", "-A", "-o", "name").split() == [
            "application.argoproj.io/guestbook"
        ]
        listed = child.counts()["list secrets"]
        child.arm_fault(kind="error", count=1, verb="list", resource="secrets")
        assert "InternalError" in kubectl.fails("get", "secrets", "-n", NS)
        assert child.counts()["list secrets"] == listed + 1  # kubectl did not retry a 500
    finally:
        assert child.stop() == 0  # SIGTERM by pid: a clean exit


def test_a_second_run_in_the_same_folder_reports_its_own_address(tmp_path: Path) -> None:
    """The log is appended to, run after run: the summary read is this run's."""
    first = ManagementProcess(tmp_path / "m").start()
    first_url = first.url
    assert first.stop() == 0
    second = ManagementProcess(tmp_path / "m").start()
    try:
        # The first server is gone: only the second run's addresses answer.
        assert second.control("GET", "/")["watches"] == 0
        context = ssl.create_default_context(cafile=str(second.ca_file))
        version = urllib.request.Request(
            second.url + "/version", headers={"Authorization": f"Bearer {second.token}"}
        )
        with urllib.request.urlopen(version, context=context, timeout=10) as answer:
            assert answer.status == 200
        assert (tmp_path / "m" / "management.log").read_text().count('"url"') == 2
        assert first_url  # (the first run's line is still in the log, above)
    finally:
        assert second.stop() == 0


def test_thousands_of_objects_are_seeded_in_one_control_call(
    cluster: ThreadedManagementCluster,
) -> None:
    big = "x" * 500_000  # 3 of them: a body over aiohttp's 1 MiB default
    docs = [secret(f"s{i}", NS, string_data={"v": big}) for i in range(3)]
    docs += [secret(f"t{i}", NS) for i in range(2000)]
    stored = control(cluster, "POST", "/objects", docs)["objects"]
    assert len(stored) == 2003
    assert stored[-1]["name"] == "t1999"


def test_a_watch_whose_client_went_away_is_dropped(cluster: ThreadedManagementCluster) -> None:
    api = Api(cluster)
    conn = api.connect()
    conn.request("GET", SECRETS + "?watch=1", headers={"Authorization": f"Bearer {cluster.token}"})
    response = conn.getresponse()
    response.readline()
    wait_until(lambda: cluster.open_watches() == 1, 5, what="watch registered")
    response.close()
    conn.close()
    wait_until(lambda: cluster.open_watches() == 0, 5, what="watch dropped")


def test_the_exec_plugin_command_still_starts_without_the_servers() -> None:
    """``management`` shares the command line with the exec plugin clients run per request."""
    probe = (
        "import sys, runpy; sys.argv = ['x', 'exec-credential', '--token-file', '/dev/null'];"
        "\ntry: runpy.run_module('fleetwatch.standin', run_name='__main__')"
        "\nexcept SystemExit: pass"
        "\nprint(sorted(m for m in ('aiohttp', 'cryptography') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().endswith("[]")


def test_a_create_may_be_sent_as_yaml(cluster: ThreadedManagementCluster) -> None:
    api = Api(cluster)
    conn = api.connect()
    body = yaml.safe_dump(secret("from-yaml", "capi-edge"))
    headers = {"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/yaml"}
    conn.request("POST", SECRETS, body=body.encode(), headers=headers)
    response = conn.getresponse()
    created = json.loads(response.read())
    conn.close()
    assert response.status == 201
    assert created["data"] == {"value": "eA=="}


def test_unknown_fields_are_pruned_with_a_warning_or_refused_when_strict(
    cluster: ThreadedManagementCluster,
) -> None:
    api = Api(cluster)
    typo = {**secret("typo", "capi-edge"), "strinData": {"a": "b"}}
    status, headers, body = api.request("POST", SECRETS, typo)
    assert status == 201 and "strinData" not in json.loads(body)
    assert headers["Warning"] == '299 - "unknown field \\"strinData\\""'
    strict = {**typo, "metadata": {"name": "typo2", "namespace": "capi-edge"}}
    status, _, body = api.request("POST", SECRETS + "?fieldValidation=Strict", strict)
    assert status == 400
    assert json.loads(body)["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: strict decoding error: '
        'unknown field "strinData"'
    )
