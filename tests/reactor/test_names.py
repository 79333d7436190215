"""Names are printable in the reactor: nothing it stores, answers or logs carries a raw
control, C1 or bidi character (fleetwatch.common.names, reactor.fields, reactor.cd.objects).

``POST /clusters`` and ``POST /apps`` refuse such a name with a 400 that names the
character by code point; a webhook's alert whose ``cluster`` label has one is skipped with
a log line and the rest applied (docs/reactor.md); start-up discovery stores none;
a Flux or Argo CD object whose name or destination holds one is not mirrored.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.common import names
from reactor import fields, models
from reactor.cd.objects import Destination, Unreadable, read_object
from reactor.cd.targets import ClusterIndex, Unresolved
from reactor.store import KnownCluster
from tests.helpers.discovery_names import (
    BAD,
    BAD_CHARS,
    BAD_LIST,
    BAD_NAMES,
    GOOD_NAMES,
    BadName,
    no_raw_control,
)
from tests.helpers.reactor_helpers import MakeClient, dump_db
from tests.helpers.reactor_payloads import ONLINE, alert, webhook

ENDPOINT = "https://127.0.0.11:6443"


def stored_text(db_path: Path) -> str:
    """Every text cell of every table, joined by a space."""
    rows = (row for table in dump_db(db_path).values() for row in table)
    return " ".join(cell for row in rows for cell in row if isinstance(cell, str))


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_post_clusters_refuses_the_name_with_400_naming_the_character(
    make_client: MakeClient, db_path: Path, bad: BadName
) -> None:
    client = await make_client()
    body = {"name": bad.name, "endpoint": ENDPOINT, "kubeconfig_secret_ref": "x"}
    resp = await client.post("/clusters", json=body)
    assert resp.status == 400
    text = await resp.text()
    no_raw_control(text, lines=False)
    message = (await resp.json())["error"]
    assert message == (
        '"name" must be printable characters, without a space at either end: it has '
        f"U+{ord(bad.char):04X} ({names.describe(bad.char).partition('(')[2]} at position 5"
    )
    assert await (await client.get("/clusters")).json() == []
    assert bad.char not in stored_text(db_path)


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_post_apps_refuses_the_name_and_the_cluster_with_400(
    make_client: MakeClient, db_path: Path, bad: BadName
) -> None:
    client = await make_client()
    body = {"name": "c1", "endpoint": ENDPOINT, "kubeconfig_secret_ref": "x"}
    assert (await client.post("/clusters", json=body)).status == 201
    for app in ({"name": bad.name, "cluster": "c1"}, {"name": "a1", "cluster": bad.name}):
        resp = await client.post("/apps", json=app)
        assert resp.status == 400, app
        no_raw_control(await resp.text(), lines=False)
    assert await (await client.get("/apps")).json() == []


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_a_webhooks_cluster_label_with_it_is_skipped_with_an_escaped_log_line(
    make_client: MakeClient, db_path: Path, bad: BadName, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    with caplog.at_level(logging.INFO, logger="reactor"):
        group = webhook(alert(ONLINE, bad.name, 0), alert(ONLINE, "c7", 0))
        resp = await client.post("/alerts", json=group)
    assert resp.status == 200
    assert (await resp.json())["applied"] == 1
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped == [
        f"notification: skipped 1 alert(s): alerts[0]: FleetClusterOnline with an unusable "
        f"cluster 'prod{bad.escape}{bad.name[5:]}'"
    ]
    for message in (r.getMessage() for r in caplog.records):
        no_raw_control(message, lines=False)
    assert [c["name"] for c in await (await client.get("/clusters")).json()] == ["c7"]
    assert "c7" in stored_text(db_path) and bad.char not in stored_text(db_path)


async def test_start_up_discovery_stores_none_of_the_refused_names(
    make_client: MakeClient, db_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    contexts = ["good", *(bad.name for bad in BAD_LIST)]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": ENDPOINT}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in contexts],
    }
    main = tmp_path / "config"
    main.write_text(yaml.safe_dump(doc))
    with caplog.at_level(logging.INFO, logger="reactor"):
        client = await make_client(kubeconfig_path=main)
        names = [c["name"] for c in await (await client.get("/clusters")).json()]
    assert names == ["good"]
    problems = [r.getMessage() for r in caplog.records if "context name" in r.getMessage()]
    assert len(problems) == len(BAD_LIST), problems
    for message in (r.getMessage() for r in caplog.records):
        no_raw_control(message, lines=False)
    text = stored_text(db_path)
    assert "good" in text
    assert not any(c in text for c in BAD_CHARS + "\n")


# -- the CD mirror -----------------------------------------------------------------------


def kustomization(namespace: str, name: str, secret: str = "c1-kubeconfig") -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": namespace, "uid": "u1", "resourceVersion": "1"},
        "spec": {"kubeConfig": {"secretRef": {"name": secret}}},
    }


@pytest.mark.parametrize("bad", BAD_NAMES)
@pytest.mark.parametrize("where", ["namespace", "name"])
def test_a_cd_object_whose_name_has_it_is_not_mirrored_and_shown_escaped(
    bad: BadName, where: str
) -> None:
    namespace, name = (bad.name, "apps") if where == "namespace" else ("team-a", bad.name)
    read = read_object(kustomization(namespace, name))
    assert isinstance(read, Unreadable)
    no_raw_control(read.app_name, lines=False)
    no_raw_control(read.reason, lines=False)
    assert bad.escape in read.app_name
    assert read.reason.startswith(f"its {where} has U+{ord(bad.char):04X}")


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_destination_naming_it_is_unreadable_naming_the_character(bad: BadName) -> None:
    """No Secret, Argo CD cluster name or server discovery keeps has such a character: the
    object deploys nowhere fleetwatch knows, and says which field is wrong."""
    flux_name = kustomization("team-a", "apps", secret=bad.name)
    flux_key = kustomization("team-a", "apps")
    flux_key["spec"]["kubeConfig"]["secretRef"]["key"] = bad.name

    def argo(destination: dict[str, str]) -> dict[str, Any]:
        meta = {"name": "web", "namespace": "argocd", "uid": "u2"}
        return {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": meta,
            "spec": {"destination": destination},
        }

    cases = [
        (flux_name, "spec.kubeConfig.secretRef has"),
        (flux_key, "spec.kubeConfig.secretRef has"),
        (argo({"name": bad.name}), "spec.destination.name has"),
        (argo({"server": f"https://{bad.name}:6443"}), "spec.destination.server has"),
    ]
    for obj, words in cases:
        read = read_object(obj)
        assert isinstance(read, Unreadable), obj
        assert read.reason.startswith(f"{words} U+{ord(bad.char):04X}"), read.reason
        no_raw_control(read.reason, lines=False)


def test_a_destination_is_shown_escaped() -> None:
    """``read_object`` refuses such destinations; a ``Destination`` made elsewhere still
    shows escaped in a reason."""
    index = ClusterIndex.of([KnownCluster("c1", ENDPOINT, "secret://team-a/c1-kubeconfig")])
    found = index.resolve(Destination(argocd_server="https://x\u202ey"))
    assert isinstance(found, Unresolved)
    assert found.reason == "no cluster discovered at Argo CD server https://x\\u202ey"
    assert str(Destination(secret_ref="secret://a/x\x1b[2J")) == "Secret secret://a/x\\x1b[2J"


def _as_model(doc: dict[str, Any]) -> tuple[str, str] | str:
    try:
        model = models.validate(models.Deployment, doc)
    except fields.Problem as exc:
        return str(exc)
    return model.app, model.cluster


def _as_fast_path(doc: dict[str, Any]) -> tuple[str, str] | str:
    try:
        return models.deployment(doc)
    except fields.Problem as exc:
        return str(exc)


_DEPLOYMENT_BODIES: list[dict[str, Any]] = [
    {"app": "web", "cluster": "c1"},
    {"app": "web shop", "cluster": "prod east"},
    {"app": "x" * 253, "cluster": "c"},
    {"app": "x" * 254, "cluster": "c"},
    {"app": "", "cluster": "c1"},
    {"app": " web", "cluster": "c1"},
    {"app": "web", "cluster": "c1 "},
    {"app": "web", "cluster": 5},
    {"app": None, "cluster": "c1"},
    {"app": "web"},
    {"app": "web", "cluster": "c1", "extra": 1},
    {"cluster": "c1", "name": "web"},
    {},
    *({"app": good, "cluster": good} for good in GOOD_NAMES),
    *({"app": bad.name, "cluster": "c1"} for _, bad in BAD),
    *({"app": "web", "cluster": bad.name} for _, bad in BAD),
]


@pytest.mark.parametrize("doc", _DEPLOYMENT_BODIES)
def test_a_deployments_fast_path_accepts_and_refuses_as_its_model_does(
    doc: dict[str, Any],
) -> None:
    """``models.deployment`` (the hot path's check) gives what ``models.Deployment`` gives:
    the same two names, or the same 400 message."""
    assert _as_fast_path(doc) == _as_model(doc)
