"""etcd membership and quorum of one cluster: the pure quorum rule and the direct etcd client.

Two sources give the same :class:`EtcdReport`:

- the API server (``exporter.controlplane``): the etcd static pods of kube-system, one member
  per pod, healthy when Ready; it cannot see the leader, so ``has_leader`` is ``None``;
- etcd itself (:func:`probe_etcd`, when the config file gives client URLs): per member
  ``GET /health`` and ``POST /v3/maintenance/status``, and ``POST /v3/cluster/member/list``
  for the membership, so a dead member still counts as a member.

etcd 3.4 over its JSON gateway (see FACTS.md): uint64 values are JSON strings, zero values
are omitted, ``/health`` blocks ~1 s before a 503 when the member cannot commit, and status
still answers 200 without quorum, with no ``leader`` and ``errors: ["etcdserver: no leader"]``.
"""

from __future__ import annotations

import asyncio
import enum
import json
import ssl
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp

from exporter.config import EtcdConfig


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


NO_LEADER_ERROR = "etcdserver: no leader"

#: One /health try needs its ~1 s block plus margin; a member that answers but reports
#: unhealthy is asked again while at least this much of the budget is left.
_HEALTH_TRY_SECONDS = 1.5


# --- the direct client --------------------------------------------------------------------


@dataclass(frozen=True)
class _Status:
    member_id: int | None
    leader_id: int | None
    raft_term: int | None
    db_size_bytes: int | None
    errors: tuple[str, ...]


@dataclass(frozen=True)
class _ListedMember:
    member_id: int
    name: str
    client_urls: tuple[str, ...]


@dataclass(frozen=True)
class _EndpointAnswer:
    url: str
    healthy: bool
    status: _Status | None
    listing: tuple[_ListedMember, ...] | None


def build_ssl_context(config: EtcdConfig) -> ssl.SSLContext | None:
    """TLS context from the config's CA and client pair; None for plain-http endpoints.

    Reads files: call it off the event loop (``asyncio.to_thread``), once per config.
    """
    if not config.endpoints or urlsplit(config.endpoints[0]).scheme != "https":
        return None
    context = ssl.create_default_context(
        cafile=str(config.ca_file) if config.ca_file is not None else None
    )
    if config.cert_file is not None and config.key_file is not None:
        context.load_cert_chain(str(config.cert_file), str(config.key_file))
    return context


async def probe_etcd(
    session: aiohttp.ClientSession,
    config: EtcdConfig,
    ssl_context: ssl.SSLContext | None = None,
) -> EtcdReport:
    """Ask every configured member, and every listed member not configured, how it is.

    Never raises for an unreachable or broken member: that member is unhealthy. A healthy
    cluster answers in milliseconds; the whole call never takes much longer than
    ``config.timeout_seconds``, its budget.

    A member that answers but reports unhealthy is asked again until the budget runs out:
    a leader election makes /health answer 503 (FACTS: a new leader in ~1.3 s, more on a
    loaded machine), and the exporter holds each reading for a whole probe cycle, so one
    election must not read as "quorum lost" for five minutes.
    """
    deadline = time.monotonic() + config.timeout_seconds
    answers = await asyncio.gather(
        *(_ask(session, url, deadline, ssl_context) for url in config.endpoints)
    )
    listing = next((a.listing for a in answers if a.listing is not None), None)
    if listing is None:
        # Nobody answered the member list: all we know are the configured endpoints.
        members = tuple(_member_of_endpoint(a) for a in answers)
        return EtcdReport(source="direct", members=members, has_leader=_has_leader(members))

    matched: dict[int, _EndpointAnswer] = {}
    for listed in listing:
        answer = _match(listed, answers)
        if answer is not None:
            matched[listed.member_id] = answer
    missing = [m for m in listing if m.member_id not in matched and m.client_urls]
    if missing:
        extra = await asyncio.gather(
            *(_ask(session, m.client_urls[0], deadline, ssl_context) for m in missing)
        )
        for listed, answer in zip(missing, extra, strict=True):
            matched[listed.member_id] = answer

    members = tuple(_member(listed, matched.get(listed.member_id)) for listed in listing)
    return EtcdReport(source="direct", members=members, has_leader=_has_leader(members))


def _member(listed: _ListedMember, answer: _EndpointAnswer | None) -> EtcdMember:
    name = listed.name or f"{listed.member_id:x}"
    if answer is None or answer.status is None:
        return EtcdMember(
            name=name, healthy=answer.healthy if answer else False, member_id=listed.member_id
        )
    status = answer.status
    return EtcdMember(
        name=name,
        healthy=answer.healthy,
        member_id=listed.member_id,
        leader_id=status.leader_id,
        raft_term=status.raft_term,
        db_size_bytes=status.db_size_bytes,
        errors=status.errors,
    )


def _member_of_endpoint(answer: _EndpointAnswer) -> EtcdMember:
    """A configured endpoint as a member, named host:port, when no member list came back."""
    status = answer.status
    if status is None:
        return EtcdMember(name=_url_label(answer.url), healthy=answer.healthy)
    return EtcdMember(
        name=_url_label(answer.url),
        healthy=answer.healthy,
        member_id=status.member_id,
        leader_id=status.leader_id,
        raft_term=status.raft_term,
        db_size_bytes=status.db_size_bytes,
        errors=status.errors,
    )


def _has_leader(members: Iterable[EtcdMember]) -> bool:
    """True when a member that answered names a leader and does not say "no leader"."""
    return any(
        m.leader_id is not None and NO_LEADER_ERROR not in m.errors
        for m in members
        if m.raft_term is not None
    )


def _match(listed: _ListedMember, answers: Sequence[_EndpointAnswer]) -> _EndpointAnswer | None:
    for answer in answers:
        if answer.status is not None and answer.status.member_id == listed.member_id:
            return answer
    urls = {_normalise(u) for u in listed.client_urls}
    for answer in answers:
        if _normalise(answer.url) in urls:
            return answer
    return None


async def _ask(
    session: aiohttp.ClientSession,
    url: str,
    deadline: float,
    ssl_context: ssl.SSLContext | None,
) -> _EndpointAnswer:
    """health, status and member list of one member, all within ``deadline`` (monotonic)."""
    ssl_arg: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return _EndpointAnswer(url=url, healthy=False, status=None, listing=None)
    timeout = aiohttp.ClientTimeout(total=remaining)
    health, status, listing = await asyncio.gather(
        _request(session, "GET", f"{url}/health", timeout, ssl_arg),
        _request(session, "POST", f"{url}/v3/maintenance/status", timeout, ssl_arg),
        _request(session, "POST", f"{url}/v3/cluster/member/list", timeout, ssl_arg),
    )
    healthy = health is not None and health[0] == 200 and _health_true(health[1])
    while not healthy and status is not None:
        # Up but not healthy: maybe an election. /health blocks ~1 s per try while there
        # is no leader, which paces this loop; the pause only guards against fast 503s.
        await asyncio.sleep(0.1)
        remaining = deadline - time.monotonic()
        if remaining < _HEALTH_TRY_SECONDS:
            break
        try_timeout = aiohttp.ClientTimeout(total=_HEALTH_TRY_SECONDS)
        health = await _request(session, "GET", f"{url}/health", try_timeout, ssl_arg)
        healthy = health is not None and health[0] == 200 and _health_true(health[1])
    return _EndpointAnswer(
        url=url,
        healthy=healthy,
        status=_parse_status(status[1]) if status is not None and status[0] == 200 else None,
        listing=_parse_listing(listing[1]) if listing is not None and listing[0] == 200 else None,
    )


async def _request(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    client_timeout: aiohttp.ClientTimeout,
    ssl_arg: ssl.SSLContext | bool,
) -> tuple[int, Any] | None:
    """(status, parsed JSON or None), or None when the member could not be asked at all."""
    body = b"{}" if method == "POST" else None
    try:
        async with session.request(
            method, url, data=body, timeout=client_timeout, ssl=ssl_arg, allow_redirects=False
        ) as resp:
            raw = await resp.read()
            try:
                parsed: Any = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            return resp.status, parsed
    except (aiohttp.ClientError, TimeoutError, OSError, ssl.SSLError):
        return None


def _health_true(body: Any) -> bool:
    return isinstance(body, dict) and body.get("health") in ("true", True)


def _uint(raw: Any) -> int | None:
    """etcd's uint64 (a JSON string, or a number from older gateways); absent means zero."""
    if raw is None:
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _parse_status(body: Any) -> _Status | None:
    if not isinstance(body, dict):
        return None
    raw_header = body.get("header")
    header: dict[str, Any] = raw_header if isinstance(raw_header, dict) else {}
    errors = body.get("errors")
    leader = _uint(body.get("leader"))
    return _Status(
        member_id=_uint(header.get("member_id")),
        leader_id=leader if leader else None,  # zero (omitted) means "no leader known"
        raft_term=_uint(body.get("raftTerm")) or 0,
        db_size_bytes=_uint(body.get("dbSize")) or 0,
        errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
    )


def _parse_listing(body: Any) -> tuple[_ListedMember, ...] | None:
    if not isinstance(body, dict) or not isinstance(body.get("members"), list):
        return None
    listed: list[_ListedMember] = []
    for raw in body["members"]:
        if not isinstance(raw, dict):
            continue
        member_id = _uint(raw.get("ID"))
        if member_id is None:
            continue
        urls = raw.get("clientURLs")
        listed.append(
            _ListedMember(
                member_id=member_id,
                name=str(raw.get("name") or ""),
                client_urls=tuple(str(u) for u in urls) if isinstance(urls, list) else (),
            )
        )
    return tuple(listed) if listed else None


def _normalise(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port}"


def _url_label(url: str) -> str:
    """host:port of a configured endpoint (no scheme, no credential: config forbids them)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"
