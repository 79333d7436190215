"""A patch the management cluster refuses for good (an admission policy, a missing grant):
a counted failure with the API's message, tried again once per pass, never in a loop.

deploy/'s cd-admission-policy refuses any write of the reactor's ServiceAccount that
changes more than its pause (docs/deployment.md#the-admission-policy). The reactor only
ever sends its own patches, so a refusal means the policy or the RBAC is not what the
reactor needs: the operator has to see it (the count by reason, the API's own words in
the log, ``FleetwatchCDActionsPending``), and the reactor must not hammer the API with a
patch that will be refused again. The stand-in answers every patch of Kustomizations as
kube-apiserver answers a ValidatingAdmissionPolicy's refusal (403 ``Forbidden``, the
policy's message), until the fault is cleared.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.common import metricnames
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.app import create_app
from reactor.cd.settings import CdSettings
from reactor.context import ReactorSettings
from reactor.store.database import SQLITE
from tests.helpers.reactor_helpers import mirrored, notify, until
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert

pytestmark = pytest.mark.live

KS = "kustomize.toolkit.fluxcd.io/v1"
RESOURCE = "kustomizations.kustomize.toolkit.fluxcd.io"
#: As kube-apiserver words it (``admission.NewForbidden`` around the policy's message).
DENIED = (
    f"{RESOURCE} \"apps\" is forbidden: ValidatingAdmissionPolicy 'fleetwatch-cd-writes' "
    "with binding 'fleetwatch-cd-writes' denied request: fleetwatch may change no field of "
    "spec but a Flux object's suspend"
)
RESYNC_S = 1.0


def kustomization(name: str) -> dict[str, Any]:
    spec = {
        "interval": "10m",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        "kubeConfig": {"secretRef": {"name": "c1-kubeconfig"}},
    }
    meta = {"name": name, "namespace": "flux-system"}
    return {"apiVersion": KS, "kind": "Kustomization", "metadata": meta, "spec": spec}


def suspended(mgmt: ManagementCluster, name: str) -> bool:
    kind = BY_API_KIND[(KS, "Kustomization")]
    return mgmt.state.store.get(kind, "flux-system", name)["spec"].get("suspend") is True


@pytest.mark.parametrize("db_path", [SQLITE], indirect=True)  # the store plays no part here
async def test_a_refused_patch_is_counted_once_per_pass_with_the_apis_message(
    mgmt: ManagementCluster, aiohttp_client: Any, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reactor.cd.actuator")
    registry = CollectorRegistry()
    cd = CdSettings(
        flux=True,
        kubeconfig=str(mgmt.kubeconfig),
        resync_interval_s=RESYNC_S,
        informer=InformerSettings(backoff_initial=0.05, backoff_max=0.5),
    )
    client = await aiohttp_client(
        create_app(ReactorSettings(db_path=db_path), registry=registry, cd=cd)
    )
    body = {
        "name": "c1",
        "endpoint": "https://c1.test:6443",
        "kubeconfig_secret_ref": "secret://flux-system/c1-kubeconfig",
    }
    assert (await client.post("/clusters", json=body)).status == 201
    mgmt.seed([kustomization("apps"), kustomization("infra")])
    await notify(client, alert(ONLINE, "c1", 0))
    await until(lambda: mirrored(client, lambda apps: len(apps) == 2))
    mgmt.arm_fault(
        kind="error", status=403, reason="Forbidden", message=DENIED, verb="patch",
        resource=RESOURCE,
    )  # fmt: skip
    failures = metricnames.total(metricnames.REACTOR_CD_FAILURES)

    def refused() -> float:
        return registry.get_sample_value(failures, {"reason": "forbidden"}) or 0.0

    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: refused() >= 2)  # the outage's pass: both objects, once each
    await until(lambda: refused() >= 4)  # the next resync
    between = time.monotonic()
    await until(lambda: refused() >= 6)  # the one after
    between = time.monotonic() - between
    sent = mgmt.counts()[f"patch {RESOURCE}"]
    # Every request counted once, and paced by the passes rather than a loop: two resyncs
    # are a resync interval apart (polled every 20 ms).
    assert 0 <= sent - refused() <= 2  # the answers to a pass's patches may be under way
    assert between >= RESYNC_S * 0.9, f"two tries of 2 objects {between:.2f} s apart"
    actions = metricnames.total(metricnames.REACTOR_CD_ACTIONS)
    assert (registry.get_sample_value(actions, {"action": "pause", "result": "failed"}) or 0) >= 6
    # The API's own words, naming the object, in the log: once per try.
    logged = [r.getMessage() for r in caplog.records if "denied request" in r.getMessage()]
    assert len(logged) >= 6 and all(f"403 forbidden: {DENIED}" in line for line in logged)
    for name in ("apps", "infra"):  # each try names its object (step key) beside the words
        key = f"pause flux:Kustomization/flux-system/{name} "
        assert sum(key in line for line in logged) >= 3, logged
    assert not suspended(mgmt, "apps") and not suspended(mgmt, "infra")
    # The policy fixed: the next pass pauses both, and nothing more is refused.
    mgmt.clear_faults()
    await until(lambda: suspended(mgmt, "apps") and suspended(mgmt, "infra"))
    applied = {"action": "pause", "result": "applied"}
    await until(lambda: registry.get_sample_value(actions, applied) == 2)
    assert mgmt.counts()[f"patch {RESOURCE}"] == refused() + 2
