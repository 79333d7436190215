"""The alert on shards that do not split the fleet between them: FleetwatchShardingMismatch.

Each exporter of a sharded fleet probes the clusters whose name hashes to its
``--shard.index`` modulo its ``--shard.count`` (``fleetwatch.discovery.shard``). That covers the
fleet only while every exporter agrees on the count and sees the same fleet, and every
index has an exporter. A rolling change of the count breaks the first: with one exporter
at ``--shard.count 2`` and the next at 3, a cluster whose hash is 1 modulo 2 and 0
modulo 3 is probed by neither, its status alerts resolve, it reads UNKNOWN and
deployments to it pass the gate, while every exporter looks healthy (each probes its
own share, ``up`` is 1, cycles complete). Nothing per cluster can see it: the cluster's
series are simply absent, as for a cluster that left the fleet.

So the exporters publish their view (``fleetwatch_exporter_shard{index,count}``,
``fleetwatch_exporter_shards``, ``fleetwatch_exporter_fleet_clusters``) and one alert
compares the views, as kube-state-metrics' ``KubeStateMetricsShardingMismatch`` and
``KubeStateMetricsShardsMissing`` do, one rule per way to disagree, told apart by the
``mismatch`` label:

- ``shard_count``: the exporters disagree on ``--shard.count``;
- ``index_missing``: fewer indexes are served than the count says (a StatefulSet with
  fewer replicas than ``--shard.count``; or every replica of a shard down, which
  FleetwatchExporterDown reports too);
- ``index_doubled``: one index has more exporters than the job's targets per shard (an
  exporter given the wrong index serves a shard twice and leaves another with fewer
  vantage points than it should have). Measured against ``up``, which counts the
  exporters that are down too, so a replica down is no doubled index;
- ``fleet_size``: the exporters count different fleets (a Secret not mounted or not
  readable in every pod, a ``--discovery.kubernetes.namespace`` that differs): a cluster
  that only some of them see is probed only if its shard is among those.
"""

from __future__ import annotations

from alerts.model import Group, Rule, RuleSettings, indent, prom_duration
from fleetwatch.common.metricnames import EXPORTER_FLEET_CLUSTERS, EXPORTER_SHARD, EXPORTER_SHARDS

SHARDING_ALERT = "FleetwatchShardingMismatch"

#: How long the shards may disagree on their count or indexes: a rolling change of
#: --shard.count passes through a mismatch while the StatefulSets replace their pods one
#: by one, each ready after its first cycle (seconds). Past this it is no rollout.
SHARDING_FOR = "10m"

#: The shortest hold of the fleet-size rule: the kubelet takes a minute or two to refresh a
#: mounted Secret, and each exporter re-scans once per cycle.
FLEET_SIZE_MIN_FOR_S = 600.0


def _rule(
    why: str, mismatch: str, expr: str, hold: str, severity: str, summary: str, description: str
) -> Rule:
    return Rule(
        why=why,
        body={
            "alert": SHARDING_ALERT,
            "expr": expr,
            "for": hold,
            "labels": {"severity": severity, "mismatch": mismatch},
            "annotations": {"summary": summary, "description": description},
        },
    )


def sharding_group(s: RuleSettings) -> Group:
    job = f'job="{s.exporter_job}"'
    shards = f"{EXPORTER_SHARDS}{{{job}}}"
    fleet = f"{EXPORTER_FLEET_CLUSTERS}{{{job}}}"
    per_index = f"count by (job, index) ({EXPORTER_SHARD}{{{job}}})"
    missing = f"count by (job) ({per_index})\n  <\nmax by (job) ({shards})\n"
    fleet_hold = prom_duration(max(2 * s.probe_interval, FLEET_SIZE_MIN_FOR_S))
    unwatched = (
        "The clusters left to no exporter are not probed: their status alerts resolve, "
        "they read UNKNOWN, and deployments to them pass the gate, while every exporter "
        "looks healthy."
    )
    return Group(
        name="fleetwatch-sharding",
        why=(
            "Sharded exporters that do not split the fleet between them (the module named\n"
            "below says how each rule reads). Unsharded exporters publish\n"
            "count 1, index 0: the rules hold for them as for one shard."
        ),
        rules=(
            _rule(
                why=(
                    "The exporters disagree on --shard.count: each hashes the fleet by its own\n"
                    f"count, and some clusters fall on no shard. `for: {SHARDING_FOR}`: a rolling\n"
                    "change of the count passes through this state."
                ),
                mismatch="shard_count",
                expr=f"max by (job) ({shards})\n  !=\nmin by (job) ({shards})\n",
                hold=SHARDING_FOR,
                severity="critical",
                summary="fleetwatch exporters of job {{ $labels.job }} disagree on --shard.count",
                description=(
                    "The exporters of job {{ $labels.job }} do not all run with the same "
                    "--shard.count (the largest is {{ $value }}; see "
                    f"{EXPORTER_SHARD}{{{job}}} by instance). " + unwatched + " Give every "
                    "exporter the same --shard.count (the sharded overlay writes it once, "
                    "for the replicas and the flag of both StatefulSets) and let the "
                    "rollout finish."
                ),
            ),
            _rule(
                why=(
                    "Fewer shard indexes are served than --shard.count says: a StatefulSet with\n"
                    "fewer replicas than the count, or every replica of a shard down (then\n"
                    "FleetwatchExporterDown fires too)."
                ),
                mismatch="index_missing",
                expr=missing,
                hold=SHARDING_FOR,
                severity="critical",
                summary=(
                    "fleetwatch exporters of job {{ $labels.job }} leave a shard index unserved"
                ),
                description=(
                    "Only {{ $value }} distinct --shard.index values are served by the "
                    "exporters of job {{ $labels.job }}, fewer than their --shard.count. "
                    + unwatched
                    + " Each StatefulSet needs as many replicas as --shard.count (see "
                    f"{EXPORTER_SHARD}{{{job}}} for the indexes served)."
                ),
            ),
            _rule(
                why=(
                    "One index has more exporters than the job has targets per shard (up counts\n"
                    "the exporters that are down too, so a replica down is not this): an\n"
                    "exporter with the wrong --shard.index, so another shard has fewer vantage\n"
                    "points than the deployment gives it. A warning: every cluster is probed.\n"
                    "Not while an index is missing: then the rule above says more."
                ),
                mismatch="index_doubled",
                expr=(
                    "(\n"
                    f"    max by (job) ({per_index})\n"
                    "  >\n"
                    f"    count by (job) (up{{{job}}}) / max by (job) ({shards})\n"
                    ")\n"
                    f"unless on (job) (\n{indent(missing, '    ')})\n"
                ),
                hold=SHARDING_FOR,
                severity="warning",
                summary=(
                    "a shard index of the fleetwatch exporters of job {{ $labels.job }} is "
                    "served more than the others"
                ),
                description=(
                    "One --shard.index is served by {{ $value }} exporters of job "
                    "{{ $labels.job }}, more than its targets per shard: an exporter runs with "
                    "the wrong index (a host name whose ordinal is not its shard's, a flag "
                    "copied from another instance), so another shard is watched from fewer "
                    "places than intended and one network problem there can make its "
                    f"clusters OFFLINE. See {EXPORTER_SHARD}{{{job}}} by instance."
                ),
            ),
            _rule(
                why=(
                    "The exporters count different fleets: a cluster that some of them do not\n"
                    "see is probed only if its shard is among those that do. `for`: two probe\n"
                    f"intervals and at least {prom_duration(FLEET_SIZE_MIN_FOR_S)} (each exporter"
                    " re-scans once per cycle, the\nkubelet refreshes a mounted Secret within"
                    " a minute or two)."
                ),
                mismatch="fleet_size",
                expr=f"max by (job) ({fleet})\n  !=\nmin by (job) ({fleet})\n",
                hold=fleet_hold,
                severity="critical",
                summary=(
                    "fleetwatch exporters of job {{ $labels.job }} see fleets of different sizes"
                ),
                description=(
                    "The exporters of job {{ $labels.job }} do not discover the same fleet "
                    f"(the largest counts {{{{ $value }}}} clusters; see {fleet} by instance). "
                    "A cluster that an exporter does not see is not probed by it: when that "
                    "exporter is the one of its shard, no one probes it. Compare `fleetwatch "
                    "discover` in two of their pods: a kubeconfig Secret mounted in some "
                    "pods only, Secrets one service account may not read, different "
                    "--discovery.kubernetes.namespace flags."
                ),
            ),
        ),
    )
