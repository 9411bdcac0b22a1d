"""The commands that move a memory whole: ``export``, ``import`` and ``backup``.

Each writes its output beside its destination, flushes it to disk and renames
it into place (:func:`memstore._durable.move_into_place`), so a refused or
interrupted run leaves the destination as it was, and a finished one survives a
power cut.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from memstore._durable import move_into_place, remove_dead_leftovers, staging_name
from memstore._journal_record import read_journal_record
from memstore._memory_build import partition_name
from memstore.errors import InvalidItemError, JournalCorruptError
from memstore.journal.exportfile import is_end_line
from memstore.journal.sqlite import SqliteJournal
from memstore.memory import JOURNAL_FILE, Memory
from memstore.tags import PARTITION_ALL

from ._common import (
    Failure,
    UsageError,
    existing,
    hint_unknown_partition,
    reader,
    writing,
)


def cmd_export(args: argparse.Namespace) -> int:
    if args.output is not None and args.output != "-":
        _check_output(args.output, args.data)
    elif sys.stdout is None:
        raise UsageError("standard output is closed: give -o FILE")
    if args.salvage:
        if args.journal:
            raise UsageError(
                "--salvage reads a folder's damaged journal.db; a PostgreSQL journal "
                "(--journal) has no damaged rows to leave out: export it without --salvage"
            )
        return _salvage(args)
    with reader(args, embed=False) as mem:
        if args.output in (None, "-"):
            n = mem.export(sys.stdout, partition=args.partition)
            sys.stdout.flush()
        else:
            n = _export_to_file(mem, args.output, args.partition)
        print(f"exported {n} item(s)", file=sys.stderr)
        if n == 0 and args.partition not in (None, "*"):  # a typo'd --partition: say so
            hint_unknown_partition(mem, args.partition)
    return 0


def _inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or lies within it, symlinks followed."""
    inner, outer = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return inner == outer or outer in inner.parents


def _check_output(output: str, data: str) -> None:
    """Refuse an export file that cannot be right, before the folder is opened.

    An empty name, or a file inside the data folder: ``-o data/journal.db``
    would replace the journal with its own export (the memory lost), and any
    other file there sits among the memory's own files.
    """
    if not output:
        raise UsageError("-o was given an empty file name: give a file, or - for stdout")
    if _inside(output, data):
        raise UsageError(
            f"cannot export to {output}: it is inside the data folder {data}/, whose files "
            "are the memory's own; write the export outside it"
        )


def _salvage(args: argparse.Namespace) -> int:
    """``export --salvage``: every readable version of a journal with damaged rows.

    The memory is not opened (opening refuses a damaged live row): its
    journal is read as it is, read-only, and each version that cannot be read
    is left out and named on stderr, so the export, imported into a new
    folder, holds everything else (docs/journal.md, "A damaged row").
    """
    existing(args.data)
    skipped: list[JournalCorruptError] = []
    part = None if args.partition in (None, PARTITION_ALL) else partition_name(args.partition)
    with SqliteJournal(Path(args.data) / JOURNAL_FILE, readonly=True) as journal:

        def write(fp: IO[str]) -> int:
            return journal.export(part, fp, on_corrupt=skipped.append)

        if args.output in (None, "-"):
            n = write(sys.stdout)
            sys.stdout.flush()
        else:
            n = _write_file(write, args.output)
    print(f"exported {n} item(s)", file=sys.stderr)
    for e in skipped:
        print(
            f"memstore: left out the damaged version of {e.item_id} at {e.position}",
            file=sys.stderr,
        )
    if skipped:
        print(
            f"memstore: {len(skipped)} damaged version(s) left out; import the export into "
            "a new folder to go on with everything else",
            file=sys.stderr,
        )
    return 0


def _export_to_file(mem: Memory, output: str, partition: str | None) -> int:
    """Export ``mem`` into ``output`` whole or not at all (see :func:`_write_file`)."""
    return _write_file(lambda fp: mem.export(fp, partition=partition), output)


def _write_file(write: Callable[[IO[str]], int], output: str) -> int:
    """Export into ``output`` whole or not at all: a failed export leaves the file as it was.

    A regular file (or a new one) is written beside itself and renamed into
    place once the export is complete, so re-exporting over the last good
    export and failing half-way (a damaged row, a full disk) keeps that export.
    Anything else (``/dev/stdout``, a named pipe) is written directly.
    """
    try:
        mode: int | None = os.stat(output).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise Failure(f"cannot write {output}: it is a folder; give a file name")
    if mode is not None and not stat.S_ISREG(mode):
        with open(output, "w", encoding="utf-8") as fp:
            return write(fp)
    target = Path(os.path.realpath(output))  # through a symlink: the file it names
    remove_dead_leftovers(target)  # what killed exports to this file left
    tmp = staging_name(target)
    try:
        try:
            fp = open(tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            raise Failure(f"cannot write {output}: {e.strerror}") from None
        with fp:
            n = write(fp)
        if mode is not None:
            shutil.copymode(target, tmp)
        move_into_place(tmp, target)  # on disk before "exported" is printed
    finally:
        tmp.unlink(missing_ok=True)
    return n


def cmd_import(args: argparse.Namespace) -> int:
    if args.partition is not None and args.format != "mcp-memory":
        raise UsageError(
            "--partition is for --format mcp-memory; an export's items keep the partitions "
            "they were exported from"
        )
    if args.check_rules and args.format == "mcp-memory":
        raise UsageError(
            "--check-rules is for a memstore export; a graph (--format mcp-memory) is "
            "written through the rules a write obeys already"
        )
    with _input(args.file) as fp:
        if args.format == "mcp-memory":  # the reference MCP memory server's memory.jsonl
            return _import_graph(args, fp)
        lines = _Lines(fp, _size(fp), progress=sys.stderr.isatty(), first_line_limit=HEADER_LIMIT)
        with writing(args, embed=True, what="import") as mem:
            try:
                changed = mem.import_(lines, check_rules=args.check_rules)  # type: ignore[arg-type]
            except InvalidItemError as e:
                hint = _GRAPH_HINT if lines.items == 1 and _is_graph_line(lines.first) else ""
                raise Failure(
                    f"refused {args.file}: {e.reason}; nothing was imported{hint}"
                ) from None
    # Every line with content is an item, but the first (the format) and the end line.
    unchanged = max(lines.items - 1 - is_end_line(lines.last), 0) - changed
    if args.json:
        print(json.dumps({"imported": changed, "unchanged": unchanged}))
    else:
        print(
            f"imported {changed} item(s), {unchanged} unchanged (already on record)",
            file=sys.stderr,
        )
    return 0


_GRAPH_HINT = (
    " (it looks like the reference MCP memory server's memory.jsonl: add --format mcp-memory)"
)


def _is_graph_line(line: str) -> bool:
    """Whether ``line`` is an entity or relation of the reference MCP memory server's file.

    >>> _is_graph_line('{"type": "entity", "name": "Ada", "observations": []}')
    True
    >>> _is_graph_line('{"format": "memstore-journal-export/2"}'), _is_graph_line("[1")
    (False, False)
    """
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("type") in ("entity", "relation")


HEADER_LIMIT = 64 * 1024
"""The longest first line an export may have: it only names the format, partition and head.

A file that is no export (``/dev/zero``, a disk image) is refused at this
many characters instead of being read whole as one line.
"""


def _size(fp: IO[str]) -> int:
    """How many bytes ``fp`` holds, for the progress bar: 0 for a pipe or a terminal."""
    try:
        return os.fstat(fp.fileno()).st_size if fp.seekable() else 0
    except (OSError, ValueError):  # no file behind it
        return 0


def _import_graph(args: argparse.Namespace, fp: IO[str]) -> int:
    """``import --format mcp-memory``: the reference server's graph, all or nothing.

    Every refusal reads as an export's does: ``refused FILE: REASON; nothing
    was imported``, whatever refused it (the file's text, a line that is no
    graph, or a write the engine refuses).
    """
    from memstore.mcp.importer import GraphImportError, import_graph

    with writing(args, embed=True, what="import") as mem:
        try:
            report = import_graph(mem, fp, args.partition)
        except UnicodeDecodeError as e:
            raise Failure(
                f"refused {args.file}: it is not UTF-8 text ({e.reason}); nothing was imported"
            ) from None
        except GraphImportError as e:  # a line that is no graph: its message names the line
            raise Failure(f"refused {args.file}: {_nothing_imported(str(e))}") from None
        except InvalidItemError as e:  # an entity a write refuses (an observation too long)
            raise Failure(f"refused {args.file}: {e.reason}; nothing was imported") from None
    if args.json:
        print(json.dumps(dataclasses.asdict(report)))
    else:
        print(
            f"imported {report.entities} entities, {report.observations} observations, "
            f"{report.relations} relations",
            file=sys.stderr,
        )
    return 0


_NOTHING_IMPORTED = "; nothing was imported"


def _nothing_imported(reason: str) -> str:
    """``reason`` saying once that nothing was imported, any hint it ends with kept last.

    >>> _nothing_imported("line 2: not JSON; nothing was imported (a hint)")
    'line 2: not JSON; nothing was imported (a hint)'
    >>> _nothing_imported("line 2: not JSON")
    'line 2: not JSON; nothing was imported'
    """
    head, said, tail = reason.partition(_NOTHING_IMPORTED)
    return f"{head}{_NOTHING_IMPORTED}{tail}" if said else reason + _NOTHING_IMPORTED


@contextlib.contextmanager
def _input(name: str) -> Iterator[IO[str]]:
    """The file to import as UTF-8 text (a leading BOM skipped, CRLF read as LF); ``-``: stdin.

    Refused with one line: a missing, unreadable or closed input, a folder,
    and a device other than a terminal (``/dev/zero`` never ends).
    """
    target: int | str = name
    if name == "-":
        if sys.stdin is None:
            raise UsageError("standard input is closed: give the file to import instead of -")
        try:
            target = sys.stdin.fileno()
        except (OSError, ValueError):  # not a file (a test's StringIO): read it as it is
            yield sys.stdin
            return
    try:
        fp = open(target, encoding="utf-8-sig", closefd=name != "-")  # noqa: SIM115 - closed below
    except OSError as e:
        raise Failure(f"cannot read {name}: {e.strerror}") from None
    with fp:
        mode = os.fstat(fp.fileno()).st_mode
        shown = "standard input" if name == "-" else name
        if stat.S_ISDIR(mode):
            raise Failure(f"cannot read {shown}: it is a folder; give the export file")
        if stat.S_ISCHR(mode) and not fp.isatty():
            raise Failure(f"cannot read {shown}: it is a device, not a file; give the export file")
        yield fp


class _Lines:
    """A text file's lines, counted, with how much was read drawn on stderr if asked."""

    def __init__(
        self, fp: IO[str], total: int, *, progress: bool, first_line_limit: int = 0
    ) -> None:
        self._fp, self._total, self._read, self._shown = fp, max(total, 1), 0, -1
        self._progress = progress and total > 0
        self._limit = first_line_limit
        self.items = 0
        self.first = ""  # the first line with content
        self.last = ""  # the last line with content

    def __iter__(self) -> Iterator[str]:
        limit, n = self._limit, 0
        while line := self._fp.readline(limit or -1):
            n += 1
            if line.strip():
                if limit and len(line) >= limit and not line.endswith("\n"):
                    raise InvalidItemError(
                        f"line {n} runs past {limit} characters: not a memstore export "
                        "(its first line only names the format)"
                    )
                limit = 0
                self.items += 1
                self.first = self.first or line
                self.last = line
            if self._progress:
                self._read += len(line.encode("utf-8"))
                pct = min(100, self._read * 100 // self._total)
                if pct != self._shown:
                    self._shown = pct
                    sys.stderr.write(f"\rmemstore: reading [{'#' * (pct // 4):<25}] {pct}%")
                    sys.stderr.flush()
            yield line
        if self._progress:
            sys.stderr.write("\n")


def cmd_backup(args: argparse.Namespace) -> int:
    from memstore.backup import TOKENS_FILE, VECTORS_FILE, backup

    if not args.dir or not args.dest:
        raise UsageError("DIR and DEST must both be folder names (one is empty)")
    if _inside(args.dest, args.dir):  # a value that can never work, as export's -o inside DIR
        raise UsageError(
            f"cannot back up into {args.dest}: it is inside the folder backed up, {args.dir}/, "
            "and would go with it; back up into a folder outside it"
        )
    if (record := read_journal_record(args.dir)) is not None and not (
        Path(args.dir) / JOURNAL_FILE
    ).is_file():
        raise Failure(
            f"cannot back up {args.dir}: its memory is kept in a "
            f"{_JOURNAL_NAMES.get(record.get('journal', ''), record.get('journal'))} "
            "journal, not in a journal.db of its own (a server opened it with --journal); "
            "back that journal up where it is (PostgreSQL: pg_dump --schema SCHEMA)"
        )
    written = backup(args.dir, args.dest)
    sizes = ", ".join(f"{p.name} ({p.stat().st_size} bytes)" for p in written)
    print(f"backed up {sizes} to {args.dest}", file=sys.stderr)
    if (Path(args.dir) / VECTORS_FILE).is_file() and VECTORS_FILE not in {p.name for p in written}:
        print(
            f"memstore: {VECTORS_FILE} in {args.dir} is damaged and was left out; "
            "the copy embeds its items again when it is opened",
            file=sys.stderr,
        )
    if (Path(args.dir) / TOKENS_FILE).is_file() and TOKENS_FILE not in {p.name for p in written}:
        print(
            f"memstore: {TOKENS_FILE} in {args.dir} could not be read and was left out; "
            "a server started on the copy makes a new token",
            file=sys.stderr,
        )
    return 0


_JOURNAL_NAMES = {"postgresql": "PostgreSQL"}
"""How a folder's journal record (``journal.json``) names a journal, as a message says it."""

BACKUP_HELP = """\
Copy the data folder DIR into the new folder DEST while DIR stays in use.

The journal (journal.db) and the vectors (vectors.sqlite3) are copied with
SQLite's online backup API: each file as of one commit, consistent even while
a process writes to DIR. DEST must not exist, or be an empty folder (used as
it is, never removed), and must be outside DIR; a failed or interrupted backup
leaves DEST as it was, and a finished one is on disk (flushed) before the
command returns. The server's tokens.json, if
DIR holds one, is copied too, readable by its owner only (mode 0600): a server
restored from DEST accepts the same tokens, and DEST holds that secret.

Restore: open DEST as it is (memstore stats --data DEST, or Memory(DEST)), or
stop every writer of DIR and move DEST into its place.
"""
