"""etcd membership and quorum, the pure rule: members and their health -> a quorum state.

Two sources give the same :class:`EtcdReport`: the API server's etcd static pods
(``exporter.controlplane.kubesystem``: one member per pod, healthy when Ready, the leader
unknown) and etcd itself (``exporter.controlplane.etcd_client``, when the config file gives
client URLs). Raft needs a majority of the voting members, ``floor(members / 2) + 1``, to
elect a leader and commit; :func:`quorum` says whether the healthy members reach it and with
how many to spare."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

#: What etcd's status answer lists in ``errors`` while it has no leader.
NO_LEADER_ERROR = "etcdserver: no leader"


class QuorumState(enum.StrEnum):
    """Values of the ``state`` label of ``fleetwatch_etcd_quorum_state``."""

    HEALTHY = "healthy"
    """Quorum held with at least one member to spare."""
    NO_FAULT_TOLERANCE = "no_fault_tolerance"
    """Quorum held, but losing one more member loses it (2 of 3, 1 of 1, 2 of 2)."""
    LOST = "lost"
    """Fewer healthy members than the quorum: etcd refuses writes, the cluster is frozen."""


@dataclass(frozen=True)
class Quorum:
    members: int
    healthy: int
    size: int
    """floor(members / 2) + 1: the votes raft needs to elect a leader and commit."""
    state: QuorumState

    @property
    def even_members(self) -> bool:
        """An even count tolerates no more failures than the odd count below it."""
        return self.members > 0 and self.members % 2 == 0

    @property
    def fault_tolerance(self) -> int:
        """How many more healthy members may fail before quorum is lost (0 when lost)."""
        return max(self.healthy - self.size, 0) if self.state is not QuorumState.LOST else 0


def quorum(members: int, healthy: int) -> Quorum:
    """The quorum of ``members`` voting members of which ``healthy`` answer.

    >>> quorum(3, 2).state
    <QuorumState.NO_FAULT_TOLERANCE: 'no_fault_tolerance'>

    Zero members is "lost": an etcd with no member known healthy serves nothing.
    """
    if members < 0 or healthy < 0 or healthy > members:
        raise ValueError(f"need 0 <= healthy <= members, got {healthy} of {members}")
    size = members // 2 + 1
    if healthy < size:
        state = QuorumState.LOST
    elif healthy == size:
        state = QuorumState.NO_FAULT_TOLERANCE
    else:
        state = QuorumState.HEALTHY
    return Quorum(members=members, healthy=healthy, size=size, state=state)


@dataclass(frozen=True)
class EtcdMember:
    name: str
    """The ``member`` label: etcd's member name (kubeadm: the node name) or the pod's node."""
    healthy: bool
    member_id: int | None = None
    leader_id: int | None = None
    raft_term: int | None = None
    db_size_bytes: int | None = None
    errors: tuple[str, ...] = ()
    """etcd's own alarm/error strings, e.g. ``etcdserver: no leader``."""


@dataclass(frozen=True)
class EtcdReport:
    source: Literal["apiserver", "direct"]
    members: tuple[EtcdMember, ...]
    has_leader: bool | None
    """None when the source cannot tell (the API server's static pods do not show it)."""

    @property
    def quorum(self) -> Quorum:
        return quorum(len(self.members), sum(1 for m in self.members if m.healthy))

    @property
    def raft_term(self) -> int | None:
        """Highest term any member reports; it grows by one (or more) per election."""
        terms = [m.raft_term for m in self.members if m.raft_term is not None]
        return max(terms) if terms else None


def has_leader(members: Iterable[EtcdMember]) -> bool:
    """True when a member that answered names a leader and does not say "no leader"."""
    return any(
        m.leader_id is not None and NO_LEADER_ERROR not in m.errors
        for m in members
        if m.raft_term is not None
    )
