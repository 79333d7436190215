"""The exporter's own alerts: an exporter down, with or without another replica covering
its clusters, and an exporter that answers scrapes but whose probe cycles stopped."""

from __future__ import annotations

from alerts.model import Group, Rule, RuleSettings
from alerts.status import MEMORY, remembered, stalled, uncovered


def exporter_group(s: RuleSettings) -> Group:
    job = f'job="{s.exporter_job}"'
    down = f"up{{{job}}} == 0"
    # Down, and some cluster it published is published by no one now; or down and nothing
    # remembered of it (never came up, or down for longer than MEMORY).
    unwatched = (
        "(\n"
        f"    {down}\n"
        f"  and on (job, instance) ({uncovered(s)})\n"
        ")\n"
        "or (\n"
        f"    {down}\n"
        f"  unless on (job, instance) {remembered(s)}\n"
        ")\n"
    )
    covered = (
        "(\n"
        f"    {down}\n"
        f"  and on (job, instance) {remembered(s)}\n"
        ")\n"
        f"unless on (job, instance) ({uncovered(s)})\n"
    )
    return Group(
        name="fleetwatch-exporter",
        why=(
            "The watcher itself. While every replica probing a cluster is down, its status\n"
            "alerts resolve: it reads UNKNOWN, deployments are allowed and no outage is seen.\n"
            "With two replicas per shard, one replica down changes no status: a warning."
        ),
        rules=(
            Rule(
                why=(
                    "Clusters unwatched: an exporter is down and no other replica publishes\n"
                    f"some cluster it did (or the rules know nothing of it: it never came up, or\n"
                    f"it has been down for over {MEMORY}). `for: 2m`: a restart costs a scrape\n"
                    "or two; longer than that and part of the fleet is unwatched."
                ),
                body={
                    "alert": "FleetwatchExporterDown",
                    "expr": unwatched,
                    "for": "2m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": (
                            "fleetwatch exporter {{ $labels.instance }} is down and its clusters "
                            "are unwatched"
                        ),
                        "description": (
                            "Prometheus cannot scrape the fleetwatch exporter at "
                            "{{ $labels.instance }}, and no other replica probes (some of) its "
                            "clusters. Until one is back they read UNKNOWN: outages go unnoticed "
                            "and deployments are not gated. Check the process (fleetwatch "
                            "exporter), its log and its --web.listen-address; with shards, that "
                            "both replicas of its --shard.index run."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "One replica down while another still publishes every cluster it did (two\n"
                    "replicas per shard): statuses are unchanged, one vantage point is left.\n"
                    "A warning; it becomes FleetwatchExporterDown if the other goes too."
                ),
                body={
                    "alert": "FleetwatchExporterReplicaDown",
                    "expr": covered,
                    "for": "2m",
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "fleetwatch exporter replica {{ $labels.instance }} is down; "
                            "another replica covers its clusters"
                        ),
                        "description": (
                            "Prometheus cannot scrape the fleetwatch exporter at "
                            "{{ $labels.instance }}. Another replica of its shard still probes "
                            "every cluster it did, so no status changed, but those clusters "
                            "are watched from one place only: a network problem of that replica "
                            "would now make them OFFLINE. Bring the replica back."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "No exporter target at all (scrape job removed or renamed, service discovery\n"
                    "empty). `for: 5m` covers a Prometheus restart, when absent() is briefly true."
                ),
                body={
                    "alert": "FleetwatchExporterAbsent",
                    "expr": f"absent(up{{{job}}})\n",
                    "for": "5m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": f"No fleetwatch exporter is scraped (job {s.exporter_job})",
                        "description": (
                            f"Prometheus has no target with {job}, so no cluster is watched. Check "
                            "the scrape config (the job name must match the rules: fleetwatch "
                            "rules --exporter.job) and its service discovery."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Scraped but stalled: no probe cycle has ended for over 3 probe intervals\n"
                    "(or none since it started that long ago). Its series are frozen at old\n"
                    "values, worse than absent: a frozen replica keeps a cluster ONLINE that the\n"
                    "other replica sees failing. The exporter's /-/ready fails on the same\n"
                    "condition. `for: 2m` rides out a slow scrape."
                ),
                body={
                    "alert": "FleetwatchExporterStalled",
                    "expr": stalled(s),
                    "for": "2m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": (
                            "fleetwatch exporter {{ $labels.instance }} has completed no probe "
                            "cycle for over 3 intervals"
                        ),
                        "description": (
                            "The fleetwatch exporter at {{ $labels.instance }} answers scrapes "
                            "but its probe cycles have stopped: its cluster series hold old "
                            "values, so outages it should see go unnoticed. Its /-/ready answers "
                            "503. Read its log (credential plugins and kubeconfig reads are the "
                            "usual suspects) and restart it."
                        ),
                    },
                },
            ),
        ),
    )
