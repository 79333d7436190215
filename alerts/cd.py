"""The alert on the CD integration: pauses and resumes of Flux and Argo CD objects left undone.

With ``--cd.flux``/``--cd.argocd`` the reactor patches the management cluster's objects
to match its store (``reactor.cd``); a patch that fails is counted by reason and decided
again at every pass, the resync at the latest. What costs something is an action that
keeps failing: a cluster's Kustomizations not paused while it is OFFLINE (they retry
against it), or, worse, not resumed after it came back (nothing deploys there). The
reactor exports how long the oldest such action has waited
(``fleetwatch_reactor_cd_oldest_pending_action_age_seconds``) beside its resync interval,
so one alert says so whatever ``--cd.resync-interval`` is.

Why two intervals and ``for: 5m``: one failure leaves an action pending until the next
pass, at most one interval; past two, it has failed at least twice in a row, which a 409
(decided again at once on the new version) or one lost request never does. The 5
minutes then ride out what heals by itself at the next retries (the management
cluster's API servers restarted in an upgrade, a throttling burst), which would
otherwise page at every control-plane upgrade. At the default 60 s interval the alert
fires 7 minutes after the first failed attempt. A dry run keeps every action pending by
design (nothing is ever done): its reactor never fires it (``fleetwatch_reactor_cd_info``).

``FleetwatchCDUnwatchedObjectsPaused``: objects of a kind the acting reactor does not
watch (``--cd.argocd`` or ``--cd.flux`` dropped) whose last seen state is fleetwatch's
pause for an outage. Nothing will resume them, not even the outage's end
(``reactor.cd.scope``), so a person must. A dry run counts what it does not watch too, but
it acts on nothing, and beside an acting replica that watches the kind its count would
page for objects that are looked after: it is left out, as for the pending actions.

``FleetwatchCDWatchDown``: a reactor's list+watch of the objects has failed for 10
minutes (or, with ``--cd.process``, its objects process keeps ending). Its passes go on
against the objects last seen, so nothing else says it: a pause undone by a person, a new
object, a deleted one go unseen. Every replica, acting or not, and a dry run too: each
watches for itself, and the one that takes the Lease next acts on what it saw.
"""

from __future__ import annotations

from alerts.model import Group, Rule
from fleetwatch.common.metricnames import (
    REACTOR_CD_ACTIONS,
    REACTOR_CD_FAILURES,
    REACTOR_CD_INFO,
    REACTOR_CD_LAST_RESYNC,
    REACTOR_CD_LEADER,
    REACTOR_CD_LEASE_FAILURES,
    REACTOR_CD_PENDING,
    REACTOR_CD_PENDING_AGE,
    REACTOR_CD_RESYNC_INTERVAL,
    REACTOR_CD_UNWATCHED,
    REACTOR_CD_WATCH_UP,
    REACTOR_DATABASE_UP,
    total,
)

CD_PENDING_ALERT = "FleetwatchCDActionsPending"
CD_NO_ACTOR_ALERT = "FleetwatchCDNoActingReplica"
CD_STALLED_ALERT = "FleetwatchCDResyncStalled"
CD_UNWATCHED_ALERT = "FleetwatchCDUnwatchedObjectsPaused"
CD_WATCH_DOWN_ALERT = "FleetwatchCDWatchDown"
#: How long the objects' list+watch may fail: as for the Secrets' (``alerts.discovery``).
CD_WATCH_DOWN_FOR = "10m"
#: Long enough for a rolling update that turns a kind back on: the old acting replica
#: counts its rows until the new one takes the Lease.
CD_UNWATCHED_FOR = "5m"
#: Resync intervals without a full pass, and then for how long, before it fires.
CD_STALLED_INTERVALS = 3
CD_STALLED_FOR = "5m"
#: How long no replica may hold the Lease: many lease durations (15 s by default), so a
#: hand-over (a replica's death, a rolling upgrade) never fires it.
CD_NO_ACTOR_FOR = "2m"
#: How many resync intervals an action may wait (each a retry), and then for how long.
CD_PENDING_INTERVALS = 2
CD_PENDING_FOR = "5m"


def cd_group() -> Group:
    where = '{instance="{{ $labels.instance }}"}'
    return Group(
        name="fleetwatch-cd",
        why=(
            "Flux and Argo CD objects paused and resumed by the reactor (--cd.flux, --cd.argocd).\n"
            "Only a reactor started with one of them exports these series: without them, no\n"
            "series and no alert."
        ),
        rules=(
            Rule(
                why=(
                    "An action on a Flux or Argo CD object (pause, resume, drop the mark) "
                    "decided and\n"
                    f"not done for more than {CD_PENDING_INTERVALS} resync intervals, for "
                    f"{CD_PENDING_FOR}: every retry failed. Two intervals:\n"
                    "one failure waits one interval for its retry, so two mean two failures "
                    "in a row;\n"
                    "5 minutes: a management API restarting in an upgrade heals by itself. "
                    "Never in a\n"
                    "dry run, where nothing is ever done. Each reactor exports its own."
                ),
                body={
                    "alert": CD_PENDING_ALERT,
                    "expr": (
                        f"{REACTOR_CD_PENDING_AGE}\n"
                        f"  > {CD_PENDING_INTERVALS} * {REACTOR_CD_RESYNC_INTERVAL}\n"
                        f'unless on (job, instance) {REACTOR_CD_INFO}{{dry_run="true"}}\n'
                    ),
                    "for": CD_PENDING_FOR,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "{{ $labels.job }} {{ $labels.instance }} cannot pause or resume "
                            "Flux or Argo CD objects"
                        ),
                        "description": (
                            "The oldest pause or resume {{ $labels.job }} at "
                            "{{ $labels.instance }} decided has waited {{ $value }} seconds, "
                            f"more than {CD_PENDING_INTERVALS} resync intervals: every retry "
                            "failed. A pause not done leaves a down cluster's objects retrying "
                            "against it; a resume not done leaves a cluster that came back "
                            "without deployments. How many wait: "
                            f"{REACTOR_CD_PENDING}{where}; why: "
                            f"{total(REACTOR_CD_FAILURES)}{where} by reason and "
                            f'{total(REACTOR_CD_ACTIONS)}{{result="failed"}}, and its log '
                            '("cd: ... failed, retried at the next pass"). forbidden: its '
                            "service account lacks patch on the objects' kind (the cd-* "
                            "components of deploy/ grant it; cluster Secrets need "
                            "cd-argocd-cluster-secret); network or timeout: the management "
                            "cluster's API is unreachable (the gate and the store keep "
                            "working, only these wait); bad_request: a webhook or the "
                            "object's schema refuses the patch."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "No replica of a reactor job holds the CD Lease (--cd.leader-election), "
                    f"for {CD_NO_ACTOR_FOR}:\n"
                    "nothing pauses or resumes an object, and only the acting replica "
                    "exports pending\n"
                    "actions, so FleetwatchCDActionsPending cannot say it. A hand-over "
                    "takes one lease\n"
                    "duration (15 s). Without the election (a dry run, "
                    "--no-cd.leader-election) there\n"
                    "is no such series and no alert."
                ),
                body={
                    "alert": CD_NO_ACTOR_ALERT,
                    "expr": f"max by (job) ({REACTOR_CD_LEADER}) == 0\n",
                    "for": CD_NO_ACTOR_FOR,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": ("No {{ $labels.job }} replica acts on Flux or Argo CD objects"),
                        "description": (
                            "No replica of {{ $labels.job }} has held the CD Lease for "
                            f"{CD_NO_ACTOR_FOR}: an outage now pauses no Flux or Argo CD "
                            "object, and nothing paused is resumed. Why: "
                            f'{total(REACTOR_CD_LEASE_FAILURES)}{{job="{{{{ $labels.job }}}}"}} '
                            'by reason and the replicas\' log ("cd: Lease ..."). forbidden: '
                            "the service account may not get, create or update the Lease "
                            "(the cd component of deploy/ grants it, in the reactor's "
                            "namespace); network or timeout: the management cluster's API "
                            "is unreachable."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    f"The replica that acts (or the only one) has made no full pass over the "
                    f"objects for\n"
                    f"{CD_STALLED_INTERVALS} resync intervals, for {CD_STALLED_FOR}: the "
                    "first list of the objects never completed (a\n"
                    "missing list grant: nothing is mirrored, nothing would be paused) or "
                    "every pass fails.\n"
                    "Held back while its database is unavailable (that alert says it); "
                    "replicas that\n"
                    "wait for the Lease do not count."
                ),
                body={
                    "alert": CD_STALLED_ALERT,
                    "expr": (
                        f"time() - {REACTOR_CD_LAST_RESYNC}\n"
                        f"  > {CD_STALLED_INTERVALS} * {REACTOR_CD_RESYNC_INTERVAL}\n"
                        f"unless on (job, instance) ({REACTOR_CD_LEADER} == 0)\n"
                        f"unless on (job, instance) ({REACTOR_DATABASE_UP} == 0)\n"
                    ),
                    "for": CD_STALLED_FOR,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "{{ $labels.job }} {{ $labels.instance }} no longer checks the Flux "
                            "and Argo CD objects"
                        ),
                        "description": (
                            "{{ $labels.job }} at {{ $labels.instance }} acts on the Flux and "
                            "Argo CD objects but has made no full pass over them for "
                            f"{CD_STALLED_INTERVALS} resync intervals: outages may pause "
                            'nothing. Its log says why: without a "cd: first list complete" '
                            'line, the list of a kind is refused or fails ("management '
                            'cluster API: ..."; forbidden: its service account lacks list or '
                            "watch on the kind, which deploy/'s cd-* components grant); "
                            '"cd: the store cannot answer": its database.'
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "The list+watch of the Flux and Argo CD objects has failed for "
                    f"{CD_WATCH_DOWN_FOR} (or, with\n"
                    "--cd.process, the objects process keeps ending). Passes go on against "
                    "the objects last\n"
                    "seen, so no other alert says it. 10 minutes: the backoff (0.8 s to "
                    "30 s) rides out an\n"
                    "API server restart, as for the Secrets' list+watch. Every replica: "
                    "each watches for itself."
                ),
                body={
                    "alert": CD_WATCH_DOWN_ALERT,
                    "expr": f"{REACTOR_CD_WATCH_UP} == 0\n",
                    "for": CD_WATCH_DOWN_FOR,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "{{ $labels.job }} {{ $labels.instance }} cannot watch the Flux "
                            "and Argo CD objects"
                        ),
                        "description": (
                            "The list+watch of the Flux and Argo CD objects by "
                            "{{ $labels.job }} at {{ $labels.instance }} has failed for "
                            f"{CD_WATCH_DOWN_FOR} or more. It acts on the objects it saw "
                            "last: a new object is not mirrored, a deleted one stays, a "
                            "pause undone by hand or by its owner is not seen. Its log says "
                            'why: "management cluster API: ..." (forbidden: its service '
                            "account lacks list or watch on a kind, which deploy/'s cd-* "
                            "components grant; unauthorized: its token or --cd.kubeconfig "
                            'is refused), or "cd: the objects process ended (...)" again '
                            "and again (its memory limit, the kernel's OOM killer)."
                        ),
                    },
                },
            ),
            Rule(
                why=(
                    "Objects of a kind the acting reactor does not watch (its --cd.flux or "
                    "--cd.argocd dropped)\n"
                    "that fleetwatch paused for an outage: nothing resumes them, not even "
                    "the outage's end.\n"
                    f"For {CD_UNWATCHED_FOR}: a rolling update that turns the kind back on. "
                    "Never from a dry run, which acts\n"
                    "on nothing and may watch fewer kinds than the acting replica beside it."
                ),
                body={
                    "alert": CD_UNWATCHED_ALERT,
                    "expr": (
                        "max by (job, kind) (\n"
                        f'  {REACTOR_CD_UNWATCHED}{{state="paused_by_outage"}}\n'
                        f'  unless on (job, instance) {REACTOR_CD_INFO}{{dry_run="true"}}\n'
                        ") > 0\n"
                    ),
                    "for": CD_UNWATCHED_FOR,
                    "labels": {"severity": "warning"},
                    "annotations": {
                        "summary": (
                            "{{ $value }} {{ $labels.kind }} object(s) paused by fleetwatch "
                            "that no {{ $labels.job }} replica watches"
                        ),
                        "description": (
                            "{{ $value }} {{ $labels.kind }} object(s) were paused by "
                            "fleetwatch for an outage, and the acting replica of "
                            "{{ $labels.job }} does not watch their kind (started without "
                            "--cd.flux or --cd.argocd): nothing will resume them, not even "
                            "the end of their outage, and their delivery stays stopped. The "
                            "acting replica's log names them (\"cd: ... were paused by "
                            'fleetwatch for an outage, and nothing will resume them"). Turn '
                            "the kind back on (the reactor then finishes what it started), "
                            'or resume them by hand: docs/cd.md, "Rows of a kind no replica '
                            'watches".'
                        ),
                    },
                },
            ),
        ),
    )
