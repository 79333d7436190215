"""The quorum rule: one pure function, every interesting member count."""

from __future__ import annotations

import pytest

from exporter.controlplane.quorum import QuorumState, quorum


@pytest.mark.parametrize(
    ("members", "healthy", "size", "state", "even", "tolerance"),
    [
        (0, 0, 1, QuorumState.LOST, False, 0),
        (1, 1, 1, QuorumState.NO_FAULT_TOLERANCE, False, 0),
        (1, 0, 1, QuorumState.LOST, False, 0),
        (2, 2, 2, QuorumState.NO_FAULT_TOLERANCE, True, 0),
        (2, 1, 2, QuorumState.LOST, True, 0),
        (3, 3, 2, QuorumState.HEALTHY, False, 1),
        (3, 2, 2, QuorumState.NO_FAULT_TOLERANCE, False, 0),
        (3, 1, 2, QuorumState.LOST, False, 0),
        (3, 0, 2, QuorumState.LOST, False, 0),
        (4, 4, 3, QuorumState.HEALTHY, True, 1),
        (4, 3, 3, QuorumState.NO_FAULT_TOLERANCE, True, 0),
        (4, 2, 3, QuorumState.LOST, True, 0),
        (5, 5, 3, QuorumState.HEALTHY, False, 2),
        (5, 4, 3, QuorumState.HEALTHY, False, 1),
        (5, 3, 3, QuorumState.NO_FAULT_TOLERANCE, False, 0),
        (5, 2, 3, QuorumState.LOST, False, 0),
        (7, 7, 4, QuorumState.HEALTHY, False, 3),
    ],
)
def test_quorum_table(
    members: int, healthy: int, size: int, state: QuorumState, even: bool, tolerance: int
) -> None:
    q = quorum(members, healthy)
    assert (q.size, q.state, q.even_members, q.fault_tolerance) == (size, state, even, tolerance)


@pytest.mark.parametrize(("members", "healthy"), [(3, 4), (-1, 0), (3, -1)])
def test_quorum_rejects_impossible_counts(members: int, healthy: int) -> None:
    with pytest.raises(ValueError, match="need 0 <= healthy <= members"):
        quorum(members, healthy)


def test_four_members_tolerate_no_more_than_three() -> None:
    """Why an even count is flagged: the fourth member adds a voter, not tolerance."""
    assert quorum(4, 4).fault_tolerance == quorum(3, 3).fault_tolerance == 1
