"""The alert on discovery from the management cluster's API: its list+watch failing.

With ``--discovery.kubernetes`` the exporter (and the reactor) keeps the Secrets of a
management cluster by list+watch (``fleetwatch.kube.informer``) and exports its health
(``fleetwatch.discovery.apimetrics.InformerCollector``). While the API fails, the clusters last seen
stay published and probed, so nothing goes dark at once; what is lost is news: a new
cluster, a deleted one, a rotated credential. One alert says so when it lasts.

Why one alert and not a second one on ``last_sync`` growing old: every way the informer
can fail sets ``up`` to 0 until a request succeeds again (an error answer, a network
failure, a watch silent past its deadline, a first list that never completes), so an
old ``last_sync`` with ``up`` 1 is no failure at all: ``last_sync`` moves on a list and on
a watch event (bookmarks included), and on a quiet management cluster it ages by the
API server's bookmark period, or for good where the API server sends no bookmarks (the
Kubernetes API promises none at any interval). It stays on the dashboards and in the
alert's description, to read how long it has been.
"""

from __future__ import annotations

from alerts.model import Group, Rule
from fleetwatch.common.metricnames import (
    DISCOVERY_KUBERNETES_ERRORS,
    DISCOVERY_KUBERNETES_LAST_SYNC,
    DISCOVERY_KUBERNETES_UP,
)

DISCOVERY_DOWN_ALERT = "FleetwatchKubernetesDiscoveryDown"

#: How long the list+watch may fail before anyone is told (the rule's comment says why).
DISCOVERY_DOWN_FOR = "10m"


def discovery_group() -> Group:
    where = '{instance="{{ $labels.instance }}"}'
    return Group(
        name="fleetwatch-discovery",
        why=(
            "Clusters read from the management cluster's Secrets (--discovery.kubernetes).\n"
            "Only an exporter or reactor started with that flag exports these series: without\n"
            "it, no series and no alert."
        ),
        rules=(
            Rule(
                why=(
                    "The list+watch of Secrets has failed for 10 minutes. Any job: the\n"
                    "exporter and the reactor export the same series. A warning: the clusters\n"
                    "last seen are still probed, but new, deleted and rotated Secrets go\n"
                    "unseen. `for: 10m`: the informer retries with backoff (0.8 s to 30 s), so\n"
                    "a restart of the management cluster's API servers (a rolling upgrade, a\n"
                    "leader change) and the first list at start are over well before; and 10\n"
                    "minutes is the default grace period (2 probes of 300 s), so the alert is\n"
                    "there by the time a credential rotated meanwhile can have made a cluster\n"
                    "OFFLINE."
                ),
                body={
                    "alert": DISCOVERY_DOWN_ALERT,
                    "expr": f"{DISCOVERY_KUBERNETES_UP} == 0\n",
                    "for": DISCOVERY_DOWN_FOR,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "{{ $labels.job }} {{ $labels.instance }} cannot read clusters from "
                            "the management cluster's API"
                        ),
                        "description": (
                            "The list+watch of Secrets by {{ $labels.job }} at "
                            f"{{{{ $labels.instance }}}} has failed for {DISCOVERY_DOWN_FOR} or "
                            "more. The "
                            "clusters it saw last are still probed, but Secrets added, deleted "
                            "or rotated since are not seen: a rotated credential makes its "
                            "cluster's probes fail, and it can turn OFFLINE. The reason is in "
                            f"{DISCOVERY_KUBERNETES_ERRORS}{where} and in its log "
                            '("management cluster API: ..."); how long since the last good '
                            f"answer: time() - {DISCOVERY_KUBERNETES_LAST_SYNC}{where}. "
                            "forbidden: its service account lacks get, list and watch on "
                            "Secrets in a namespace it watches (the clusters-from-* components "
                            "grant them; --discovery.kubernetes.namespace must name only those "
                            "namespaces). unauthorized: its token (or the kubeconfig of "
                            "--discovery.kubernetes.kubeconfig) is refused. network or timeout: "
                            "a NetworkPolicy or firewall between the pod and the API server "
                            "(port 443 of the kubernetes Service, 6443 on the control-plane "
                            "nodes behind it)."
                        ),
                    },
                },
            ),
        ),
    )
