"""The ``memstore`` command: the engine from a shell, and the HTTP server.

    memstore add "the nightly backup runs at 02:00" --partition ops
    memstore search "when is the backup?" --partition ops
    memstore get ID | forget ID [--hard] | stats
    memstore export [--partition P] [-o FILE] | import FILE
    memstore serve [--data DIR] [--host H] [--port N] [--tokens-file F] ...

Every command works on a data folder (``--data``, default ``./data``), the
same one :class:`~memstore.memory.Memory` and the server use. Exit status: 0
on success, 1 when the thing asked for is not there, 2 for bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import IO, Any

from memstore import __version__
from memstore.errors import MemstoreError
from memstore.memory import Memory
from memstore.web.connections import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
)

__all__ = ["main"]

DEFAULT_DATA = "data"


def _memory(args: argparse.Namespace, *, embed: bool) -> Memory:
    return Memory(args.data, embedder=args.embedder if embed else None)


def _print_item(item: Any, as_json: bool, score: float | None = None) -> None:
    if as_json:
        out = item.model_dump(mode="json")
        if score is not None:
            out["score"] = score
        print(json.dumps(out, ensure_ascii=False))
        return
    text = item.title or item.content
    prefix = f"{score:7.3f}  " if score is not None else ""
    print(f"{prefix}{item.id}  [{item.kind}]  {text}")


def cmd_add(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {}
    for name in ("kind", "confidence", "origin", "subject", "event_date", "title"):
        value = getattr(args, name)
        if value:
            fields[name] = value
    with _memory(args, embed=True) as mem:
        item = mem.add(args.text, partition=args.partition, **fields)
        _print_item(item, args.json)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with _memory(args, embed=True) as mem:
        hits = mem.search(args.query, partition=args.partition, kind=args.kind, limit=args.limit)
        for hit in hits:
            _print_item(hit.item, args.json, hit.score)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with _memory(args, embed=False) as mem:
        item = mem.get(args.id)
        if item is None:
            print(f"memstore: no item {args.id!r}", file=sys.stderr)
            return 1
        print(json.dumps(item.model_dump(mode="json"), indent=None if args.json else 2))
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _memory(args, embed=False) as mem:
        if args.hard:
            if mem.get(args.id) is None and not mem.history(args.id):
                print(f"memstore: no item {args.id!r}", file=sys.stderr)
                return 1
            mem.purge([args.id])
            print(f"purged {args.id} (every version)")
            return 0
        if not mem.delete(args.id):
            print(f"memstore: no item {args.id!r}", file=sys.stderr)
            return 1
        print(f"deleted {args.id} (its history is kept; --hard erases it)")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with _memory(args, embed=False) as mem:
        if args.output in (None, "-"):
            n = mem.export(sys.stdout, partition=args.partition)
        else:
            with open(args.output, "w", encoding="utf-8") as fp:
                n = mem.export(fp, partition=args.partition)
        print(f"exported {n} item(s)", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    size = os.path.getsize(args.file) if args.file != "-" else 0
    with _memory(args, embed=True) as mem:
        if args.file == "-":
            n = mem.import_(sys.stdin)
        else:
            with open(args.file, encoding="utf-8") as fp:
                n = mem.import_(_ReadProgress(fp, size) if size else fp)  # type: ignore[arg-type]
        print(f"imported {n} item(s)", file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _memory(args, embed=False) as mem:
        s = mem.stats()
        print(
            json.dumps(
                {"items": s.items, "active": s.active, "head": str(s.head) if s.head else None},
                indent=2,
            )
        )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        server = importlib.import_module("memstore.protocol.server")
    except ImportError as e:
        print(
            f"memstore serve needs the server extra ({e.name} is missing): "
            'pip install "memstore-engine[server]"',
            file=sys.stderr,
        )
        return 2
    mounts = []
    if not getattr(args, "no_ui", False):  # the browser inspector at /ui (memstore.ui)
        mounts.append(importlib.import_module("memstore.ui").install)
    code: int = server.serve(args, mounts=mounts)
    return code


class _ReadProgress:
    """Iterate a text file's lines, drawing how much was read on stderr."""

    def __init__(self, fp: IO[str], total: int) -> None:
        self._fp, self._total, self._read, self._shown = fp, max(total, 1), 0, -1

    def __iter__(self) -> Iterator[str]:
        for line in self._fp:
            self._read += len(line.encode("utf-8"))
            pct = min(100, self._read * 100 // self._total)
            if pct != self._shown:
                self._shown = pct
                sys.stderr.write(f"\rmemstore: reading [{'#' * (pct // 4):<25}] {pct}%")
                sys.stderr.flush()
            yield line
        sys.stderr.write("\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memstore", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"memstore {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--data", default=DEFAULT_DATA, help="the data folder (default ./data)")
        p.add_argument(
            "--embedder", default="auto", help="auto, local, hash or none (default auto)"
        )
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = command("add", "store a note")
    p.add_argument("text")
    p.add_argument("--partition")
    for name in ("kind", "confidence", "origin", "subject", "event-date", "title"):
        p.add_argument(f"--{name}", dest=name.replace("-", "_"))
    p.set_defaults(fn=cmd_add)

    p = command("search", "hybrid search")
    p.add_argument("query")
    p.add_argument("--partition")
    p.add_argument("--kind", default="")
    p.add_argument("--limit", type=int, default=10)
    p.set_defaults(fn=cmd_search)

    p = command("get", "print one item")
    p.add_argument("id")
    p.set_defaults(fn=cmd_get)

    p = command("forget", "delete an item (soft; --hard erases every version)")
    p.add_argument("id")
    p.add_argument("--hard", action="store_true")
    p.set_defaults(fn=cmd_forget)

    p = command("export", "write items with their history as NDJSON")
    p.add_argument("--partition")
    p.add_argument("-o", "--output")
    p.set_defaults(fn=cmd_export)

    p = command("import", "load an export")
    p.add_argument("file")
    p.set_defaults(fn=cmd_import)

    p = command("stats", "counts and the journal head")
    p.set_defaults(fn=cmd_stats)

    p = command("serve", "run the MemoryProtocol 0.1 HTTP server")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
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
    p.add_argument("--rate-per-second", type=float, default=60.0, help="per tenant (default 60)")
    p.add_argument("--rate-burst", type=int, default=120, help="per tenant (default 120)")
    p.add_argument(
        "--metrics-disabled",
        action="store_true",
        help="answer GET /metrics with 404 (it needs no token and names the tenants)",
    )
    p.add_argument(
        "--sse-keepalive",
        type=float,
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
    p.add_argument(
        "--no-ui",
        action="store_true",
        help="do not serve the browser memory inspector at /ui (served by default)",
    )
    p.set_defaults(fn=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.embedder == "none":
        args.embedder = None
    try:
        code: int = args.fn(args)
    except (MemstoreError, OSError) as e:
        print(f"memstore: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
