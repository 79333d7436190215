"""The reactor's own alerts: down, its database unavailable, its reconciliation or its
notifications failing.

While the reactor cannot act, nothing else says so: Alertmanager retries a refused
notification for a while and then drops it, pipelines whose ``fleetwatch gate`` cannot ask
stop (or, written to ignore errors, deploy ungated), and the apps of a cluster that goes
down are not degraded. These alerts are what a person sees instead.

Every alert is per replica (``job``, ``instance``), and one cause pages once: the
reconciliation and the notifications fail too while the database is unavailable, so
their alerts hold back while ``fleetwatch_reactor_database_up`` says it is. The reactor
answers ``/metrics`` from memory while its database is down (``reactor.metrics``), so a
database outage is not read as the reactor being down.

No alert on the reactor's target being absent (as there is for the exporter): a
Prometheus that watches the fleet without running the reactor is a setup we support, and
it would page for ever. ``FleetwatchReactorDown`` needs the scrape job.
"""

from __future__ import annotations

from alerts.model import Group, Rule, RuleSettings
from fleetwatch.common.metricnames import (
    REACTOR_DATABASE_UP,
    REACTOR_NOTIFICATIONS,
    REACTOR_RECONCILE_FAILURES,
    REACTOR_RECONCILE_INTERVAL,
    REACTOR_RECONCILE_LAST_SUCCESS,
    total,
)

REACTOR_DOWN_ALERT = "FleetwatchReactorDown"
REACTOR_REPLICA_DOWN_ALERT = "FleetwatchReactorReplicaDown"
DATABASE_ALERT = "FleetwatchReactorDatabaseUnavailable"
RECONCILE_ALERT = "FleetwatchReactorReconciliationFailing"
NOTIFICATIONS_ALERT = "FleetwatchReactorNotificationsFailing"

#: The window over which notifications are judged (Alertmanager repeats each firing
#: status alert every 5 minutes on the reactor's routes: two chances in the window).
NOTIFICATIONS_WINDOW = "10m"

#: The database's alert holds the others back while it says the database is down.
_UNLESS_DATABASE_DOWN = f"unless on (job, instance) ({REACTOR_DATABASE_UP} == 0)\n"


def reconcile_failing() -> str:
    """Replicas whose reconciliation has not succeeded for over 3 intervals (counted from
    the process start when it never has), where it is configured."""
    interval = REACTOR_RECONCILE_INTERVAL
    return (
        "(\n"
        "    time() - (\n"
        f"        {REACTOR_RECONCILE_LAST_SUCCESS} > 0\n"
        f"      or on (job, instance) process_start_time_seconds\n"
        "    )\n"
        f"  > on (job, instance) 3 * {interval}\n"
        ")\n"
        f"and on (job, instance) ({interval} > 0)\n"
        f"{_UNLESS_DATABASE_DOWN}"
    )


def notifications_failing() -> str:
    """Replicas that refused or failed notifications and applied none in the window."""
    counter, window = total(REACTOR_NOTIFICATIONS), NOTIFICATIONS_WINDOW
    return (
        f'sum by (job, instance) (increase({counter}{{outcome!="applied"}}[{window}])) > 0\n'
        "unless on (job, instance)\n"
        f'  sum by (job, instance) (increase({counter}{{outcome="applied"}}[{window}])) > 0\n'
        f"{_UNLESS_DATABASE_DOWN}"
    )


def reactor_group(s: RuleSettings) -> Group:
    job = f'job="{s.reactor_job}"'
    where = '{instance="{{ $labels.instance }}"}'
    return Group(
        name="fleetwatch-reactor",
        why=(
            "The reactor itself. While it cannot act, notifications are not applied (no\n"
            "cascade, no restore) and deployments are not gated: `POST /deployments` and\n"
            "`fleetwatch gate` get no answer or a 503."
        ),
        rules=(
            Rule(
                why=(
                    "Every replica of the reactor is down. `for: 2m`: a restart or a rolling\n"
                    "update costs a scrape or two."
                ),
                body={
                    "alert": REACTOR_DOWN_ALERT,
                    "expr": f"up{{{job}}} == 0\nunless on (job) (up{{{job}}} == 1)\n",
                    "for": "2m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": "fleetwatch reactor {{ $labels.instance }} is down, and no "
                        "other replica is up",
                        "description": (
                            "Prometheus cannot scrape any replica of the fleetwatch reactor "
                            "({{ $labels.job }}). Alertmanager's notifications are refused "
                            "and dropped after its retries (the repeats every 5 minutes "
                            "repair them once it is back), apps of a cluster that goes down "
                            "are not degraded, and deployments are not gated: fleetwatch "
                            "gate exits 2. Check the process (fleetwatch reactor), its log "
                            "(a database it cannot open at start-up exits 1) and its "
                            "--web.listen-address."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "One replica down while another serves: nothing is lost, one replica\n"
                    "carries the load. A warning; it becomes FleetwatchReactorDown if the\n"
                    "others go too."
                ),
                body={
                    "alert": REACTOR_REPLICA_DOWN_ALERT,
                    "expr": f"up{{{job}}} == 0\nand on (job) (up{{{job}}} == 1)\n",
                    "for": "2m",
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": "fleetwatch reactor replica {{ $labels.instance }} is down",
                        "description": (
                            "Prometheus cannot scrape the fleetwatch reactor at "
                            "{{ $labels.instance }}; another replica serves. Bring it back "
                            "before the others go: its log says why it stopped."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "The reactor runs but cannot use its database: every call and every\n"
                    "notification answers 503. `for: 2m`: a PostgreSQL restart or failover\n"
                    "takes seconds, and the reactor reconnects by itself."
                ),
                body={
                    "alert": DATABASE_ALERT,
                    "expr": f"{REACTOR_DATABASE_UP} == 0\n",
                    "for": "2m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": "fleetwatch reactor {{ $labels.instance }} cannot use its "
                        "database",
                        "description": (
                            "The fleetwatch reactor at {{ $labels.instance }} cannot read its "
                            "database: every API call and every Alertmanager notification "
                            "answers 503 (Alertmanager retries, then drops them; its repeats "
                            "repair them later), and deployments are not gated. Its log says "
                            'why ("database unavailable (...)": the host, the file, the '
                            "driver's error); its /-/ready answers 503. Check the database "
                            "(PostgreSQL up, reachable, its password: --db.password-file) or, "
                            "on SQLite, the file and its volume."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Reconciliation with Alertmanager configured (--alertmanager.url) and no\n"
                    "success for over 3 intervals: a notification Alertmanager lost is not\n"
                    "repaired until it works again. Held back while the database is down (its\n"
                    "own alert says so). `for: 2m` rides out a slow Alertmanager."
                ),
                body={
                    "alert": RECONCILE_ALERT,
                    "expr": reconcile_failing(),
                    "for": "2m",
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": "fleetwatch reactor {{ $labels.instance }} cannot reconcile "
                        "with Alertmanager",
                        "description": (
                            "The fleetwatch reactor at {{ $labels.instance }} has not read "
                            "any Alertmanager for over 3 reconciliation intervals. Webhooks "
                            "still work, but a notification Alertmanager dropped (a resolved "
                            "one is never re-sent) leaves a cluster's status wrong until this "
                            "works. Which Alertmanager fails: "
                            f"{total(REACTOR_RECONCILE_FAILURES)}{where}; why: its log "
                            '("reconciliation: cannot read Alertmanager ..."): an address, '
                            "credentials of --alertmanager.http-config.file, a listing over "
                            "--alertmanager.max-listing-bytes."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Notifications refused or failed, and none applied, over "
                    f"{NOTIFICATIONS_WINDOW}:\n"
                    "Alertmanager's are not getting through (a stale token, a payload\n"
                    "refused). With some applied the reactor hears Alertmanager: a stray\n"
                    "401 pages no one. Held back while the database is down."
                ),
                body={
                    "alert": NOTIFICATIONS_ALERT,
                    "expr": notifications_failing(),
                    "for": "5m",
                    "labels": {"severity": "critical"},
                    "annotations": {
                        "summary": "fleetwatch reactor {{ $labels.instance }} refuses "
                        "Alertmanager's notifications",
                        "description": (
                            "The fleetwatch reactor at {{ $labels.instance }} applied no "
                            f"notification in {NOTIFICATIONS_WINDOW} and refused or failed "
                            "some: clusters that go down are not seen, apps are not "
                            "degraded nor restored, and the gate judges old statuses. "
                            f'{total(REACTOR_NOTIFICATIONS)}{{outcome!="applied"}} says how: '
                            "unauthorized (401: Alertmanager's credentials_file does not hold "
                            "the token of --web.token-file), rejected (400 or 413: its log "
                            'says why: "POST /alerts refused"), error (503).'
                        ),
                    },
                },
            ),
        ),
    )
