"""Backups of a :class:`~memstore.memory.Memory` folder, taken while writers run.

:func:`backup` copies the folder's journal (``journal.db``) and vectors
(``vectors.sqlite3``) into a new folder with SQLite's online backup API: each
file is copied as of one commit, without stopping the process that writes
it, and the copy is a folder ``Memory(dest)`` opens as it is. The HNSW graph
beside the vectors is a cache and is rebuilt on open; the lock file is not
copied. The journal is copied first: it is the record, and vectors missing
from the copy are embedded again on open (extra ones are dropped). The HTTP
server's ``tokens.json``, when it keeps its tokens in the folder, is copied
too (mode 0600), so that a server restored from the copy accepts its
clients' tokens: a backup holds that secret as the folder does.

>>> import tempfile, os
>>> from memstore import Memory
>>> source, dest = tempfile.mkdtemp(), os.path.join(tempfile.mkdtemp(), "copy")
>>> with Memory(source, embedder=None) as mem:
...     _ = mem.add("the nightly backup runs at 02:00 UTC", id="nightly")
...     [p.name for p in backup(source, dest)]  # while mem is open and writable
['journal.db']
>>> with Memory(dest, embedder=None) as restored:
...     restored.get("nightly").content
'the nightly backup runs at 02:00 UTC'

Restoring is opening the copy: point ``Memory`` (or ``memstore COMMAND --data``) at
it, or, with every writer of the original stopped, move it into the
original's place.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path
from typing import Final

from memstore._durable import (
    fsync_path,
    move_into_place,
    remove_dead_leftovers,
    staging_name,
)
from memstore.errors import JournalCorruptError, MemstoreError
from memstore.journal.sqlite import backup_file
from memstore.memory import JOURNAL_FILE

__all__ = ["TOKENS_FILE", "VECTORS_FILE", "BackupRaceError", "backup"]

VECTORS_FILE: Final = "vectors.sqlite3"
"""The vector file a ``Memory`` with an embedder keeps beside its journal."""
TOKENS_FILE: Final = "tokens.json"
"""The tokens a ``memstore serve`` without ``--tokens-file`` keeps in its data folder (0600)."""

_log = logging.getLogger(__name__)


def backup(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> list[Path]:
    """Copy the Memory folder ``source`` into the new folder ``dest``; the files written.

    ``dest`` must not exist, or be an empty folder, and must lie outside
    ``source``: a backup inside the folder it copies is lost with it, and
    cannot be moved into its place. A new ``dest`` is made in a hidden folder
    beside it, flushed to disk and renamed into place at the end; an empty
    folder that exists (one made for it, a mount point) is used as it is,
    never removed or replaced: the copy is staged in a hidden folder inside
    it and its files are moved in at the end. Either way a failed backup
    leaves ``dest`` as it was (missing, or the same empty folder) and a
    finished one survives a power cut; a non-empty ``dest`` is refused. What
    a killed backup or import left beside ``dest`` (or inside the empty one)
    is removed first, when its process no longer runs. A damaged vector file
    is left out (with a logged warning; it is not among the files returned):
    the vectors are a cache of the journal, and opening the copy embeds its
    items again. The HTTP server's ``tokens.json`` is copied too, readable by
    its owner only (mode 0600), so a server started on the restored folder
    accepts the tokens its clients hold (one that cannot be read is left out,
    with a logged warning). Raises
    :class:`~memstore.errors.MemstoreError` when ``source`` holds no journal
    or ``dest`` is taken or inside ``source``
    (:class:`BackupRaceError` when another backup filled it while this one
    ran: that one is kept, this copy discarded), a
    :class:`~memstore.errors.JournalError` when a file cannot be read or
    written.
    """
    src, dst = Path(source), Path(dest)
    if not (src / JOURNAL_FILE).is_file():
        raise MemstoreError(
            f"{str(src)!r} holds no {JOURNAL_FILE}: give the folder a Memory keeps its data in"
        )
    if dst.is_symlink():  # a link to an empty folder: the copy goes into that folder
        dst = Path(os.path.realpath(dst))
    if dst.is_dir():  # what a killed backup into this folder left there
        remove_dead_leftovers(dst / _STAGED)
    _check_dest(src, dst)
    if dst.is_dir():
        return _backup_into(src, dst)
    top = _first_missing(dst)  # made whole at the end, with the folders above dst it needs
    remove_dead_leftovers(top)  # what killed backups and imports to this place left
    partial = staging_name(top)
    inside = partial / dst.absolute().relative_to(top)
    try:
        inside.mkdir(parents=True)  # a new name: no other call (thread) writes there
    except OSError as e:
        raise MemstoreError(
            f"cannot create the backup folder {str(dst)!r}: {e.strerror or e}"
        ) from None
    try:
        written = _copy(src, inside, dst)
        try:
            move_into_place(partial, top)  # its files on disk, then the name
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):  # made since _check_dest
                raise BackupRaceError(dst) from None
            raise MemstoreError(f"cannot move the backup into {str(dst)!r}: {e}") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return written


_STAGED: Final = "backup"
"""What the hidden folder a backup into an existing folder is staged in is named after."""


def _backup_into(src: Path, dst: Path) -> list[Path]:
    """:func:`backup` into ``dst``, an empty folder that exists: it is filled, never replaced.

    The folder is the user's (a mount point, a folder with its own owner and
    permissions): it is neither removed nor renamed over. The copy is staged
    in a hidden folder inside it (so on its file system), each file flushed
    and moved into it, the journal first, then the hidden folder removed.
    Anything else appearing there meanwhile stops the backup as a race
    (:class:`BackupRaceError`); a failure takes out what this backup moved in,
    leaving the folder as it was.
    """
    partial = staging_name(dst / _STAGED)
    try:
        partial.mkdir()
    except OSError as e:
        raise MemstoreError(
            f"cannot write the backup into {str(dst)!r}: {e.strerror or e}"
        ) from None
    moved: list[Path] = []
    try:
        written = _copy(src, partial, dst)
        if {p.name for p in dst.iterdir()} != {partial.name}:  # filled since _check_dest
            raise BackupRaceError(dst)
        for path in written:
            fsync_path(partial / path.name)
            _move_new(partial / path.name, path, dst)
            moved.append(path)
        partial.rmdir()
        fsync_path(dst)
    except BaseException:
        for path in moved:
            path.unlink(missing_ok=True)
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return written


def _move_new(staged: Path, target: Path, dst: Path) -> None:
    """Rename ``staged`` to ``target``, which must not exist: one there is a race's.

    A hard link refuses an existing name atomically; a file system without
    them (FAT, some network file systems) is checked, then renamed.
    """
    try:
        os.link(staged, target)
    except FileExistsError:
        raise BackupRaceError(dst) from None
    except OSError:  # no hard links here
        if target.exists():
            raise BackupRaceError(dst) from None
        os.replace(staged, target)
        return
    staged.unlink()


def _copy(src: Path, into: Path, dst: Path) -> list[Path]:
    """Copy the journal, vectors and tokens of ``src`` into ``into``; their paths in ``dst``."""
    written: list[Path] = []
    for name in (JOURNAL_FILE, VECTORS_FILE):  # the record first
        if not (src / name).is_file():
            continue
        try:
            backup_file(src / name, into / name)
        except JournalCorruptError as e:
            if name == JOURNAL_FILE:
                raise
            # The vectors are a cache of the journal: a damaged file must
            # not stop the record's backup (opening the copy embeds again).
            (into / name).unlink(missing_ok=True)
            _log.warning("memstore: %s left out of the backup: %s", name, e)
            continue
        written.append(dst / name)
    if (src / TOKENS_FILE).is_file() and _copy_secret(src / TOKENS_FILE, into / TOKENS_FILE):
        written.append(dst / TOKENS_FILE)
    return written


class BackupRaceError(MemstoreError, FileExistsError):
    """Another backup (or import) filled the destination while this one ran.

    Both found the destination free; the first to finish moved its copy into
    place, which is left intact. This one's copy is discarded: nothing of it
    stays behind. Back up again into a new folder for a second copy.
    """

    def __init__(self, dest: Path) -> None:
        super().__init__(
            f"another backup got there first: {str(dest)!r} was filled while this one ran; "
            "that backup is left as it is and this copy was discarded (back up into a new "
            "folder for another copy)"
        )
        self.dest = dest


def _copy_secret(source: Path, target: Path) -> bool:
    """Copy ``source`` to the new file ``target`` with mode 0600; whether it was copied.

    The tokens are the server's secret: the copy is never readable by
    others, whatever the umask. A file that cannot be read (another user's)
    is left out with a warning: the record's backup does not wait on it.
    """
    try:
        data = source.read_bytes()
    except OSError as e:
        _log.warning("memstore: %s left out of the backup: %s", source.name, e.strerror or e)
        return False
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as e:
        raise MemstoreError(f"cannot write {str(target)!r}: {e.strerror or e}") from None
    return True


def _first_missing(dst: Path) -> Path:
    """The outermost folder to create for ``dst`` (``dst`` itself when its parent exists)."""
    top = dst.absolute()
    while not top.parent.exists():
        top = top.parent
    return top


def _check_dest(src: Path, dst: Path) -> None:
    """Refuse a destination that is taken, or inside the folder backed up (symlinks followed)."""
    inner, outer = Path(os.path.realpath(dst)), Path(os.path.realpath(src))
    if inner == outer or outer in inner.parents:
        raise MemstoreError(
            f"{str(dst)!r} is inside the folder backed up, {str(src)!r}: a backup there "
            "goes with it; back up into a folder outside it"
        )
    if dst.exists() and not dst.is_dir():
        raise MemstoreError(f"{str(dst)!r} is a file: back up into a new folder")
    if dst.exists() and any(dst.iterdir()):
        raise MemstoreError(f"{str(dst)!r} exists and is not empty: back up into a new folder")
