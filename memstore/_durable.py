"""Putting a finished file or folder into place so that it survives a power cut.

A file written beside its destination and renamed into place is whole or
absent for every *running* process, but the kernel may hold both the file's
data and the rename in memory for a while: after a power cut the name can
point at an empty file, or be missing, although the command said it was done.
:func:`move_into_place` closes that gap the way databases do: it flushes the
data of the file (or of every file and folder of a tree) to disk, renames,
then flushes the folder that holds the new name.

The hidden name a command writes under is :func:`staging_name`, which carries
the host, the process id and a part of its own for each call; a run killed
half-way (``kill -9``, a crash) leaves that name behind, and the next run for
the same destination removes it with :func:`remove_dead_leftovers` once no
process of that id lives on this host.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> tmp = staging_name(folder / "export.jsonl")
>>> _ = tmp.write_text("{}\\n")
>>> move_into_place(tmp, folder / "export.jsonl")
>>> [p.name for p in folder.iterdir()]
['export.jsonl']
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import socket
from pathlib import Path

__all__ = ["fsync_path", "move_into_place", "remove_dead_leftovers", "staging_name"]


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush the file or folder ``path`` to disk (a folder: its list of names).

    A file system that cannot flush a folder (it answers ``EINVAL``, as some
    network and FUSE file systems do) is taken as having nothing to flush;
    any other error is raised.
    """
    is_dir = os.path.isdir(path)
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if is_dir else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if is_dir and os.name == "nt":  # Windows cannot open a folder to flush it
            return
        raise
    try:
        os.fsync(fd)
    except OSError as e:
        if not (is_dir and e.errno == errno.EINVAL):
            raise
    finally:
        os.close(fd)


def _fsync_tree(top: Path) -> None:
    """Flush every file of the folder ``top``, then each folder after what it holds."""
    for root, _dirs, files in os.walk(top, topdown=False):
        for name in files:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):  # no link, pipe or socket
                fsync_path(path)
        fsync_path(root)


def move_into_place(staged: Path, target: Path) -> None:
    """Rename the finished file or folder ``staged`` to ``target``, durably.

    The data of ``staged`` (a file, or every file and folder under a folder)
    is flushed first, then it is renamed (a file replaces ``target``; a
    folder replaces only a missing or empty one), then the folder holding
    ``target`` is flushed, so the new name and its whole content are on disk
    when this returns. Raises :class:`OSError` as :func:`os.replace` does.
    """
    if staged.is_dir():
        _fsync_tree(staged)
    else:
        fsync_path(staged)
    os.replace(staged, target)
    fsync_path(target.parent)


_HOST = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def staging_name(target: Path) -> Path:
    """A new hidden name beside ``target`` for one call to write ``target`` under.

    ``.NAME.partial-PID-CALL.HOST``: the process id and host tell a later run
    whether the writer still lives (:func:`remove_dead_leftovers`); ``CALL``
    (random hex) keeps two calls of one process apart, so two threads writing
    the same destination at once never clear each other's work in progress.
    """
    call = secrets.token_hex(4)
    return target.with_name(f".{target.name}.partial-{os.getpid()}-{call}.{_HOST}")


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user counts)."""
    if pid <= 0 or os.name == "nt":  # Windows: os.kill would end the process
        return True  # not a process id we wrote, or no way to ask: leave it be
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # PermissionError: alive, another user's
    return True


def remove_dead_leftovers(target: Path) -> list[Path]:
    """Remove what killed runs left beside ``target``; the paths removed.

    A leftover is a :func:`staging_name` of ``target`` (or the names older
    releases used: ``.NAME.partial-PID.HOST`` and ``.NAME.partial-PID`` of a
    backup, ``.NAME.PID.new`` of an import, ``.NAME.PID.tmp`` of an export)
    whose process no longer runs on this host. One named after a live process
    (a run going on now), after this process, or after another host is left
    alone. Errors removing one are ignored: the leftover stays for the next run.
    """
    own = re.escape(target.name)
    pattern = re.compile(
        rf"\.{own}\.(?:partial-(?P<pid>\d+)(?:-[0-9a-f]+)?(?:\.(?P<host>.+))?"
        rf"|(?P<old>\d+)\.(?:new|tmp))"
    )
    removed: list[Path] = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or m.group("host") not in (None, _HOST):
            continue
        pid = int(m.group("pid") or m.group("old"))
        if pid == os.getpid() or _alive(pid):
            continue
        path = target.parent / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed
