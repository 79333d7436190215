"""When a changed kubeconfig file is read: once it has held still, or once it arrived whole.

Kubeconfigs are rewritten in place. client-go's ``WriteToFile`` (``kubectl config
set-context``, ``use-context``, ``set-credentials``) is Go's ``os.WriteFile``: truncate, then
write; so are ``cp``, a shell's ``>`` and most editors' saves. A scan that lands in between
reads an empty file or a prefix of the new one, and a prefix often parses: kubectl writes
its keys in alphabetical order, ``contexts`` before ``users``, so a prefix holds contexts
whose users are missing, and each is dropped. Before this rule, an exporter reading 200
clusters from one file rewritten six times a second published fewer than 200 in 14 of 47
scrapes, the lowest none. kubectl's ``<file>.lock`` (``fleetwatch.discovery.files.being_rewritten``)
covers kubectl alone.

So a changed file becomes the file's version only once it is known whole; until then the
last good version stays in use (``fleetwatch.discovery.scan``), and the scan says when to look again
(``Discovery.rescan_in``):

1. **It held still** for :data:`SETTLE_SECONDS`: its own times say so (the later of its
   mtime and ctime is that old: any change made more than that before the scan, every
   file at start-up), or a scan saw this same version that long ago (our clock: a network
   file system whose clock runs ahead cannot hold a file back longer than that).
2. **It arrived whole**: the path names another file than the one held (another inode),
   and either the links leading to it changed (a Secret volume: the kubelet writes a new
   folder in full, then swaps its ``..data`` link to it) or its ctime is later than its
   mtime: its metadata changed after its last write, which is what a rename into place
   does (``mv``, ``sed -i``, Ansible), while every write sets both times, so a file still
   being written has them equal. A new inode alone is not enough: vim and Emacs move the
   old file aside and write a new one in pieces. A writer that renames within a clock tick
   of its last write (times equal) waits as an in-place writer does: later, never wrong.

A file that never stops changing keeps its last good version for as long as it changes.
A file never seen before has no last good version, and waits too (at most
:data:`SETTLE_SECONDS`, and not at all at start-up for a file written before): a prefix of
it is worse than nothing, since a truncated server URL makes a cluster that fails its
probes and a truncated context name one that comes and goes. A file gone is one more
version: its clusters go once it has stayed gone that long (vim's move aside leaves no
file at the path for a moment).

Secrets read through the API have no such states (``fleetwatch.discovery.apisource.SecretReads``).

Pure: versions and times in, a wait out. ``now`` is the caller's wall clock, since file
times are wall-clock times; it is passed in so that tests run on a fake one.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwatch.discovery.files import FileVersion

#: How long a changed file must hold still before it is read, in seconds. A writer's pieces
#: are microseconds to milliseconds apart (one program writing one file: Go's
#: ``os.WriteFile`` in one call, Python's buffered writes back to back), so a second is
#: orders of magnitude above them, and short beside what a change waits for anyway: the
#: next cycle (300 s by default), at which a change older than this is read at once. A
#: cycle that finds a file changing waits for it, at most this long, and scans again
#: (``exporter.cycle``).
SETTLE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Sighting:
    """A version of a file that a scan saw and did not read yet, and when a scan first saw
    it; ``version`` None: the file was gone."""

    version: FileVersion | None
    since: float


def changed_at(version: FileVersion) -> float:
    """When the file last changed by its own times (the later of mtime and ctime), in s."""
    return max(version[3], version[4]) / 1e9


def same_file(a: FileVersion, b: FileVersion) -> bool:
    """Whether two versions are of one file (device and inode): rewritten in place."""
    return a[:2] == b[:2]


def arrived_whole(
    version: FileVersion, target: str, held: FileVersion | None, held_target: str | None
) -> bool:
    """Whether ``version`` replaced the file ``held`` whole (rule 2 of the module).

    ``target``, ``held_target``: where the path's links led for each (the path itself
    when it has none).
    """
    if held is None or same_file(version, held):
        return False
    return target != held_target or version[4] > version[3]


def wait_for(
    version: FileVersion | None, seen: Sighting | None, now: float, settle: float
) -> tuple[float, Sighting]:
    """Seconds before ``version`` may be taken (0: now), and the sighting to keep.

    ``seen``: what the last scans saw of the file and did not take (None: nothing yet);
    ``version`` None: the file is gone, which only our clock can time.
    """
    if seen is None or seen.version != version or seen.since > now:  # new, or the clock
        seen = Sighting(version, now)  # went back
    if settle <= 0:
        return 0.0, seen
    due = seen.since + settle
    if version is not None:
        due = min(due, changed_at(version) + settle)
    return max(0.0, due - now), seen
