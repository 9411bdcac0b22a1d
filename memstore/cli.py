"""The ``memstore`` command: the engine from a shell, and its servers.

Every command works on a data folder (``--data``, default ``./data``), the
same one :class:`~memstore.memory.Memory` and the servers use. Exit status:
0 on success, 1 when the thing asked for is not there or the command failed,
2 for a usage error (a bad flag or value), 128 + N when stopped by signal N
(130 for Ctrl-C; what the command was writing is left as it was); every error
is one line on stderr that says what to do instead.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import dataclasses
import difflib
import importlib
import io
import json
import math
import os
import shutil
import signal
import stat
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, get_args

from memstore import __version__
from memstore.errors import InvalidItemError, JournalLockedError, MemstoreError
from memstore.item import Origin
from memstore.journal.exportfile import is_end_line
from memstore.limits import MAX_RESULTS
from memstore.memory import DEFAULT_KIND, JOURNAL_FILE, Memory
from memstore.protocol.limits import MAX_BODY_BYTES
from memstore.tags import partition_from_tags
from memstore.vocabulary import ENGINE_KINDS
from memstore.web.connections import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
)

__all__ = ["main"]

DEFAULT_DATA = "data"
EMBEDDERS = ("auto", "local", "hash", "none")

USAGE = """\
examples:
  memstore add "the nightly backup runs at 02:00" --partition ops
  memstore search "when is the backup?" --partition ops
  memstore get ID          memstore forget ID [--hard]          memstore stats
  memstore export [--partition P] [-o FILE]          memstore import FILE
  memstore backup DIR DEST
  memstore serve           (MemoryProtocol 0.1 over HTTP, extra server)
  memstore mcp             (memory for MCP clients, extra mcp)

Every command works on a data folder: --data DIR (default ./data).
'memstore COMMAND --help' says what each command takes.
"""


class UsageError(MemstoreError):
    """A value on the command line that cannot work: exit status 2."""


class Failure(MemstoreError):
    """What the command was asked to act on is not there, or cannot be done now: exit status 1."""


def _writer(args: argparse.Namespace, *, embed: bool) -> Memory:
    """The folder's memory opened for writing (created when missing)."""
    try:
        return Memory(args.data, embedder=args.embedder if embed else None)
    except JournalLockedError:
        raise Failure(
            f"{args.data} is being written by another process (a running memstore serve?); "
            "stop it, or send the change through its HTTP API"
        ) from None


def _existing(data: str) -> None:
    """Refuse a data folder that holds no memory (a typo in ``--data``), creating nothing."""
    if not (Path(data) / JOURNAL_FILE).is_file():
        raise Failure(
            f"no memory in {data}/ (it has no {JOURNAL_FILE}): give the folder with "
            "--data DIR, or create one with 'memstore add'"
        )


def _reader(args: argparse.Namespace, *, embed: bool) -> Memory:
    """The folder's memory for reading: never created; read-only beside a running writer."""
    _existing(args.data)
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


def _check_kind(args: argparse.Namespace) -> None:
    """Refuse a kind nobody uses (a typo such as ``stable-fact`` would skip its rules).

    Known: the engine's kinds, ``note``, and every kind already in the folder;
    ``--new-kind`` starts one of your own. Checked before anything is opened,
    so a refused add creates nothing.
    """
    kind = args.kind
    if not kind or args.new_kind:
        return
    known = {*ENGINE_KINDS, DEFAULT_KIND}
    if kind in known:
        return
    if (Path(args.data) / JOURNAL_FILE).is_file():
        with _reader(argparse.Namespace(**{**vars(args), "readonly": True}), embed=False) as mem:
            known |= {it.kind for it in mem.store.all_items()}
        if kind in known:
            return
    near = difflib.get_close_matches(kind, sorted(known), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise UsageError(
        f"unknown kind {kind!r}: {hint}known kinds: {', '.join(sorted(known))} "
        "(--new-kind starts a kind of your own)"
    )


def _print_item(item: Any, as_json: bool, score: float | None = None) -> None:
    if as_json:
        out = item.model_dump(mode="json")
        if score is not None:
            out["score"] = score
        print(json.dumps(out, ensure_ascii=not _utf8(sys.stdout)))
        return
    text = _shown(item.title or item.content)
    prefix = f"{score:7.3f}  " if score is not None else ""
    print(f"{prefix}{_shown(item.id)}  [{_shown(item.kind)}]  {text}")


def _shown(text: str) -> str:
    """``text`` on one line, safe on a terminal: line breaks and control characters escaped.

    A hit is one line; a stored newline would start a line that reads as
    another hit, and an escape sequence (``\\x1b[...``) would drive the terminal.
    """
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def cmd_add(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {}
    for name in ("kind", "confidence", "origin", "subject", "event_date", "title"):
        value = getattr(args, name)
        if value:
            fields[name] = value
    _check_kind(args)
    with _writer(args, embed=True) as mem:
        item = mem.add(args.text, partition=args.partition, **fields)
        _print_item(item, args.json)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise UsageError("the query is empty: give some words to search for")
    partition = "*" if args.all else args.partition
    with _reader(args, embed=True) as mem:
        hits = mem.search(args.query, partition=partition, kind=args.kind, limit=args.limit)
        for hit in hits:
            _print_item(hit.item, args.json, hit.score)
        if partition is None:
            _hint_partitions(mem)
        if args.kind and not hits:
            _hint_kinds(mem, args.kind)
    return 0


def _hint_kinds(mem: Memory, kind: str) -> None:
    """No hits for ``--kind``: say when no item has that kind at all (a typo finds nothing)."""
    known = sorted({it.kind for it in mem.store.all_items()})
    if kind in known:
        return
    near = difflib.get_close_matches(kind, known, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    print(
        f"memstore: no item here has kind {kind!r}: {hint}kinds here: {', '.join(known) or '-'}",
        file=sys.stderr,
    )


def _hint_partitions(mem: Memory) -> None:
    """Without --partition only untagged items are searched: say when others exist."""
    parts = Counter(p for it in mem.store.all_items() if (p := partition_from_tags(it.tags)))
    if parts:
        names = ", ".join(f"{p} ({n})" for p, n in sorted(parts.items())[:5])
        more = f" and {len(parts) - 5} more" if len(parts) > 5 else ""
        print(
            f"memstore: searched items without a partition; partitions here: {names}{more}. "
            "Use --partition NAME, or --all for every partition",
            file=sys.stderr,
        )


def cmd_get(args: argparse.Namespace) -> int:
    with _reader(args, embed=False) as mem:
        item = mem.get(args.id)
        if item is None:
            raise Failure(f"no item {args.id!r} in {args.data}/")
        print(json.dumps(item.model_dump(mode="json"), indent=None if args.json else 2))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    _existing(args.data)  # nothing to forget in a folder that is not there: create none
    with _writer(args, embed=False) as mem:
        if args.hard:
            if mem.get(args.id) is None and not mem.history(args.id):
                raise Failure(f"no item {args.id!r} in {args.data}/")
            mem.purge([args.id])
        elif not mem.delete(args.id):
            raise Failure(f"no item {args.id!r} in {args.data}/")
    if args.json:
        print(json.dumps({"deleted": args.id, "hard": args.hard}))
    elif args.hard:
        print(f"purged {args.id} (every version)")
    else:
        print(f"deleted {args.id} (its history is kept; --hard erases it)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.output is not None and args.output != "-":
        _check_output(args.output, args.data)
    elif sys.stdout is None:
        raise UsageError("standard output is closed: give -o FILE")
    with _reader(args, embed=False) as mem:
        if args.output in (None, "-"):
            n = mem.export(sys.stdout, partition=args.partition)
            sys.stdout.flush()
        else:
            n = _export_to_file(mem, args.output, args.partition)
        print(f"exported {n} item(s)", file=sys.stderr)
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


def _export_to_file(mem: Memory, output: str, partition: str | None) -> int:
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
            return mem.export(fp, partition=partition)
    target = Path(os.path.realpath(output))  # through a symlink: the file it names
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        try:
            fp = open(tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            raise Failure(f"cannot write {output}: {e.strerror}") from None
        with fp:
            n = mem.export(fp, partition=partition)
        if mode is not None:
            shutil.copymode(target, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def cmd_import(args: argparse.Namespace) -> int:
    if args.partition is not None and args.format != "mcp-memory":
        raise UsageError(
            "--partition is for --format mcp-memory; an export's items keep the partitions "
            "they were exported from"
        )
    with _input(args.file) as fp:
        if args.format == "mcp-memory":  # the reference MCP memory server's memory.jsonl
            return _import_graph(args, fp)
        lines = _Lines(fp, _size(fp), progress=sys.stderr.isatty(), first_line_limit=HEADER_LIMIT)
        with _into_new_folder(Path(args.data)) as data, _writer(_at(args, data), embed=True) as mem:
            try:
                changed = mem.import_(lines)  # type: ignore[arg-type]
            except InvalidItemError as e:
                raise Failure(f"refused {args.file}: {e.reason}; nothing was imported") from None
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


def _at(args: argparse.Namespace, data: Path) -> argparse.Namespace:
    """``args`` with the data folder ``data``."""
    return argparse.Namespace(**{**vars(args), "data": str(data)})


def _import_graph(args: argparse.Namespace, fp: IO[str]) -> int:
    """``import --format mcp-memory``: the reference server's graph, all or nothing."""
    from memstore.mcp.importer import import_graph

    with _into_new_folder(Path(args.data)) as data, _writer(_at(args, data), embed=True) as mem:
        try:
            report = import_graph(mem, fp, args.partition)
        except UnicodeDecodeError as e:
            raise Failure(
                f"refused {args.file}: it is not UTF-8 text ({e.reason}); nothing was imported"
            ) from None
    if args.json:
        print(json.dumps(dataclasses.asdict(report)))
    else:
        print(
            f"imported {report.entities} entities, {report.observations} observations, "
            f"{report.relations} relations",
            file=sys.stderr,
        )
    return 0


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


@contextlib.contextmanager
def _into_new_folder(data: Path) -> Iterator[Path]:
    """Where to write ``data``: itself when it exists, else a folder renamed into place.

    A memory that does not exist yet is built in a hidden folder beside the
    first missing part of its path and renamed into place when the block ends
    without an error, so a refused import leaves no empty memory (nor folders)
    behind, as a refused ``add`` creates nothing.
    """
    top = data.absolute()
    while not top.parent.exists():
        top = top.parent
    if data.exists() or not top.parent.is_dir() or not os.access(top.parent, os.W_OK):
        yield data  # there already, or cannot be made: the open says why, naming data
        return
    staging = top.with_name(f".{top.name}.{os.getpid()}.new")
    try:
        yield staging / data.absolute().relative_to(top)
        os.rename(staging, top)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def cmd_stats(args: argparse.Namespace) -> int:
    with _reader(args, embed=False) as mem:
        s = mem.stats()
        items = mem.store.all_items()
        by_partition = Counter(partition_from_tags(it.tags) or "" for it in items)
        by_kind = Counter(it.kind for it in items)
        report: dict[str, Any] = {
            "items": s.items,
            "active": s.active,
            "head": str(s.head) if s.head else None,
            "partitions": dict(sorted(by_partition.items())),
            "kinds": dict(sorted(by_kind.items())),
        }
        if args.json:
            print(json.dumps(report, indent=2))
            return 0
        print(f"{'items':<24}{s.items:>10}")
        print(f"{'active':<24}{s.active:>10}")
        print(f"{'journal head':<24}{report['head'] or '-':>10}")
        for title, counts in (("partition", by_partition), ("kind", by_kind)):
            if counts:
                print(f"\n{title:<24}{'items':>10}")
                for name, n in sorted(counts.items()):
                    print(f"{_shown(name) or '(none)':<24}{n:>10}")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    from memstore.backup import backup

    if not args.dir or not args.dest:
        raise UsageError("DIR and DEST must both be folder names (one is empty)")
    written = backup(args.dir, args.dest)
    sizes = ", ".join(f"{p.name} ({p.stat().st_size} bytes)" for p in written)
    print(f"backed up {sizes} to {args.dest}", file=sys.stderr)
    return 0


BACKUP_HELP = """\
Copy the data folder DIR into the new folder DEST while DIR stays in use.

The journal (journal.db) and the vectors (vectors.sqlite3) are copied with
SQLite's online backup API: each file as of one commit, consistent even while
a process writes to DIR. DEST must not exist (or be empty) and must be outside
DIR; a failed or interrupted backup leaves nothing there.

Restore: open DEST as it is (memstore stats --data DEST, or Memory(DEST)), or
stop every writer of DIR and move DEST into its place.
"""


_PROTOCOL_ONLY = ("rate_per_second", "rate_burst", "max_body", "sse_keepalive", "confirm_key_file")
"""``memstore serve`` options the MemoryProtocol server applies and the Mind Layer one has not."""


def cmd_serve(args: argparse.Namespace) -> int:
    if args.api != "mindlayer" and args.owner_token_file:
        print(
            "memstore: --owner-token-file is for --api mindlayer (this takes --tokens-file)",
            file=sys.stderr,
        )
        return 2
    module = "memstore.mindlayer.server" if args.api == "mindlayer" else "memstore.protocol.server"
    try:
        server = importlib.import_module(module)
    except ImportError as e:
        print(
            f"memstore serve needs the server extra ({e.name} is missing): "
            'pip install "memstore-engine[server]"',
            file=sys.stderr,
        )
        return 2
    if args.api == "mindlayer":  # its own API and auth; the inspector rides on the protocol's
        defaults = build_parser().parse_args(["serve"])
        for name in _PROTOCOL_ONLY:  # a limit asked for that would not apply: refused
            if getattr(args, name) != getattr(defaults, name):
                flag = "--" + name.replace("_", "-")
                print(
                    f"memstore: {flag} is MemoryProtocol's; the Mind Layer API has its own "
                    "limits (docs/mindlayer.md)",
                    file=sys.stderr,
                )
                return 2
        code: int = server.serve(args)
        return code
    mounts = []
    if not getattr(args, "no_ui", False):  # the browser inspector at /ui (memstore.ui)
        mounts.append(importlib.import_module("memstore.ui").install)
    code = server.serve(args, mounts=mounts)
    return code


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        run = importlib.import_module("memstore.mcp.run")
    except ImportError as e:
        print(
            f"memstore mcp needs the mcp extra ({e.name} is missing): "
            'pip install "memstore-engine[mcp]"',
            file=sys.stderr,
        )
        return 2
    code: int = run.serve(args)
    return code


class _Lines:
    """A text file's lines, counted, with how much was read drawn on stderr if asked."""

    def __init__(
        self, fp: IO[str], total: int, *, progress: bool, first_line_limit: int = 0
    ) -> None:
        self._fp, self._total, self._read, self._shown = fp, max(total, 1), 0, -1
        self._progress = progress and total > 0
        self._limit = first_line_limit
        self.items = 0
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


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _hit_count(text: str) -> int:
    """An argparse type: how many hits to show, 1..MAX_RESULTS (refused before the folder opens)."""
    value = _positive_int(text)
    if value > MAX_RESULTS:
        raise argparse.ArgumentTypeError(f"at most {MAX_RESULTS}, got {value}")
    return value


def _positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (a rate, or seconds between keep-alives)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535 (the OS would wrap 99999 round to 34463)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1..65535, got {value}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line that says where to look (exit status 2)."""

    def error(self, message: str) -> Any:  # argparse types it NoReturn
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memstore",
        description="memstore: an in-process memory engine for AI agents, from the shell.",
        epilog=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memstore {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        name: str,
        help: str,
        *,
        reads: bool = False,
        json_help: str | None = "print JSON instead of text",
    ) -> argparse.ArgumentParser:
        """A command with the common flags; ``json_help``: what --json does (None: no --json)."""
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument(
            "--data", default=DEFAULT_DATA, metavar="DIR", help="the data folder (default ./data)"
        )
        p.add_argument(
            "--embedder",
            default="auto",
            choices=EMBEDDERS,
            help="the embedding model: auto (the local model when installed, else hash), "
            "local, hash, or none for lexical search only (default auto)",
        )
        if json_help is None:
            p.set_defaults(json=False)
        else:
            p.add_argument("--json", action="store_true", help=json_help)
        if reads:
            p.add_argument(
                "--readonly",
                action="store_true",
                help="open the folder read-only (what a reader beside a running server gets "
                "by itself)",
            )
        return p

    p = command("add", "store a note (plain text becomes a note's content)")
    p.add_argument("text", help="what to remember")
    p.add_argument("--partition", metavar="NAME", help="the partition (tenant) it belongs to")
    p.add_argument(
        "--kind",
        help="what it is: stable_fact, hypothesis, event, watch_item, operational_pattern, "
        "unknown, note (default) or a kind already in the folder",
    )
    p.add_argument(
        "--new-kind", action="store_true", help="allow a --kind nobody has used yet (your own)"
    )
    p.add_argument(
        "--confidence",
        choices=("high", "medium", "low"),
        help="how sure (a stable_fact needs high)",
    )
    p.add_argument(
        "--origin",
        choices=[origin for origin in get_args(Origin) if origin],
        help="where it came from (default: derived)",
    )
    p.add_argument("--subject", help="what or whom it is about")
    p.add_argument(
        "--event-date",
        dest="event_date",
        metavar="DATE",
        help="when it happened, YYYY-MM-DD or RFC 3339 (an event needs one)",
    )
    p.add_argument("--title", help="a short title (searched with extra weight)")
    p.set_defaults(fn=cmd_add)

    p = command("search", "hybrid search: lexical first, semantic when unsure", reads=True)
    p.add_argument("query", help="the words to search for")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--partition",
        metavar="NAME",
        help="search this partition (and untagged and shared items); default: untagged only",
    )
    where.add_argument("--all", action="store_true", help="search every partition")
    p.add_argument("--kind", default="", help="only items of this kind")
    p.add_argument(
        "--limit",
        type=_hit_count,
        default=10,
        metavar="N",
        help=f"hits to show, 1..{MAX_RESULTS} (default 10)",
    )
    p.set_defaults(fn=cmd_search)

    p = command(
        "get",
        "print one item as JSON",
        reads=True,
        json_help="print it on one line (default: indented)",
    )
    p.add_argument("id", help="the item's id")
    p.set_defaults(fn=cmd_get)

    p = command(
        "forget",
        "delete an item (soft: its history stays; --hard erases it)",
        json_help='print {"deleted": ID, "hard": true|false} instead of text',
    )
    p.add_argument("id", help="the item's id")
    p.add_argument(
        "--hard", action="store_true", help="erase every version, past included (cannot be undone)"
    )
    p.set_defaults(fn=cmd_forget)

    p = command(
        "export", "write items with their whole history as NDJSON", reads=True, json_help=None
    )
    p.add_argument("--partition", metavar="NAME", help="only this partition's items")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.set_defaults(fn=cmd_export)

    p = command(
        "import",
        "load an export (all or nothing; importing twice changes nothing)",
        json_help="print what was imported as JSON on stdout (default: a line on stderr)",
    )
    p.add_argument("file", help="the export file, or - for standard input")
    p.add_argument(
        "--format",
        choices=("memstore", "mcp-memory"),
        default="memstore",
        help="memstore (an export) or mcp-memory (the reference MCP memory server's JSONL)",
    )
    p.add_argument("--partition", help="mcp-memory: the partition the graph goes into")
    p.set_defaults(fn=cmd_import)

    p = command("stats", "counts by partition and kind, and the journal head", reads=True)
    p.set_defaults(fn=cmd_stats)

    p = sub.add_parser(
        "backup",
        help="copy a data folder consistently, while it is in use",
        description=BACKUP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="the data folder to back up")
    p.add_argument("dest", metavar="DEST", help="the new folder to write the backup to")
    p.set_defaults(fn=cmd_backup, embedder=None)

    p = command(
        "serve", "run the HTTP server: MemoryProtocol 0.1, or --api mindlayer", json_help=None
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8080, help="port to listen on (default 8080)")
    p.add_argument(
        "--tokens-file",
        help="the tokens JSON (re-read when it changes and on SIGHUP); "
        "default: DATA/tokens.json, made on a loopback bind",
    )
    p.add_argument("--journal", help="a postgresql:// DSN instead of the folder's SQLite file")
    p.add_argument(
        "--journal-schema",
        help="the PostgreSQL schema of --journal (default memstore); replicas share one",
    )
    p.add_argument(
        "--confirm-key-file",
        help="a secret (16+ bytes) keying hard-delete confirmations; default: the tokens file",
    )
    p.add_argument(
        "--rate-per-second", type=_positive_number, default=60.0, help="per tenant (default 60)"
    )
    p.add_argument("--rate-burst", type=_positive_int, default=120, help="per tenant (default 120)")
    p.add_argument(
        "--metrics-disabled",
        action="store_true",
        help="answer GET /metrics with 404 (it needs no token and names the tenants)",
    )
    p.add_argument(
        "--sse-keepalive",
        type=_positive_number,
        default=15.0,
        help="idle seconds before an SSE keep-alive comment (default 15)",
    )
    web = p.add_argument_group("HTTP defences")
    web.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME[:PORT]",
        help="a Host the server answers besides 127.0.0.1, localhost and [::1] (repeatable; "
        "'*' for any). Default: none on a loopback bind, any host on a public bind",
    )
    web.add_argument(
        "--allow-origin",
        action="append",
        metavar="URL",
        help="a web origin (https://app.example) whose pages may call the server, with CORS "
        "(repeatable; '*' for any). Default: only the server's own origin, no CORS",
    )
    web.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="time to send a request's headers, else 408 and the connection closes "
        f"(default {DEFAULT_HEADER_TIMEOUT_SECONDS:g})",
    )
    web.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="time to send a whole body after the headers, else the connection closes "
        f"(default {DEFAULT_BODY_TIMEOUT_SECONDS:g})",
    )
    web.add_argument(
        "--keepalive-timeout",
        type=float,
        default=DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="idle time before a keep-alive connection is closed "
        f"(default {DEFAULT_KEEPALIVE_TIMEOUT_SECONDS:g})",
    )
    web.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="open connections in all; more are answered 503 and closed "
        f"(default {DEFAULT_MAX_CONNECTIONS}, lowered to fit ulimit -n)",
    )
    web.add_argument(
        "--max-connections-per-client",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        metavar="N",
        help="open connections per client IP address "
        f"(default {DEFAULT_MAX_CONNECTIONS_PER_CLIENT})",
    )
    web.add_argument(
        "--max-body",
        type=_positive_int,
        default=MAX_BODY_BYTES,
        metavar="BYTES",
        help=f"largest request body; larger is 413 (default {MAX_BODY_BYTES}, 256 KiB). "
        "An episode's content is capped at 16 KiB and a recall query at 4096 characters "
        "whatever this says (docs/protocol.md, Limits)",
    )
    mindlayer = p.add_argument_group("Mind Layer API (--api mindlayer; see docs/mindlayer.md)")
    mindlayer.add_argument(
        "--api",
        choices=("protocol", "mindlayer"),
        default="protocol",
        help="the API served: MemoryProtocol 0.1 (default) or the Mind Layer REST API",
    )
    mindlayer.add_argument(
        "--owner-token-file",
        metavar="FILE",
        help="the Mind Layer owner token and a newline (mode 0600; re-read when it changes). "
        "Default: no token, on a loopback bind only",
    )
    p.add_argument(
        "--no-ui",
        action="store_true",
        help="do not serve the browser memory inspector at /ui (served by default)",
    )
    p.set_defaults(fn=cmd_serve)

    p = command("mcp", "run the MCP server (memory for MCP clients; extra mcp)", json_help=None)
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (the client starts the server; default) or http (streamable HTTP at /mcp)",
    )
    p.add_argument("--host", default="127.0.0.1", help="--transport http: address (127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="--transport http: port (8765)")
    p.add_argument("--partition", help="the partition every call reads and writes")
    p.add_argument("--journal", help="a postgresql:// DSN instead of the folder's SQLite file")
    p.add_argument("--journal-schema", help="the PostgreSQL schema of --journal")
    p.add_argument("--readonly", action="store_true", help="serve reads only")
    p.add_argument("--compat", choices=("knowledge-graph",), help="the reference server's tools")
    p.add_argument("--tokens-file", help="bearer tokens (needed off loopback, --transport http)")
    p.set_defaults(fn=cmd_mcp)
    return parser


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is so its clean-up runs as for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)


@contextlib.contextmanager
def _stoppable(command: str) -> Iterator[None]:
    """While a command runs, SIGTERM and SIGHUP unwind it as Ctrl-C does.

    Killed outright, an import into a new folder, a backup or an export to a
    file would leave its hidden staging folder or file behind; unwound, each
    removes it and the destination stays as it was. The servers keep their own
    handlers, and a signal already ignored (``nohup``) stays ignored.
    """
    if command in ("serve", "mcp"):
        yield
        return
    saved: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: nothing to install
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                saved[sig] = signal.signal(sig, _stop)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _plain_stdout() -> None:
    """Text a terminal cannot encode is printed escaped (``\\u00e9``), not a traceback."""
    out = sys.stdout
    if out is not None and isinstance(out, io.TextIOWrapper) and not _utf8(out):
        out.reconfigure(errors="backslashreplace")


def _utf8(stream: IO[str] | None) -> bool:
    """Whether ``stream`` writes UTF-8, so any text goes out as it is."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (see the module docs).

    Interrupted (Ctrl-C, SIGTERM, SIGHUP), a command leaves what it was
    writing as it was and exits 128 + the signal's number (130 for Ctrl-C).
    """
    args = build_parser().parse_args(argv)
    if getattr(args, "embedder", None) == "none":
        args.embedder = None
    _plain_stdout()
    try:
        with _stoppable(args.command):
            code: int = args.fn(args)
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, _Stopped) else signal.SIGINT
        print(f"memstore: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # `memstore export | head`: the reader has what it wanted. Quiet, as Unix tools are.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (UsageError, InvalidItemError) as e:
        print(f"memstore: {_one_line(e)}", file=sys.stderr)
        return 2
    except (MemstoreError, OSError) as e:
        print(f"memstore: {_one_line(e)}", file=sys.stderr)
        return 1
    return code


def _one_line(e: BaseException) -> str:
    """An error as one line: what went wrong and what to type instead."""
    text = e.reason if isinstance(e, InvalidItemError) else str(e)
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
