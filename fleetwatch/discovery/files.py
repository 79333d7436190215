"""Which kubeconfig files discovery reads, and reading one of them within bounds.

The main kubeconfig is found as kubectl finds it (:func:`main_kubeconfig`): a file named
by ``--kubeconfig`` or ``KUBECONFIG_PATH`` must exist; otherwise ``KUBECONFIG``'s list is
read and merged, and a listed file that does not exist is skipped without a word, which
makes the default ``~/.kube/config`` (the list of one when ``KUBECONFIG`` is unset)
optional: a pod, which has none, carries no problem for it.

The folder (``KUBECONFIG_DIR``) is usually a volume of mounted Secrets in a pod, so every
file counts whatever its name (Cluster API names its Secret key ``value``), sub-folders are
read (one per Secret), and hidden entries are skipped: the kubelet's atomic writer keeps
the real files in a hidden timestamped folder behind a hidden ``..data`` link and shows
each key as a visible link through it, so each file is read once, under its visible name,
and the next swap of ``..data`` is a new version of that same path. Links may loop: a
folder that leads back to one above it is a problem, not a hang.

Reading is bounded (:func:`read_file`): never more than :data:`MAX_FILE_BYTES`, only
regular files (a FIFO would block the reader forever), and a file that changed while it
was read is reported as such rather than parsed half-written. kubectl locks a kubeconfig
it rewrites with ``<file>.lock``: a changed file under a fresh lock is read on a later
scan (:func:`being_rewritten`), and the lock file is not taken for a kubeconfig.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

# The bounded reader, shared with fleetwatch.kube: here under their old names too.
from fleetwatch.common.files import MAX_FILE_BYTES as MAX_FILE_BYTES
from fleetwatch.common.files import FileVersion as FileVersion
from fleetwatch.common.files import ReadError as ReadError
from fleetwatch.common.files import file_version as file_version
from fleetwatch.common.files import os_reason
from fleetwatch.common.files import read_file as read_file
from fleetwatch.common.names import char_flaw

#: How deep sub-folders are followed; a Secret volume is two levels deep.
MAX_DEPTH = 16

#: kubectl (client-go) creates ``<file>.lock`` while it rewrites ``<file>`` in place, and
#: removes it right after (milliseconds); a lock older than this was left by a killed
#: kubectl and no longer holds the reader back.
LOCK_FRESH_SECONDS = 60.0


class FileProblem(NamedTuple):
    """A path that could not be read, and why (a few words, never the content)."""

    path: str
    reason: str


@dataclass(frozen=True)
class KubeconfigList:
    """The main kubeconfig as kubectl reads it: these files, merged, missing ones skipped."""

    files: tuple[Path, ...]
    #: where the list came from, for people: ``$KUBECONFIG`` or ``default``
    origin: str = "$KUBECONFIG"

    def __str__(self) -> str:
        return f"{os.pathsep.join(map(str, self.files))} ({self.origin})"


#: The main kubeconfig: a named file (must exist), a list read as kubectl does, or none.
MainKubeconfig = Path | KubeconfigList | None


def absolute(raw: str | Path) -> Path:
    """``~`` expanded and made absolute: a source must name its file from any directory."""
    return Path(os.path.abspath(Path(raw).expanduser()))


def main_kubeconfig(flag: str | None, env: Mapping[str, str]) -> MainKubeconfig:
    """The main kubeconfig from ``--kubeconfig``, ``KUBECONFIG_PATH``, ``KUBECONFIG``.

    In that order: the flag (an empty value turns the main file off), then
    ``KUBECONFIG_PATH`` (empty counts as unset), then ``KUBECONFIG``: a colon-separated
    list, duplicates dropped as kubectl does, an empty value turning the main file off;
    when it is unset, ``~/.kube/config``, skipped if it does not exist.
    """
    if flag is not None:
        return absolute(flag) if flag else None
    if env.get("KUBECONFIG_PATH"):
        return absolute(env["KUBECONFIG_PATH"])
    if "KUBECONFIG" in env:
        files: list[Path] = []
        for item in env["KUBECONFIG"].split(os.pathsep):
            if item and absolute(item) not in files:
                files.append(absolute(item))
        return KubeconfigList(tuple(files)) if files else None
    return KubeconfigList((absolute("~/.kube/config"),), "default")


def walk_folder(root: Path) -> tuple[list[Path], list[FileProblem]]:
    """Every visible file under ``root``, sub-folders included, in name order.

    Entries whose name starts with ``.`` are skipped. Links are followed; a folder that
    leads back to one of the folders above it is a problem (a loop), and a folder reached
    a second time through another link is read once. An entry whose name holds a
    character no cluster name may (``fleetwatch.common.names``: a control character, a bidi
    override, bytes that are not UTF-8) is a problem, not read: its path would be the
    ``source`` label and the ``kubeconfig_secret_ref`` of each of its clusters.
    """
    files: list[Path] = []
    problems: list[FileProblem] = []
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return files, [FileProblem(str(root), "folder not found")]
    except OSError as exc:
        return files, [FileProblem(str(root), os_reason(exc))]
    if not stat.S_ISDIR(st.st_mode):
        return files, [FileProblem(str(root), "not a folder")]
    seen: set[tuple[int, int]] = set()

    def visit(folder: Path, st: os.stat_result, above: tuple[tuple[int, int], ...]) -> None:
        key = (st.st_dev, st.st_ino)
        if key in above:
            problems.append(FileProblem(str(folder), "symlink loop (leads back to a parent)"))
            return
        if key in seen:
            return  # the same folder through a second link: its files are already listed
        if len(above) >= MAX_DEPTH:
            problems.append(FileProblem(str(folder), f"deeper than {MAX_DEPTH} folders"))
            return
        seen.add(key)
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            problems.append(FileProblem(str(folder), os_reason(exc)))
            return
        present = set(names)
        for name in names:
            if name.startswith("."):
                continue
            if name.endswith(".lock") and name[: -len(".lock")] in present:
                continue  # kubectl's lock of the file next to it, not a kubeconfig
            path = folder / name
            unprintable = char_flaw(name)
            if unprintable is not None:
                problems.append(FileProblem(str(path), f"its name {unprintable}: not read"))
                continue
            try:
                entry = os.stat(path)
            except FileNotFoundError:
                if os.path.islink(path):
                    problems.append(FileProblem(str(path), "broken symbolic link"))
                continue  # removed since the listing
            except OSError as exc:
                problems.append(FileProblem(str(path), os_reason(exc)))
                continue
            if stat.S_ISDIR(entry.st_mode):
                visit(path, entry, (*above, key))
            else:
                files.append(path)

    visit(root, st, ())
    return files, problems


def being_rewritten(path: Path, now: float | None = None) -> bool:
    """Whether kubectl holds its lock on ``path`` (a fresh ``<path>.lock`` exists)."""
    try:
        locked = os.stat(f"{path}.lock")
    except OSError:
        return False
    return (time.time() if now is None else now) - locked.st_mtime < LOCK_FRESH_SECONDS


def real_path(path: Path) -> str:
    """``path`` with every link on the way resolved: the file it leads to now."""
    return os.path.realpath(path)
