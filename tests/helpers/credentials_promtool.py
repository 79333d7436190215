"""Unit tests of refused credentials in promtool's format (alerts/tests/credentials.test.yml).

One timeline for both settings of ``--failure.count-rejected``: a cluster answers, then
its token is revoked (every probe refused), then the token is fixed. By default the
refusals count (FleetClusterCredentialsRejected at once, OFFLINE after N); not counted,
the cluster reads UNKNOWN while refused and is never OFFLINE. Beside it: a cluster refused
by one replica and unreachable from the other (no CredentialsRejected: not every vantage
point was refused), and one plainly down. The shipped file is this module's output for the
default settings (a test keeps them equal); regenerate it after changing the rules::

    .venv/bin/python -m tests.helpers.credentials_promtool > alerts/tests/credentials.test.yml
"""

from __future__ import annotations

from typing import Any

from alerts.rules import RuleSettings
from fleetwatch.common.contract import CREDENTIALS_ALERT
from fleetwatch.common.metricnames import CLUSTER_PROBE_LAST_FAILURE_REASON, CLUSTER_PROBE_SUCCESS
from tests.helpers.promtool_build import (
    Generator,
    case,
    cluster_series,
    expected,
    file_body,
    status_codes,
    timeline,
)

A, B = "127.0.0.1:9713", "127.0.0.2:9713"
JOB = "fleetwatch-exporter"


def _reason_series(
    cluster: str, instance: str, reasons: list[tuple[str, str] | None]
) -> list[dict[str, str]]:
    """``fleetwatch_cluster_probe_last_failure_reason`` as the exporter writes it: one
    series per (reason, class), 1 in the minutes it is the last failure, absent otherwise
    (``stale`` once it was there), and ``fleetwatch_cluster_probe_success``."""
    labels = f'cluster="{cluster}", job="{JOB}", instance="{instance}"'
    out = [
        {
            "series": f"{CLUSTER_PROBE_SUCCESS}{{{labels}}}",
            "values": timeline([1 if r is None else 0 for r in reasons]),
        }
    ]
    for reason, klass in sorted({r for r in reasons if r is not None}):
        values: list[str] = []
        for r in reasons:  # gone after a success: a staleness marker, as a scrape writes
            values.append("1" if r == (reason, klass) else "stale" if "1" in values else "_")
        out.append(
            {
                "series": (
                    f'{CLUSTER_PROBE_LAST_FAILURE_REASON}{{{labels}, reason="{reason}", '
                    f'class="{klass}"}}'
                ),
                "values": " ".join(values),
            }
        )
    return out


def _alerts(
    s: RuleSettings, minute: int, alert: str, firing: list[tuple[str, dict[str, str]]]
) -> dict[str, Any]:
    return {
        "eval_time": f"{minute}m",
        "alertname": alert,
        "exp_alerts": [
            expected(s, alert, {"cluster": cluster}, None, reasons) for cluster, reasons in firing
        ],
    }


def revoked_case(s: RuleSettings) -> dict[str, Any]:
    """A token revoked at minute 2 (401 from then on), fixed at minute ``fixed``."""
    n = s.failure_threshold
    refused_for = n + 3
    start, fixed = 2, 2 + refused_for
    failures: list[int | str] = [0] * start + list(range(1, refused_for + 1)) + [0] * 2
    last: list[int | str] = [60] * fixed + [60 * fixed, 60 * (fixed + 1)]
    refused = ("unauthorized", "credentials")
    reasons = [None] * start + [refused] * refused_for + [None] * 2
    said = {"reason": "unauthorized", "reason_class": "credentials", "seen_by": A}
    offline_at = start + n - 1  # the N-th refusal
    tests: list[dict[str, Any]] = [
        _alerts(s, start - 1, CREDENTIALS_ALERT, []),
        # At once: the first refused probe, whatever N.
        _alerts(s, start, CREDENTIALS_ALERT, [("revoked", said)]),
        _alerts(s, fixed - 1, CREDENTIALS_ALERT, [("revoked", said)]),
        _alerts(s, fixed, CREDENTIALS_ALERT, []),
        _alerts(s, fixed, "FleetClusterOnline", [("revoked", {})]),
        _alerts(s, fixed, "FleetClusterOffline", []),
    ]
    if s.count_rejected:
        tests += [
            _alerts(s, offline_at, "FleetClusterOffline", [("revoked", said)]),
            _alerts(s, fixed - 1, "FleetClusterOffline", [("revoked", said)]),
        ]
        if n >= 2:
            tests += [
                _alerts(s, offline_at - 1, "FleetClusterOffline", []),
                _alerts(s, start, "FleetClusterOnline", [("revoked", said)]),
            ]
        codes = [(start - 1, 1), (offline_at, 2), (fixed - 1, 2), (fixed, 1)]
    else:
        tests += [
            # UNKNOWN: neither status alert, nor the warning of the grace period.
            *(_alerts(s, m, "FleetClusterOffline", []) for m in (start, offline_at, fixed - 1)),
            *(_alerts(s, m, "FleetClusterOnline", []) for m in (start, offline_at, fixed - 1)),
            _alerts(s, start, "FleetClusterProbeFailing", []),
        ]
        codes = [(start - 1, 1), (start, 0), (offline_at, 0), (fixed - 1, 0), (fixed, 1)]
    return case(
        name=(f"threshold {n}, count rejected {s.count_rejected}: a token revoked, then fixed"),
        input_series=[
            *cluster_series(
                "revoked",
                failures,
                last,
                instance=A,
                credential=[f if r else 0 for f, r in zip(failures, reasons, strict=True)],
            ),
            *_reason_series("revoked", A, reasons),
        ],
        alert_rule_test=tests,
        promql_expr_test=[status_codes(m, {"revoked": v}) for m, v in codes],
    )


def vantage_case(s: RuleSettings) -> dict[str, Any]:
    """Two replicas: ``split`` refused by A and timing out from B (not every vantage point
    was refused: no CredentialsRejected; B's failures count either way: OFFLINE after N);
    ``refused`` refused by both; ``down`` unreachable from both."""
    n = s.failure_threshold
    minutes = n + 3
    run: list[int | str] = list(range(1, minutes + 1))
    never: list[int | str] = [60] * minutes
    refused = [("unauthorized", "credentials")] * minutes
    tls = [("tls", "credentials")] * minutes
    timeout = [("timeout", "unreachable")] * minutes
    split_said = {
        "reason": "timeout, unauthorized",
        "reason_class": "credentials, unreachable",
        "seen_by": f"{A}, {B}",
    }
    both = {"reason": "tls, unauthorized", "reason_class": "credentials", "seen_by": f"{A}, {B}"}
    down_said = {"reason": "timeout", "reason_class": "unreachable", "seen_by": f"{A}, {B}"}
    offline = [("down", down_said), ("split", split_said)]
    if s.count_rejected:
        offline.insert(1, ("refused", both))
    return case(
        name=f"threshold {n}, count rejected {s.count_rejected}: refused where every replica",
        input_series=[
            *cluster_series("split", run, never, instance=A, credential=run),
            *_reason_series("split", A, list(refused)),
            *cluster_series("split", run, never, instance=B),
            *_reason_series("split", B, list(timeout)),
            *cluster_series("refused", run, never, instance=A, credential=run),
            *_reason_series("refused", A, list(refused)),
            *cluster_series("refused", run, never, instance=B, credential=run),
            *_reason_series("refused", B, list(tls)),
            *cluster_series("down", run, never, instance=A),
            *_reason_series("down", A, list(timeout)),
            *cluster_series("down", run, never, instance=B),
            *_reason_series("down", B, list(timeout)),
        ],
        alert_rule_test=[
            _alerts(s, 0, CREDENTIALS_ALERT, [("refused", both)]),
            _alerts(s, minutes - 1, CREDENTIALS_ALERT, [("refused", both)]),
            _alerts(s, minutes - 1, "FleetClusterOffline", offline),
        ],
        promql_expr_test=[
            status_codes(
                minutes - 1, {"split": 2, "down": 2, "refused": 2 if s.count_rejected else 0}
            )
        ],
    )


def test_file(settings: RuleSettings, rule_file: str) -> dict[str, Any]:
    return file_body(rule_file, [revoked_case(settings), vantage_case(settings)])


GENERATOR = Generator(
    "refused credentials", "credentials_promtool", "credentials.test.yml", test_file
)


def render_test_file(settings: RuleSettings, rule_file: str) -> str:
    return GENERATOR.render(settings, rule_file)


if __name__ == "__main__":
    GENERATOR.main()
