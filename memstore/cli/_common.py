"""What the commands share: opening the data folder, printing items, the value types."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import difflib
import errno
import json
import math
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from memstore._durable import move_into_place, remove_dead_leftovers, staging_name
from memstore.errors import JournalLockedError, MemstoreError
from memstore.limits import MAX_RESULTS
from memstore.memory import JOURNAL_FILE, Memory
from memstore.tags import partition_from_tags
from memstore.web.journal_option import JournalOptionError

from ._journal import journal_refusal, shared_memory

DEFAULT_DATA = "data"


EMBEDDERS = ("auto", "local", "local-int8", "hash", "none")


def user_path(value: str) -> str:
    """A path argument with a leading ``~`` or ``~user`` expanded, as a shell would.

    A shell expands ``--data ~/notes`` but not ``--data=~/notes``, and an MCP
    client's ``"args": ["mcp", "--data", "~/.memstore/x"]`` reaches the command
    with no shell at all: without this, each made a folder literally named ``~``
    in whatever directory the command ran from.

    >>> user_path("~/m") == os.path.join(os.path.expanduser("~"), "m")
    True
    >>> user_path("data"), user_path("-")
    ('data', '-')
    """
    return os.path.expanduser(value)


class UsageError(MemstoreError):
    """A value on the command line that cannot work: exit status 2."""


class Failure(MemstoreError):
    """What the command was asked to act on is not there, or cannot be done now: exit status 1."""


LOCK_WAIT_SECONDS = 5.0
"""How long a write command waits for another process to finish writing its folder.

One process writes a folder at a time. Two ``memstore add`` run at once (a
script's ``&``, two hooks firing together) each hold it for a moment: the
second waits its turn instead of being refused. A folder still held after
this long is a server's (or a long import's), and the command is refused.
"""


def writer(args: argparse.Namespace, *, embed: bool) -> Memory:
    """The folder's memory opened for writing (created when missing).

    Held by another process, the folder is waited for up to
    :data:`LOCK_WAIT_SECONDS`, then refused with what the command line offers.
    """
    if getattr(args, "journal", None):
        return shared(args, embed=embed)
    not_a_file(args.data)
    in_its_journal(args.data)
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            return Memory(args.data, embedder=args.embedder if embed else None)
        except JournalLockedError:
            if not _wait_for_writer(Path(args.data) / (JOURNAL_FILE + ".lock"), deadline):
                break
    raise Failure(
        f"{args.data} is being written by another process (a running memstore serve or "
        f"memstore mcp?), still after {LOCK_WAIT_SECONDS:g} seconds; stop it, or send the "
        "change through its HTTP API"
    )


def _wait_for_writer(lock: Path, deadline: float) -> bool:
    """Wait until the writer holding ``lock`` lets go; False when ``deadline`` passed first.

    The lock is tried without being kept (the journal takes it itself next),
    so another waiter may get there first: the caller then waits again.
    """
    if fcntl is None:  # pragma: no cover - no advisory locks: the journal takes none either
        return False
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:  # gone (the writer removed its folder): try the open again
        time.sleep(0.05)
        return time.monotonic() < deadline
    try:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                time.sleep(0.05)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        return False
    finally:
        os.close(fd)


def not_a_file(data: str) -> None:
    """Refuse a ``--data`` that names a file, in the command line's words.

    The engine's own refusal names ``Memory(path)``, a call nobody made here.
    """
    if os.path.exists(data) and not os.path.isdir(data):
        raise Failure(
            f"--data {data} is a file, not a folder: give the folder the memory is kept "
            "in (a new name makes a new one)"
        )


def in_its_journal(data: str) -> None:
    """Refuse a folder kept in another journal (a server's on PostgreSQL) without ``--journal``.

    Opened as it is, it would hold no memory, and a write would start a new one
    in SQLite beside the one its server serves (:mod:`memstore.cli._journal`).
    """
    why = journal_refusal(data, None, None)
    if why:
        raise UsageError(why)


def place(args: argparse.Namespace) -> str:
    """Where the command's memory is, for a message: ``DIR/``, or ``--journal``'s schema."""
    if getattr(args, "journal", None):
        return "the --journal memory"
    return f"{args.data}/"


def shared(args: argparse.Namespace, *, embed: bool) -> Memory:
    """The memory of ``--journal``, its options refused as a usage error (exit status 2)."""
    try:
        return shared_memory(args, embed=embed)
    except JournalOptionError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:  # a memstore_ parameter of the DSN the journal cannot take
        raise UsageError(f"--journal: {e}") from None


def existing(data: str) -> None:
    """Refuse a data folder that holds no memory (a typo in ``--data``), creating nothing."""
    not_a_file(data)
    in_its_journal(data)
    if not (Path(data) / JOURNAL_FILE).is_file():
        raise Failure(
            f"no memory in {data}/ (it has no {JOURNAL_FILE}): give the folder with "
            "--data DIR, or create one with 'memstore add'"
        )


def reader(args: argparse.Namespace, *, embed: bool) -> Memory:
    """The folder's memory for reading: never created; read-only beside a running writer.

    With ``--journal``: that journal's memory, as its servers read it (``--readonly``
    changes nothing there: a read command writes nothing).
    """
    if getattr(args, "journal", None):
        return shared(args, embed=embed)
    existing(args.data)
    embedder = args.embedder if embed else None
    if args.readonly:
        return Memory(args.data, embedder=embedder, readonly=True)
    try:
        return Memory(args.data, embedder=embedder)
    except JournalLockedError:
        print(
            f"memstore: {args.data} is being written by another process; "
            "reading it read-only, as it was a moment ago (--readonly says so on purpose)",
            file=sys.stderr,
        )
        return Memory(args.data, embedder=embedder, readonly=True)


def print_item(item: Any, as_json: bool, score: float | None = None) -> None:
    if as_json:
        out = item.model_dump(mode="json")
        if score is not None:
            out["score"] = score
        print(json.dumps(out, ensure_ascii=not utf8(sys.stdout)))
        return
    text = shown(item.title or item.content)
    prefix = f"{score:7.3f}  " if score is not None else ""
    print(f"{prefix}{shown(item.id)}  [{shown(item.kind)}]  {text}")


def shown(text: str) -> str:
    """``text`` on one line, safe on a terminal: line breaks and control characters escaped.

    A hit is one line; a stored newline would start a line that reads as
    another hit, and an escape sequence (``\\x1b[...``) would drive the terminal.
    """
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def utf8(stream: IO[str] | None) -> bool:
    """Whether ``stream`` writes UTF-8, so any text goes out as it is."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def hit_count(text: str) -> int:
    """An argparse type: how many hits to show, 1..MAX_RESULTS (refused before the folder opens)."""
    value = positive_int(text)
    if value > MAX_RESULTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_RESULTS}, got {value}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (a rate, or seconds between keep-alives)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def journal_dsn(text: str) -> str:
    """An argparse type: ``--journal``, a PostgreSQL DSN (the SQLite journal is ``--data``'s).

    >>> journal_dsn("postgresql://me@db/memory")
    'postgresql://me@db/memory'
    >>> def refusal(text: str) -> str:
    ...     try:
    ...         journal_dsn(text)
    ...     except argparse.ArgumentTypeError as e:
    ...         return str(e).split("; ")[0]
    ...     return "taken"
    >>> refusal("data/journal.db")
    "takes a postgresql:// DSN (postgresql://user@host/db), got 'data/journal.db'"
    >>> refusal("postgressql://me:s3cret@db/x")  # a typo'd scheme: no password echoed
    "takes a postgresql:// DSN (postgresql://user@host/db), got 'postgressql://...'"
    """
    if text.startswith(("postgresql://", "postgres://")):
        return text
    # A URL of another scheme may hold a password: only its scheme is repeated.
    shown = text.split("://", 1)[0][:20] + "://..." if "://" in text else text[:60]
    raise argparse.ArgumentTypeError(
        f"takes a postgresql:// DSN (postgresql://user@host/db), got {shown!r}; the SQLite "
        "journal needs no flag: it is journal.db in the --data folder"
    )


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1..65535 (the OS would wrap 99999 round to 34463)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1..65535, got {value}")
    return value


def hint_unknown_partition(mem: Memory, partition: str) -> bool:
    """``--partition`` names one no item is in (a typo): say so, with the ones there are.

    ``search`` and ``export`` still ran (a search's untagged and shared items
    answer in every partition), so output may have been printed: the note goes
    to stderr beside it, and the exit status stays 0. Whether it said so.
    """
    parts = Counter(p for it in mem.store.all_items() if (p := partition_from_tags(it.tags)))
    if partition in parts:
        return False
    near = difflib.get_close_matches(partition, list(parts), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    names = ", ".join(f"{p} ({n})" for p, n in sorted(parts.items())[:5]) or "none"
    more = f" and {len(parts) - 5} more" if len(parts) > 5 else ""
    print(
        f"memstore: no item here is in partition {partition!r}: {hint}"
        f"partitions here: {names}{more}",
        file=sys.stderr,
    )
    return True


def at_folder(args: argparse.Namespace, data: Path) -> argparse.Namespace:
    """``args`` with the data folder ``data``."""
    return argparse.Namespace(**{**vars(args), "data": str(data)})


@contextlib.contextmanager
def writing(args: argparse.Namespace, *, embed: bool, what: str) -> Iterator[Memory]:
    """:func:`writer` for a write that may be refused: a new memory appears only once done.

    Into a folder that holds no memory yet, the memory is made in a hidden
    folder and moved into place when the block ends without an error
    (:func:`into_new_folder`), so a refused ``add`` or ``import`` leaves no
    empty memory (nor folder) behind. ``what`` names the command in the
    refusal of a race (another process filled the folder meanwhile).
    """
    if getattr(args, "journal", None):  # no folder is made: the journal is the server's
        with writer(args, embed=embed) as mem:
            yield mem
        return
    with (
        into_new_folder(Path(args.data), what) as data,
        writer(at_folder(args, data), embed=embed) as mem,
    ):
        yield mem


@contextlib.contextmanager
def into_new_folder(data: Path, what: str = "import") -> Iterator[Path]:
    """Where to write ``data``: itself when it holds files, else a folder that appears when done.

    A memory that does not exist yet is built in a hidden folder and put in
    place when the block ends without an error, so a refused import leaves no
    empty memory (nor folders) behind. A missing folder is built beside the
    first missing part of its path and renamed into place. An empty folder
    that exists (one made for it with ``mkdir``, a mount point) is the
    user's: it is never removed or replaced; the memory is built in a hidden
    folder inside it and its files moved in at the end
    (:func:`_fill_in_place`). When another import (or backup) filled the place
    while this one ran, that one is kept as it is and this one is discarded
    with a :class:`Failure` saying so.
    """
    top = data.absolute()
    while not top.parent.exists():
        top = top.parent
    if data.is_dir() and not data.is_symlink():  # what a killed import left inside it
        remove_dead_leftovers(data / _STAGED)
    empty = empty_folder(data)
    held = data.exists() and not empty
    if held or not top.parent.is_dir() or not os.access(top.parent, os.W_OK):
        yield data  # there already, or cannot be made: the open says why, naming data
        return
    if empty:
        with _fill_in_place(data, what) as staging:
            yield staging
        return
    remove_dead_leftovers(top)  # what killed imports and backups to this place left
    staging = staging_name(top)
    try:
        yield staging / data.absolute().relative_to(top)
        try:
            move_into_place(staging, top)  # a folder replaces only a missing or empty one
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):  # filled since it was looked at
                raise _raced(data, what) from None
            raise Failure(f"cannot move the new memory into {data}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _raced(data: Path, what: str) -> Failure:
    return Failure(
        f"another {what} got there first: {data} was filled while this {what} ran; it is "
        f"left as it is and this {what} was discarded ({what} again to add what it does "
        "not hold yet)"
    )


_STAGED = "memory"
"""What the hidden folder an import into an existing empty folder is built in is named after."""


@contextlib.contextmanager
def _fill_in_place(data: Path, what: str) -> Iterator[Path]:
    """A hidden folder inside the empty folder ``data``, whose files move into it at the end.

    Each file is flushed and moved in under a name that must still be free
    (anything that appeared in ``data`` meanwhile is another process's: this
    one is discarded); a failure takes out what this one moved in, so
    ``data`` is left as it was. ``data`` itself is never removed.
    """
    staging = staging_name(data / _STAGED)
    staging.mkdir()
    moved: list[Path] = []
    try:
        yield staging
        if {p.name for p in data.iterdir()} != {staging.name}:
            raise _raced(data, what)
        for entry in sorted(staging.iterdir()):
            target = data / entry.name
            if target.exists():
                raise _raced(data, what)
            move_into_place(entry, target)
            moved.append(target)
        staging.rmdir()
    except BaseException:
        for target in moved:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def empty_folder(path: Path) -> bool:
    """Whether ``path`` is a folder (not a link to one) with nothing in it."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:  # unreadable: not known to be empty, so opened as it is
        return False
