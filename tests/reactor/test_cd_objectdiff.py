"""What the CD objects process sends (``reactor.cd.objectchild.Differ``) and what the
reactor holds of it (``reactor.cd.objectlink.ObjectsProcess``), without a process: the
whole set first, then only what moved; each difference applied whole, never in place."""

from __future__ import annotations

from typing import Any

from reactor.cd.objectchild import Differ, Sent
from reactor.cd.objectlink import ObjectsProcess
from reactor.cd.settings import CdSettings


def obj(uid: str, rv: str | None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"uid": uid, "name": uid, "namespace": "flux-system"}
    if rv is not None:
        metadata["resourceVersion"] = rv
    return {"kind": "Kustomization", "metadata": metadata, "spec": spec}


def test_the_whole_set_first_then_only_what_moved() -> None:
    differ = Differ()
    a, b = obj("a", "1"), obj("b", "2")
    changed, end = differ.diff({"a": a, "b": b})
    assert changed == [("a", a), ("b", b)] and end == Sent(whole=True)

    # A relist: new dicts, the same versions: nothing to send.
    changed, end = differ.diff({"a": obj("a", "1"), "b": obj("b", "2")})
    assert changed == [] and end == Sent(whole=False)

    a2, c = obj("a", "5", suspend=True), obj("c", "6")
    changed, end = differ.diff({"a": a2, "c": c})
    assert changed == [("a", a2), ("c", c)]
    assert end == Sent(whole=False, removed=("b",))


def test_an_object_without_a_version_is_sent_at_every_change() -> None:
    differ = Differ()
    bare = obj("a", None)
    differ.diff({"a": bare})
    assert differ.diff({"a": bare})[0] == [("a", bare)]


def test_an_empty_fleet_is_a_whole_set_too() -> None:
    """The actuator waits for ``synced``: a management cluster without an object must
    still say it was listed."""
    changed, end = Differ().diff({})
    assert changed == [] and end.whole


def receive(source: ObjectsProcess, objects: list[tuple[str, Any]], end: Sent) -> None:
    source.received("objects", objects)
    source.received("end", end)


def test_each_difference_is_applied_whole_and_never_in_place() -> None:
    source = ObjectsProcess(CdSettings(flux=True))
    a, b = obj("a", "1"), obj("b", "2")
    source.received("objects", [("a", a)])
    assert not source.synced and source.objects() == {} and source.generation == 0
    source.received("objects", [("b", b)])
    source.received("end", Sent(whole=True))
    assert source.synced and source.generation == 1
    first = source.objects()
    assert first == {"a": a, "b": b}

    a2 = obj("a", "3")
    receive(source, [("a", a2)], Sent(whole=False, removed=("b",)))
    assert source.objects() == {"a": a2} and source.generation == 2
    # What a pass in a worker thread was given is as it was.
    assert first == {"a": a, "b": b}


def test_a_new_process_s_whole_set_replaces_what_the_last_one_left() -> None:
    """An object deleted while no process watched is gone at the successor's whole set;
    until then the objects stay as they were."""
    source = ObjectsProcess(CdSettings(flux=True))
    receive(source, [("a", obj("a", "1")), ("b", obj("b", "2"))], Sent(whole=True))
    source.received("objects", [("a", obj("a", "1"))])
    source.ended()  # the process died mid-difference: its piece is not applied
    assert set(source.objects()) == {"a", "b"} and source.synced
    source.start_frame()  # its successor
    receive(source, [("a", obj("a", "1"))], Sent(whole=True))
    assert set(source.objects()) == {"a"} and source.generation == 2
