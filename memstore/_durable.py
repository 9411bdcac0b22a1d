"""Putting a finished file or folder into place so that it survives a power cut.

A file written beside its destination and renamed into place is whole or
absent for every *running* process, but the kernel may hold both the file's
data and the rename in memory for a while: after a power cut the name can
point at an empty file, or be missing, although the command said it was done.
:func:`move_into_place` closes that gap the way databases do: it flushes the
data of the file (or of every file and folder of a tree) to disk, renames,
then flushes the folder that holds the new name.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> tmp = folder / ".export.jsonl.tmp"
>>> _ = tmp.write_text("{}\\n")
>>> move_into_place(tmp, folder / "export.jsonl")
>>> [p.name for p in folder.iterdir()]
['export.jsonl']
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["fsync_path", "move_into_place"]


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
    except OSError as e:
        if is_dir and os.name == "nt":  # Windows opens no folder: its renames are durable
            return
        raise e
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
            if not os.path.islink(path):
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
