"""etcd's JSON gateway answers -> members, pure: what ``exporter.controlplane.etcd_client``
asked, made sense of.

Per member the client asks ``GET /health``, ``POST /v3/maintenance/status`` and ``POST
/v3/cluster/member/list``. What the gateway of etcd 3.4 and later sends, as relied on here:
uint64 values are JSON strings (older gateways: numbers), zero values are left out
(``leader`` absent means no leader known), and the status still answers 200 without
quorum, with no ``leader`` and ``errors: ["etcdserver: no leader"]``. The member list
names every voting member, so a dead member still counts; members are matched to the
configured endpoints by member ID, else by client URL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from exporter.controlplane.quorum import EtcdMember, EtcdReport, has_leader


@dataclass(frozen=True)
class MemberStatus:
    """One member's answer to `POST /v3/maintenance/status` (absent values: None)."""

    member_id: int | None
    leader_id: int | None
    raft_term: int | None
    db_size_bytes: int | None
    errors: tuple[str, ...]


@dataclass(frozen=True)
class ListedMember:
    member_id: int
    name: str
    client_urls: tuple[str, ...]


@dataclass(frozen=True)
class EndpointAnswer:
    """What one member said: healthy or not, its status and the member list, if it could."""

    url: str
    healthy: bool
    status: MemberStatus | None
    listing: tuple[ListedMember, ...] | None


def health_true(body: Any) -> bool:
    """``/health`` says ``{"health": "true"}`` (a boolean from some versions)."""
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


def parse_status(body: Any) -> MemberStatus | None:
    if not isinstance(body, dict):
        return None
    raw_header = body.get("header")
    header: dict[str, Any] = raw_header if isinstance(raw_header, dict) else {}
    errors = body.get("errors")
    leader = _uint(body.get("leader"))
    return MemberStatus(
        member_id=_uint(header.get("member_id")),
        leader_id=leader if leader else None,  # zero (omitted) means "no leader known"
        raft_term=_uint(body.get("raftTerm")) or 0,
        db_size_bytes=_uint(body.get("dbSize")) or 0,
        errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
    )


def parse_listing(body: Any) -> tuple[ListedMember, ...] | None:
    if not isinstance(body, dict) or not isinstance(body.get("members"), list):
        return None
    listed: list[ListedMember] = []
    for raw in body["members"]:
        if not isinstance(raw, dict):
            continue
        member_id = _uint(raw.get("ID"))
        if member_id is None:
            continue
        urls = raw.get("clientURLs")
        listed.append(
            ListedMember(
                member_id=member_id,
                name=str(raw.get("name") or ""),
                client_urls=tuple(str(u) for u in urls) if isinstance(urls, list) else (),
            )
        )
    return tuple(listed) if listed else None


def report_from_endpoints(answers: Sequence[EndpointAnswer]) -> EtcdReport:
    """Nobody answered the member list: all we know are the configured endpoints."""
    members = tuple(_member_of_endpoint(a) for a in answers)
    return EtcdReport(source="direct", members=members, has_leader=has_leader(members))


def match_members(
    listing: Sequence[ListedMember], answers: Sequence[EndpointAnswer]
) -> dict[int, EndpointAnswer]:
    """Listed member ID -> the configured endpoint's answer that is that member."""
    matched: dict[int, EndpointAnswer] = {}
    for listed in listing:
        answer = _match(listed, answers)
        if answer is not None:
            matched[listed.member_id] = answer
    return matched


def report_from_listing(
    listing: Sequence[ListedMember], matched: Mapping[int, EndpointAnswer]
) -> EtcdReport:
    """One member per listed member; one nobody could ask is unhealthy."""
    members = tuple(_member(listed, matched.get(listed.member_id)) for listed in listing)
    return EtcdReport(source="direct", members=members, has_leader=has_leader(members))


def _member(listed: ListedMember, answer: EndpointAnswer | None) -> EtcdMember:
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


def _member_of_endpoint(answer: EndpointAnswer) -> EtcdMember:
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


def _match(listed: ListedMember, answers: Sequence[EndpointAnswer]) -> EndpointAnswer | None:
    for answer in answers:
        if answer.status is not None and answer.status.member_id == listed.member_id:
            return answer
    urls = {_normalise(u) for u in listed.client_urls}
    for answer in answers:
        if _normalise(answer.url) in urls:
            return answer
    return None


def _normalise(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port}"


def _url_label(url: str) -> str:
    """host:port of a configured endpoint (no scheme, no credential: config forbids them)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"
